package directory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
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
// connection per relay (relayConn). Each connection follows the kind-1
// notes of the registered, unbanned authors and catches up on those stored
// since their registration, paging back with until (subscribeRelay); when
// it ends (connection lost, CLOSED by the relay) it starts again after a
// growing delay; when the set of authors changes it moves to the new set
// on the same connection.
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

// authorFilters splits authors into kind-1 filters of at most perFilter
// authors, in order of registration, so that the authors of one filter
// registered close together; each filter asks from its earliest
// registration (notes dated before an author's own registration are read
// but never count). live filters ask for no stored event (limit 0).
func authorFilters(authors []agents.Author, perFilter int, live bool) nostr.Filters {
	sorted := slices.Clone(authors)
	slices.SortStableFunc(sorted, func(a, b agents.Author) int { return cmp.Compare(a.FirstRegisteredAt, b.FirstRegisteredAt) })
	perFilter = max(1, perFilter)
	var out nostr.Filters
	for start := 0; start < len(sorted); start += perFilter {
		chunk := sorted[start:min(start+perFilter, len(sorted))]
		f := nostr.Filter{Kinds: []int{nostr.KindTextNote}, Authors: make([]string, len(chunk)), LimitZero: live}
		for i, a := range chunk {
			f.Authors[i] = a.Pubkey
		}
		since := nostr.Timestamp(chunk[0].FirstRegisteredAt)
		f.Since = &since
		out = append(out, f)
	}
	return out
}

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
// the relay stored. A relay reads its store and then registers a
// subscription (khatru v0.19.1 handlers.go), so a note arriving in between
// would be lost to a request that did both.
//
// The catch-up of an author reads from its registration, every time the
// connection starts: created_at is what the author wrote, not when the
// relay received the note, so a note published while nobody listened may
// be dated anywhere since the registration, and no position by date can
// say where the unread notes stop. Each note counts once by id (the store
// remembers every counted id), so reading again counts nothing twice, and
// ids already counted skip the signature check.
//
// When the set of authors changes, the connection stays: the new set's
// live subscriptions open, and only once the relay acknowledged them do the
// previous ones close (make before break: the authors followed all along
// are never without a live subscription), then the catch-up reads the
// authors new to this connection, from their registration.
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
	conn, err := dialRelay(ctx, relayURL, d.relayFetcher, func(notice string) {
		d.opts.Logger.Debug("relay notice", zap.String("relay", relayURL), zap.String("notice", notice))
	})
	if err != nil {
		return false, err
	}
	defer conn.close()
	d.opts.Logger.Debug("connected to relay", zap.String("relay", relayURL), zap.Int("authors", len(authors)))

	rd := &relayReader{d: d, conn: conn, relayURL: relayURL}
	followed := map[string]bool{} // authors with a live subscription on this connection
	var open []string             // the live subscriptions
	for gen := 0; ; gen++ {
		if gen > 0 {
			if authors, err = d.agents.Authors(ctx); err != nil {
				return rd.progressed, fmt.Errorf("list registered agents: %w", err)
			}
		}
		// The live subscriptions, relayMaxFiltersPerREQ filters to a
		// request.
		live := authorFilters(authors, perFilter, true)
		pending := map[string]bool{}
		var ids []string
		for k := 0; k*relayMaxFiltersPerREQ < len(live); k++ {
			id := fmt.Sprintf("live-%d-%d", gen, k)
			pending[id] = true
			ids = append(ids, id)
			if err := conn.req(ctx, id, live[k*relayMaxFiltersPerREQ:min((k+1)*relayMaxFiltersPerREQ, len(live))]); err != nil {
				return rd.progressed, err
			}
		}
		if err := rd.await(ctx, func(m relayMsg) (bool, error) {
			if pending[m.sub] && m.kind == "EOSE" {
				delete(pending, m.sub)
			}
			return len(pending) == 0, nil
		}); err != nil || ctx.Err() != nil {
			return rd.progressed, err
		}
		for _, id := range open {
			if err := conn.unsub(ctx, id); err != nil {
				return rd.progressed, err
			}
		}
		open = ids

		// Catch up on the authors new to this connection, every filter
		// paged back to their registration.
		var fresh []agents.Author
		for _, a := range authors {
			if !followed[a.Pubkey] {
				fresh = append(fresh, a)
			}
		}
		for i, f := range authorFilters(fresh, perFilter, false) {
			if err := rd.catchUp(ctx, fmt.Sprintf("catchup-%d-%d", gen, i), f); err != nil || ctx.Err() != nil {
				return rd.progressed, err
			}
		}
		if err := rd.flush(ctx); err != nil {
			return rd.progressed, err
		}
		clear(followed)
		for _, a := range authors {
			followed[a.Pubkey] = true
		}
		d.relayLive.Add(1)
		if again, err := rd.follow(ctx, restart); !again || err != nil {
			return rd.progressed, err
		}
	}
}

// follow takes the live notes until the connection ends (an error), ctx
// ends (false) or the set of authors changed (true), once a burst of
// registrations has settled for RegenerateDelay.
func (rd *relayReader) follow(ctx context.Context, restart chan struct{}) (bool, error) {
	var settle *time.Timer
	var settled <-chan time.Time
	defer func() {
		if settle != nil {
			settle.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-restart:
			if settle == nil {
				settle = time.NewTimer(rd.d.opts.RegenerateDelay)
				settled = settle.C
			}
		case <-settled:
			return true, nil
		case <-rd.conn.done:
			if ctx.Err() != nil {
				return false, nil
			}
			return false, rd.conn.lost()
		case m := <-rd.conn.in:
			if err := rd.take(m); err != nil {
				return false, err
			}
			// Drain what is already there into the same batch.
		drain:
			for len(rd.batch) < relayMaxBatch {
				select {
				case m := <-rd.conn.in:
					if err := rd.take(m); err != nil {
						return false, err
					}
				default:
					break drain
				}
			}
			if err := rd.flush(ctx); err != nil {
				return false, err
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
	// progressed: the relay answered.
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
}

// flush records the batch. Notes already counted are left out before
// their signatures are checked: a catch-up reads every note since the
// registration again, and a relay that lies about an id it sends gains
// nothing, the id being counted already.
func (rd *relayReader) flush(ctx context.Context) error {
	if len(rd.batch) == 0 {
		return nil
	}
	ids := make([]string, len(rd.batch))
	for i, e := range rd.batch {
		ids[i] = e.ID
	}
	seen, err := rd.d.agents.Seen(ctx, ids)
	if err != nil {
		return fmt.Errorf("read counted posts: %w", err)
	}
	evts := rd.batch[:0]
	for i, e := range rd.batch {
		if !seen[i] {
			evts = append(evts, e)
		}
	}
	rd.batch = rd.batch[:0]
	if len(evts) == 0 {
		return nil
	}
	res := make([]OKResult, len(evts))
	if err := rd.d.ingestPosts(ctx, evts, res, false); err != nil {
		return fmt.Errorf("record posts: %w", err)
	}
	return nil
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
