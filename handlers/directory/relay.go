package directory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage/agents"
)

const (
	// relayAuthorsPerFilter splits the registered authors into filters of
	// this size (relays commonly cap the authors of one filter).
	relayAuthorsPerFilter = 500
	// relayResumeOverlap is how far before the stored cursor a subscription
	// resumes: events can arrive slightly out of created_at order, and posts
	// are counted once by id, so reading a little again costs nothing.
	relayResumeOverlap = time.Hour
	// relayMaxBatch bounds the events recorded in one transaction.
	relayMaxBatch = 256
	// relayMaxFiltersPerREQ bounds the filters of one live REQ (relays
	// commonly cap them, strfry and nostr-rs-relay at 10 or so).
	relayMaxFiltersPerREQ = 10
	// relayPageTimeout bounds the wait for one catch-up page's end of
	// stored events; past it the connection starts again.
	relayPageTimeout = 2 * time.Minute
	// maxRelayURLLen bounds a configured relay URL.
	maxRelayURLLen = 2048
)

// errRestart ends a subscription so that it starts again with the current
// set of registered authors.
var errRestart = errors.New("registered authors changed")

// checkRelayURL accepts ws:// and wss:// URLs with a host and no credentials.
func checkRelayURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil, len(s) > maxRelayURLLen:
		return fmt.Errorf("relay %q is not a URL", s)
	case u.Scheme != "ws" && u.Scheme != "wss":
		return fmt.Errorf("relay %q must be a ws:// or wss:// URL", s)
	case u.Hostname() == "":
		return fmt.Errorf("relay %q has no host", s)
	case u.User != nil:
		return fmt.Errorf("relay %q must not carry credentials", s)
	case u.Fragment != "":
		return fmt.Errorf("relay %q must not have a #fragment", s)
	}
	return nil
}

// startRelays subscribes to every configured relay, one goroutine and one
// connection per relay (relayConn). Each subscription first catches up on
// the kind-1 notes of the registered, unbanned authors since the relay's
// stored cursor, paging back with until, then follows new ones; when it
// ends (connection lost, CLOSED by the relay) it starts again after a
// growing delay, and when the set of authors changes it starts again at
// once with the new set.
func (d *Directory) startRelays(ctx context.Context, wg *sync.WaitGroup) {
	restarts := make([]chan struct{}, len(d.opts.Relays))
	for i, u := range d.opts.Relays {
		restarts[i] = make(chan struct{}, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.followRelay(ctx, nostr.NormalizeURL(u), restarts[i])
		}()
	}
	// Fan the "authors changed" signal out to every relay goroutine.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.authorsCh:
				for _, ch := range restarts {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
}

func (d *Directory) followRelay(ctx context.Context, relayURL string, restart chan struct{}) {
	log := d.opts.Logger.With(zap.String("relay", relayURL))
	wait := d.opts.RelayRetryMin
	perFilter := relayAuthorsPerFilter
	for ctx.Err() == nil {
		progressed, err := d.subscribeRelay(ctx, relayURL, restart, perFilter)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			wait = d.opts.RelayRetryMin
		}
		var refused *filterRefusedError
		switch {
		case errors.Is(err, errRestart):
			// Let a burst of registrations settle into one resubscription.
			if !sleep(ctx, d.opts.RegenerateDelay) {
				return
			}
			continue
		case errors.As(err, &refused) && perFilter > 1:
			// The relay refuses filters this large (a cap on authors or
			// on the size of a request): ask again with smaller ones.
			perFilter = max(1, perFilter/2)
			log.Info("relay refused a filter; splitting the authors further", zap.String("reason", refused.reason), zap.Int("authors_per_filter", perFilter))
			continue
		}
		log.Warn("relay subscription ended; reconnecting", zap.Error(err), zap.Duration("retry_in", wait))
		if !sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, d.opts.RelayRetryMax)
	}
}

// filterRefusedError: the relay answered a request with CLOSED for a reason
// that smaller filters may avoid.
type filterRefusedError struct{ reason string }

