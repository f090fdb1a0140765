package directory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
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
	for ctx.Err() == nil {
		progressed, err := d.subscribeRelay(ctx, relayURL, restart)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			wait = d.opts.RelayRetryMin
		}
		if errors.Is(err, errRestart) {
			// Let a burst of registrations settle into one resubscription.
			if !sleep(ctx, d.opts.RegenerateDelay) {
				return
			}
			continue
		}
		log.Warn("relay subscription ended; reconnecting", zap.Error(err), zap.Duration("retry_in", wait))
		if !sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, d.opts.RelayRetryMax)
	}
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

// subscribeRelay runs one connection to a relay until it ends: catch-up,
// then live. progressed reports whether the relay answered (end of stored
// events or an event), which resets the reconnection delay.
func (d *Directory) subscribeRelay(ctx context.Context, relayURL string, restart chan struct{}) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	authors, err := d.agents.Pubkeys(ctx)
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
	since, err := d.relaySince(ctx, relayURL)
	if err != nil {
		return false, err
	}
	filters := make(nostr.Filters, 0, len(authors)/relayAuthorsPerFilter+1)
	for start := 0; start < len(authors); start += relayAuthorsPerFilter {
		filters = append(filters, nostr.Filter{Kinds: []int{nostr.KindTextNote}, Authors: authors[start:min(start+relayAuthorsPerFilter, len(authors))]})
	}
	conn, err := dialRelay(ctx, relayURL, d.relayFetcher, func(notice string) {
		d.opts.Logger.Debug("relay notice", zap.String("relay", relayURL), zap.String("notice", notice))
	})
	if err != nil {
		return false, err
	}
	defer conn.close()
	d.opts.Logger.Debug("connected to relay", zap.String("relay", relayURL), zap.Int("authors", len(authors)), zap.Int64("since", since))

	// Catch up: every filter paged back to the cursor. The cursor moves only
	// once all of it is recorded, so a connection lost half-way starts the
	// catch-up again rather than skipping what was not read yet.
	startedAt := d.now().Unix()
	var newest int64
	for i, f := range filters {
		n, err := d.catchUp(ctx, conn, fmt.Sprintf("catchup-%d", i), f, since)
		if err != nil || ctx.Err() != nil {
			return progressed, err
		}
		progressed = true
		newest = max(newest, n)
	}
	if newest > 0 {
		if err := d.agents.SetRelayCursor(ctx, relayURL, min(newest, d.now().Unix())); err != nil {
			return progressed, fmt.Errorf("save relay cursor: %w", err)
		}
	}

	// Live: from a little before the catch-up began (what was posted
	// during it comes as stored events again, counted once by id).
	live := max(since, startedAt-int64(relayResumeOverlap/time.Second))
	for i := range filters {
		ts := nostr.Timestamp(live)
		filters[i].Since = &ts
	}
	if err := conn.req(ctx, "live", filters); err != nil {
		return progressed, err
	}
	batch := make([]*nostr.Event, 0, relayMaxBatch)
	for {
		select {
		case <-ctx.Done():
			return progressed, nil
		case <-restart:
			return progressed, errRestart
		case <-conn.done:
			if ctx.Err() != nil {
				return progressed, nil
			}
			return progressed, conn.lost()
		case m := <-conn.in:
			if m.sub != "live" {
				continue // a late answer to a finished catch-up page
			}
			var closed *relayMsg
			if m.kind == "EVENT" {
				progressed = true
				batch = append(batch[:0], m.event)
			drain:
				for len(batch) < relayMaxBatch {
					select {
					case m := <-conn.in:
						switch {
						case m.sub != "live":
						case m.kind == "EVENT":
							batch = append(batch, m.event)
						case m.kind == "EOSE":
							d.relayLive.Add(1)
						case m.kind == "CLOSED":
							closed = &m
							break drain
						}
					default:
						break drain
					}
				}
				if err := d.ingestRelayBatch(ctx, relayURL, batch); err != nil {
					return progressed, err
				}
			}
			switch {
			case m.kind == "EOSE":
				progressed = true
				d.relayLive.Add(1)
			case m.kind == "CLOSED":
				closed = &m
			}
			if closed != nil {
				return progressed, fmt.Errorf("the relay closed the subscription: %s", closed.reason)
			}
		}
	}
}

