package directory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage"
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

// startRelays subscribes to every configured relay, one goroutine per
// relay, through one go-nostr pool. Each subscription asks for kind-1 notes
// of the registered, unbanned authors since the relay's stored cursor;
// when it ends (connection lost, CLOSED by the relay) it starts again after
// a growing delay, and when the set of authors changes it starts again at
// once with the new set.
func (d *Directory) startRelays() {
	d.pool = nostr.NewSimplePool(d.ctx, nostr.WithRelayOptions(
		nostr.WithNoticeHandler(func(notice string) {
			d.opts.Logger.Debug("relay notice", zap.String("notice", notice))
		}),
	))
	restarts := make([]chan struct{}, len(d.opts.Relays))
	for i, u := range d.opts.Relays {
		restarts[i] = make(chan struct{}, 1)
		d.wg.Add(1)
		go d.followRelay(nostr.NormalizeURL(u), restarts[i])
	}
	// Fan the "authors changed" signal out to every relay goroutine.
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			select {
			case <-d.ctx.Done():
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

// closeRelays closes the pool's connections once the subscriptions ended.
func (d *Directory) closeRelays() {
	if d.pool == nil {
		return
	}
	d.pool.Close("directory closed")
	for _, r := range d.pool.Relays.Range {
		if r != nil {
			r.Close()
		}
	}
}

func (d *Directory) followRelay(relayURL string, restart chan struct{}) {
	defer d.wg.Done()
	log := d.opts.Logger.With(zap.String("relay", relayURL))
	wait := d.opts.RelayRetryMin
	for d.ctx.Err() == nil {
		progressed, err := d.subscribeRelay(relayURL, restart)
		if d.ctx.Err() != nil {
			return
		}
		if progressed {
			wait = d.opts.RelayRetryMin
		}
		if errors.Is(err, errRestart) {
			// Let a burst of registrations settle into one resubscription.
			if !d.sleep(d.opts.RegenerateDelay) {
				return
			}
			continue
		}
		log.Warn("relay subscription ended; reconnecting", zap.Error(err), zap.Duration("retry_in", wait))
		if !d.sleep(wait) {
			return
		}
		wait = min(2*wait, d.opts.RelayRetryMax)
	}
}

// sleep waits for t or until the directory closes (then it returns false).
func (d *Directory) sleep(t time.Duration) bool {
	timer := time.NewTimer(t)
	defer timer.Stop()
	select {
	case <-d.ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// subscribeRelay runs one subscription until it ends. progressed reports
// whether the relay answered (end of stored events or an event), which
// resets the reconnection delay.
func (d *Directory) subscribeRelay(relayURL string, restart chan struct{}) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	u, _ := url.Parse(relayURL)
	if !d.opts.AllowPrivate {
		if err := safefetch.CheckHost(ctx, u.Hostname()); err != nil {
			return false, err
		}
	}
	authors, err := d.store.AgentPubkeys()
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
	since, err := d.relaySince(relayURL)
	if err != nil {
		return false, err
	}
	filters := make(nostr.Filters, 0, len(authors)/relayAuthorsPerFilter+1)
	for start := 0; start < len(authors); start += relayAuthorsPerFilter {
		f := nostr.Filter{Kinds: []int{nostr.KindTextNote}, Authors: authors[start:min(start+relayAuthorsPerFilter, len(authors))]}
		if since > 0 {
			ts := nostr.Timestamp(since)
			f.Since = &ts
		}
		filters = append(filters, f)
	}
	relay, err := d.pool.EnsureRelay(relayURL)
	if err != nil {
		return false, err
	}
	sub, err := relay.Subscribe(ctx, filters)
	if err != nil {
		return false, err
	}
	defer sub.Unsub()
	d.opts.Logger.Debug("subscribed to relay", zap.String("relay", relayURL), zap.Int("authors", len(authors)), zap.Int64("since", since))
	batch := make([]*nostr.Event, 0, relayMaxBatch)
	for {
		select {
		case <-ctx.Done():
			return progressed, nil
		case <-restart:
			return progressed, errRestart
		case <-sub.EndOfStoredEvents:
			progressed = true
		case reason := <-sub.ClosedReason:
			return progressed, fmt.Errorf("the relay closed the subscription: %s", reason)
		case evt, ok := <-sub.Events:
			if !ok {
				if ctx.Err() != nil {
					return progressed, nil
				}
				return progressed, fmt.Errorf("connection lost: %v", relay.ConnectionError)
			}
			progressed = true
			batch = append(batch[:0], evt)
		drain:
			for len(batch) < relayMaxBatch {
				select {
				case e, ok := <-sub.Events:
					if !ok {
						break drain
					}
					batch = append(batch, e)
				default:
					break drain
				}
			}
			if err := d.ingestRelayBatch(relayURL, batch); err != nil {
				return progressed, err
			}
		}
	}
}

// relaySince is where a subscription to relayURL resumes: a little before
// the newest post seen from it, or, for a relay never read, the earliest
// registration (posts dated before it never count).
func (d *Directory) relaySince(relayURL string) (int64, error) {
	cursor, err := d.store.AgentRelayCursor(relayURL)
	if err != nil {
		return 0, fmt.Errorf("read relay cursor: %w", err)
	}
	if cursor > 0 {
		return max(cursor-int64(relayResumeOverlap/time.Second), 0), nil
	}
	var earliest int64
	err = d.store.EachAgent(func(a *storage.Agent, _ *storage.AgentActivity, banned bool) error {
		if !banned && (earliest == 0 || a.FirstRegisteredAt < earliest) {
			earliest = a.FirstRegisteredAt
		}
		return nil
	})
	return earliest, err
}

// ingestRelayBatch records posts read from a relay and moves its cursor to
// the newest created_at among them (never past the present, so a post
// dated in the future cannot make the subscription skip what comes next).
func (d *Directory) ingestRelayBatch(relayURL string, evts []*nostr.Event) error {
	res := make([]OKResult, len(evts))
	if err := d.ingestPosts(evts, res, false); err != nil {
		return fmt.Errorf("record posts: %w", err)
	}
	var newest int64
	for _, e := range evts {
		newest = max(newest, int64(e.CreatedAt))
	}
	newest = min(newest, d.now().Unix())
	if err := d.store.SetAgentRelayCursor(relayURL, newest); err != nil {
		return fmt.Errorf("save relay cursor: %w", err)
	}
	return nil
}