func (e *filterRefusedError) Error() string {
	return "the relay closed the subscription: " + e.reason
}

// closedError is the error of a subscription the relay CLOSED: a
// filterRefusedError unless the reason says that smaller filters would not
// help (NIP-01 prefixes auth-required:, rate-limited:, restricted:).
func closedError(reason string) error {
	for _, p := range []string{"auth-required:", "rate-limited:", "restricted:"} {
		if strings.HasPrefix(reason, p) {
			return fmt.Errorf("the relay closed the subscription: %s", reason)
		}
	}
	return &filterRefusedError{reason}
}

// sleep waits for t or until ctx ends (then it returns false).
func sleep(ctx context.Context, t time.Duration) bool {
	timer := time.NewTimer(t)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// isLive reports whether sub is one of the live subscriptions.
func isLive(sub string) bool { return strings.HasPrefix(sub, "live-") }

// subscribeRelay runs one connection to a relay until it ends. progressed
// reports whether the relay answered (end of stored events or an event),
// which resets the reconnection delay.
//
// No note may fall between what is stored and what is new, so the live
// subscriptions open first and the stored notes are read after them: the
// live ones ask for no stored event (limit 0) and for every note dated from
// its author's registration on (not only from now, since a note may reach
// the relay long after its created_at); once the relay acknowledged them
// (EOSE: from then on it sends what it receives), the catch-up reads what
// the relay stored since the cursor, paging back per filter. A relay reads
// its store and then registers a subscription (khatru v0.19.1
// handlers.go), so a note arriving in between would be lost to a request
// that did both.
func (d *Directory) subscribeRelay(ctx context.Context, relayURL string, restart chan struct{}, perFilter int) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	authors, err := d.agents.Authors(ctx)
	if err != nil {
		return false, fmt.Errorf("list registered agents: %w", err)
	}
	if len(authors) == 0 {
		select {
		case <-ctx.Done():
			return false, nil
		case <-restart:
			return true, errRestart
		}
	}
	since, err := d.relaySince(ctx, relayURL, authors)
	if err != nil {
		return false, err
	}
	perFilter = max(1, perFilter)
	var live nostr.Filters
	for start := 0; start < len(authors); start += perFilter {
		chunk := authors[start:min(start+perFilter, len(authors))]
		f := nostr.Filter{Kinds: []int{nostr.KindTextNote}, Authors: make([]string, len(chunk)), LimitZero: true}
		from := chunk[0].FirstRegisteredAt
		for i, a := range chunk {
			f.Authors[i] = a.Pubkey
			from = min(from, a.FirstRegisteredAt)
		}
		ts := nostr.Timestamp(from)
		f.Since = &ts
		live = append(live, f)
	}
	conn, err := dialRelay(ctx, relayURL, d.relayFetcher, func(notice string) {
		d.opts.Logger.Debug("relay notice", zap.String("relay", relayURL), zap.String("notice", notice))
	})
	if err != nil {
		return false, err
	}
	defer conn.close()
	d.opts.Logger.Debug("connected to relay", zap.String("relay", relayURL), zap.Int("authors", len(authors)), zap.Int64("since", since))

	// The live subscriptions, relayMaxFiltersPerREQ filters to a request.
	rd := &relayReader{d: d, conn: conn, relayURL: relayURL}
	pending := map[string]bool{}
	for k := 0; k*relayMaxFiltersPerREQ < len(live); k++ {
		id := fmt.Sprintf("live-%d", k)
		pending[id] = true
		if err := conn.req(ctx, id, live[k*relayMaxFiltersPerREQ:min((k+1)*relayMaxFiltersPerREQ, len(live))]); err != nil {
			return progressed, err
		}
	}
	if err := rd.await(ctx, func(m relayMsg) (bool, error) {
		if isLive(m.sub) && m.kind == "EOSE" {
			delete(pending, m.sub)
		}
		return len(pending) == 0, nil
	}); err != nil {
		return rd.progressed, err
	}

	// Catch up: every filter paged back to the cursor. The cursor moves only
	// once all of it is recorded, so a connection lost half-way starts the
	// catch-up again rather than skipping what was not read yet.
	for i, f := range live {
		f.LimitZero = false
		// Notes dated before the filter's earliest registration never count.
		ts := max(nostr.Timestamp(since), *f.Since)
		f.Since = &ts
		if err := rd.catchUp(ctx, fmt.Sprintf("catchup-%d", i), f); err != nil || ctx.Err() != nil {
			return rd.progressed, err
		}
	}
	if err := rd.flush(ctx); err != nil {
		return rd.progressed, err
	}
	if rd.newest > 0 {
		if err := d.agents.SetRelayCursor(ctx, relayURL, min(rd.newest, d.now().Unix())); err != nil {
			return rd.progressed, fmt.Errorf("save relay cursor: %w", err)
		}
	}
	d.relayLive.Add(1)

	// Live.
	for {
		select {
		case <-ctx.Done():
			return rd.progressed, nil
		case <-restart:
			return rd.progressed, errRestart
		case <-conn.done:
			if ctx.Err() != nil {
				return rd.progressed, nil
			}
			return rd.progressed, conn.lost()
		case m := <-conn.in:
			if err := rd.take(m); err != nil {
				return rd.progressed, err
			}
			// Drain what is already there into the same batch.
		drain:
			for len(rd.batch) < relayMaxBatch {
				select {
				case m := <-conn.in:
					if err := rd.take(m); err != nil {
						return rd.progressed, err
					}
				default:
					break drain
				}
			}
			if err := rd.flushLive(ctx); err != nil {
				return rd.progressed, err
			}
		}
	}
}