// catchUp reads the stored events of one filter since since, newest first
// as relays answer, paging back with until: a relay caps what one REQ
// returns (commonly 500), so a page that brought anything is followed by
// one ending at its oldest event (until is inclusive; events of that second
// come again and are counted once by id). It stops at a page that brings no
// event the previous page did not, which is also where a relay that caps
// below the number of events sharing one second stops us. Posts are
// recorded page by page; it returns the newest created_at seen.
func (d *Directory) catchUp(ctx context.Context, conn *relayConn, id string, f nostr.Filter, since int64) (newest int64, err error) {
	if since > 0 {
		ts := nostr.Timestamp(since)
		f.Since = &ts
	}
	var prev map[string]struct{}
	batch := make([]*nostr.Event, 0, relayMaxBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res := make([]OKResult, len(batch))
		if err := d.ingestPosts(ctx, batch, res, false); err != nil {
			return fmt.Errorf("record posts: %w", err)
		}
		batch = batch[:0]
		return nil
	}
	for page := 0; ; page++ {
		if err := conn.req(ctx, id, nostr.Filters{f}); err != nil {
			return newest, err
		}
		cur := make(map[string]struct{}, len(prev))
		fresh := 0
		var oldest nostr.Timestamp
		timeout := time.NewTimer(relayPageTimeout)
	read:
		for {
			select {
			case <-ctx.Done():
				timeout.Stop()
				return newest, nil
			case <-timeout.C:
				return newest, fmt.Errorf("no end of stored events within %v", relayPageTimeout)
			case <-conn.done:
				timeout.Stop()
				if ctx.Err() != nil {
					return newest, nil
				}
				return newest, conn.lost()
			case m := <-conn.in:
				if m.sub != id {
					continue
				}
				switch m.kind {
				case "CLOSED":
					timeout.Stop()
					return newest, fmt.Errorf("the relay closed the subscription: %s", m.reason)
				case "EOSE":
					timeout.Stop()
					break read
				case "EVENT":
					e := m.event
					if _, ok := prev[e.ID]; !ok {
						fresh++
					}
					cur[e.ID] = struct{}{}
					if oldest == 0 || e.CreatedAt < oldest {
						oldest = e.CreatedAt
					}
					newest = max(newest, int64(e.CreatedAt))
					if batch = append(batch, e); len(batch) == relayMaxBatch {
						if err := flush(); err != nil {
							return newest, err
						}
					}
				}
			}
		}
		if err := flush(); err != nil {
			return newest, err
		}
		if err := conn.unsub(ctx, id); err != nil {
			return newest, err
		}
		if fresh == 0 {
			if page > 0 {
				d.opts.Logger.Debug("relay catch-up done", zap.Int("pages", page+1))
			}
			return newest, nil
		}
		until := oldest
		f.Until = &until
		prev = cur
	}
}

// relaySince is where a subscription to relayURL resumes: a little before
// the newest post seen from it, or, for a relay never read, the earliest
// registration (posts dated before it never count).
func (d *Directory) relaySince(ctx context.Context, relayURL string) (int64, error) {
	cursor, err := d.agents.RelayCursor(ctx, relayURL)
	if err != nil {
		return 0, fmt.Errorf("read relay cursor: %w", err)
	}
	if cursor > 0 {
		return max(cursor-int64(relayResumeOverlap/time.Second), 0), nil
	}
	var earliest int64
	err = d.agents.Each(ctx, func(a *agents.Agent, _ *agents.Activity, banned bool) error {
		if !banned && (earliest == 0 || a.FirstRegisteredAt < earliest) {
			earliest = a.FirstRegisteredAt
		}
		return nil
	})
	return earliest, err
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