// relayReader reads one relay connection: the notes of the live
// subscriptions, whenever they come, and those of catch-up pages, recorded
// in batches.
type relayReader struct {
	d        *Directory
	conn     *relayConn
	relayURL string
	batch    []*nostr.Event
	// newest is the newest created_at read; progressed: the relay
	// answered.
	newest     int64
	progressed bool
}

// take handles a message of a live subscription (others are late answers to
// finished catch-up pages): an EVENT joins the batch, CLOSED ends the
// connection.
func (rd *relayReader) take(m relayMsg) error {
	if !isLive(m.sub) {
		return nil
	}
	switch m.kind {
	case "EVENT":
		rd.progressed = true
		rd.add(m.event)
	case "CLOSED":
		return closedError(m.reason)
	}
	return nil
}

func (rd *relayReader) add(e *nostr.Event) {
	rd.batch = append(rd.batch, e)
	rd.newest = max(rd.newest, int64(e.CreatedAt))
}

// flush records the batch.
func (rd *relayReader) flush(ctx context.Context) error {
	if len(rd.batch) == 0 {
		return nil
	}
	res := make([]OKResult, len(rd.batch))
	if err := rd.d.ingestPosts(ctx, rd.batch, res, false); err != nil {
		return fmt.Errorf("record posts: %w", err)
	}
	rd.batch = rd.batch[:0]
	return nil
}

// flushLive records the batch of live notes and moves the cursor.
func (rd *relayReader) flushLive(ctx context.Context) error {
	if len(rd.batch) == 0 {
		return nil
	}
	evts := rd.batch
	rd.batch = nil
	return rd.d.ingestRelayBatch(ctx, rd.relayURL, evts)
}

// await reads messages until done says so, taking live notes on the way;
// done sees every message.
func (rd *relayReader) await(ctx context.Context, done func(relayMsg) (bool, error)) error {
	timeout := time.NewTimer(relayPageTimeout)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timeout.C:
			return fmt.Errorf("no end of stored events within %v", relayPageTimeout)
		case <-rd.conn.done:
			if ctx.Err() != nil {
				return nil
			}
			return rd.conn.lost()
		case m := <-rd.conn.in:
			if m.kind == "EOSE" {
				rd.progressed = true
			}
			if err := rd.take(m); err != nil {
				return err
			}
			ok, err := done(m)
			if err == nil && len(rd.batch) >= relayMaxBatch {
				err = rd.flush(ctx)
			}
			if ok || err != nil {
				return err
			}
		}
	}
}

// catchUp reads the stored events of filter f (with its since), newest
// first as relays answer, paging back with until: a relay caps what one REQ
// returns (commonly 500), so a page that brought anything is followed by
// one ending at its oldest event (until is inclusive; events of that second
// come again and are counted once by id). It stops at a page that brings no
// event the previous page did not, which is also where a relay that caps
// below the number of events sharing one second stops us.
func (rd *relayReader) catchUp(ctx context.Context, id string, f nostr.Filter) error {
	var prev map[string]struct{}
	for page := 0; ; page++ {
		if err := rd.conn.req(ctx, id, nostr.Filters{f}); err != nil {
			return err
		}
		cur := make(map[string]struct{}, len(prev))
		fresh := 0
		var oldest nostr.Timestamp
		err := rd.await(ctx, func(m relayMsg) (bool, error) {
			if m.sub != id {
				return false, nil
			}
			switch m.kind {
			case "CLOSED":
				return true, closedError(m.reason)
			case "EOSE":
				return true, nil
			case "EVENT":
				e := m.event
				if _, ok := prev[e.ID]; !ok {
					fresh++
				}
				cur[e.ID] = struct{}{}
				if oldest == 0 || e.CreatedAt < oldest {
					oldest = e.CreatedAt
				}
				rd.add(e)
			}
			return false, nil
		})
		if err != nil || ctx.Err() != nil {
			return err
		}
		if err := rd.flush(ctx); err != nil {
			return err
		}
		if err := rd.conn.unsub(ctx, id); err != nil {
			return err
		}
		if fresh == 0 {
			if page > 0 {
				rd.d.opts.Logger.Debug("relay catch-up done", zap.Int("pages", page+1))
			}
			return nil
		}
		until := oldest
		f.Until = &until
		prev = cur
	}
}

// relaySince is where the catch-up of relayURL resumes: a little before the
// newest post seen from it, or, for a relay never read, the earliest
// registration of authors (posts dated before it never count).
func (d *Directory) relaySince(ctx context.Context, relayURL string, authors []agents.Author) (int64, error) {
	cursor, err := d.agents.RelayCursor(ctx, relayURL)
	if err != nil {
		return 0, fmt.Errorf("read relay cursor: %w", err)
	}
	if cursor > 0 {
		return max(cursor-int64(relayResumeOverlap/time.Second), 0), nil
	}
	var earliest int64
	for _, a := range authors {
		if earliest == 0 || a.FirstRegisteredAt < earliest {
			earliest = a.FirstRegisteredAt
		}
	}
	return earliest, nil
}

// ingestRelayBatch records posts read from a relay and moves its cursor
// forward to the newest created_at among them: never back, and never past
// the present, so a post dated in the future cannot make the subscription
// skip what comes next.
func (d *Directory) ingestRelayBatch(ctx context.Context, relayURL string, evts []*nostr.Event) error {
	res := make([]OKResult, len(evts))
	if err := d.ingestPosts(ctx, evts, res, false); err != nil {
		return fmt.Errorf("record posts: %w", err)
	}
	var newest int64
	for _, e := range evts {
		newest = max(newest, int64(e.CreatedAt))
	}
	newest = min(newest, d.now().Unix())
	// Relays send stored events newest first: a later batch can be older
	// than the cursor already saved, which must not move back.
	cur, err := d.agents.RelayCursor(ctx, relayURL)
	if err != nil {
		return fmt.Errorf("read relay cursor: %w", err)
	}
	if newest <= cur {
		return nil
	}
	if err := d.agents.SetRelayCursor(ctx, relayURL, newest); err != nil {
		return fmt.Errorf("save relay cursor: %w", err)
	}
	return nil
}
