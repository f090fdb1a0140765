package articles

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// addArticleFromUrl answers at once, as Inboxt's does (it queues a job:
// saved-item-manager.service.ts processAndCreateArticle, Inboxt/inboxt@45f4314),
// and fetches the page in the background. The store holds the queue
// (storage/library/fetches.go): a pending item is saved with its pending-fetch entry
// before the answer, so nothing acknowledged is lost if the process stops;
// the store's queue (libraryWork) starts with the store's Open on whatever
// is pending, including what an earlier process left unfinished.

// Inboxt's placeholder and failure texts (apps/api/src/common/constants/
// content-extraction.constants.ts, Inboxt/inboxt@45f4314).
const (
	processingTitlePrefix = "Processing item from "
	fetchFailedMessage    = "We couldn’t fetch this page to prepare it for reading. The site may be blocking requests or temporarily unavailable. Please try again later, or try saving a different link."
)

func processingDescription(domain string) string {
	return "Your article from " + domain + " is being prepared for your reading library. We're removing ads, formatting content, and optimizing for readability."
}

const (
	fetchWorkers = 2  // pages fetched at once
	fetchBatch   = 64 // pending entries read from the store at a time
	// importHostInterval spaces the fetches of imported items from one
	// host, one at a time: an import of thousands of links to one site
	// must not hammer it (nor take both workers from other members).
	importHostInterval = time.Second
)

// fetchScanBudget bounds the pending entries one pass of the feeder reads:
// a pass goes on where the last one stopped, so an import of 100,000 links
// waiting on one host costs a pass this many reads, not all of them (25 ms
// per 100,000 every second before).
const fetchScanBudget = 4096

// fetchQueue feeds a store's pending fetches of one fetch policy to a few
// workers: a worker of the store (libraryWork), with the fetcher of the
// latest Service of that policy lent to it.
type fetchQueue struct {
	st      *storage.Store
	private bool // the policy: fetches that may reach private addresses
	lent[*Service]
	// ctx is done when the store closes (Publish's).
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{} // cap 1: something new is pending
	// leading is set while this node holds the policy's lease and works
	// the queue; leads counts the times it took it (tests).
	leading atomic.Bool
	leads   atomic.Int64

	// cursor is where the feeder's next pass reads from (nil: the first
	// entry); the feeder's own.
	cursor []byte
	// scanBudget is fetchScanBudget; a test lowers it before the queue
	// first runs (before a Service is prepared on the store).
	scanBudget int
	// maxRead is the most entries one pass of the feeder read, passes how
	// many passes it made (tests).
	maxRead, passes atomic.Int64
	// fresh are fetches addArticleFromUrl just queued: the feeder sends
	// them before it scans, so a member's save is not behind an import's
	// waiting entries (at most freshMax; beyond, the scan finds them).
	fresh []library.PendingFetch

	// hostWait is set while a kick after importHostInterval is armed.
	hostWait atomic.Bool
	// pausedUntil (Unix ns) is when the queue goes on after the store
	// refused to save a fetch (pause).
	pausedUntil atomic.Int64

	mu       sync.Mutex
	inFlight map[[2]string]bool // queued or being fetched
	hosts    map[string]*hostTurn
}

// hostTurn is when a host may next be fetched for an import.
type hostTurn struct {
	busy bool
	next time.Time
}

// importHost is the host an imported item's fetch is polite to.
func importHost(u string) string { return library.SourceDomain(u) }

// hostReady reports whether an imported item of host may be fetched now;
// take reserves the host until release.
func (q *fetchQueue) hostReady(host string, take bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	h := q.hosts[host]
	if h != nil && (h.busy || time.Now().Before(h.next)) {
		return false
	}
	if take {
		if h == nil {
			h = &hostTurn{}
			q.hosts[host] = h
		}
		h.busy = true
	}
	return true
}

// kickAfterHostInterval kicks the feeder once importHostInterval has
// passed, for entries waiting on a host's turn, unless such a kick is
// already armed: the passes that met them share it. (A timer each would
// make the passes of a second grow with every kick while an import's links
// wait, each pass reading up to scanBudget entries.)
func (q *fetchQueue) kickAfterHostInterval() {
	if q.hostWait.CompareAndSwap(false, true) {
		time.AfterFunc(importHostInterval, func() {
			q.hostWait.Store(false)
			q.kickAll()
		})
	}
}

// pause stops the queue for the wait the store asked for (a full disk: a
// minute) when it refused to save a fetch, and kicks it then. Without it
// every pending page would be fetched, its text dropped and an error
// logged, one after the other, while the disk is full: an import's
// thousands of links fetched for nothing and as many log lines.
func (q *fetchQueue) pause(s *Service, p library.PendingFetch, wait time.Duration, err error) {
	now := time.Now()
	for {
		until := q.pausedUntil.Load()
		if until > now.UnixNano() {
			return // paused already: logged and kicked once
		}
		if q.pausedUntil.CompareAndSwap(until, now.Add(wait).UnixNano()) {
			break
		}
	}
	s.log.Warn("article fetches paused: the store refuses writes; the pending fetches go on by themselves",
		zap.String("item", p.ItemID), zap.Duration("retry_in", wait), zap.Error(err))
	time.AfterFunc(wait, q.kickNow)
}

// paused reports whether the queue waits for the store (pause).
func (q *fetchQueue) paused() bool { return time.Now().UnixNano() < q.pausedUntil.Load() }

// refused pauses the queue when err is the store's refusal for now, and
// reports whether it was.
func (s *Service) refused(p library.PendingFetch, err error) bool {
	_, wait, ok := storage.Unavailable(err)
	if ok {
		s.fetches.pause(s, p, wait, err)
	}
	return ok
}

func (q *fetchQueue) releaseHost(host string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if h := q.hosts[host]; h != nil {
		h.busy, h.next = false, time.Now().Add(importHostInterval)
	}
	// Forget hosts whose turn has come, so the map stays small.
	if len(q.hosts) > 1000 {
		now := time.Now()
		for k, h := range q.hosts {
			if !h.busy && now.After(h.next) {
				delete(q.hosts, k)
			}
		}
	}
}

// fetchChannel tells the node leading a fetch policy's queue, on any node
// of the store, that a fetch is pending: "kick", or the JSON of a
// library.PendingFetch addArticleFromUrl just queued.
const fetchChannel = "hearth_fetches"

func newFetchQueue(st *storage.Store, private bool) *fetchQueue {
	q := &fetchQueue{st: st, private: private, kick: make(chan struct{}, 1), inFlight: map[[2]string]bool{}, hosts: map[string]*hostTurn{}, scanBudget: fetchScanBudget}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.run = func(ctx context.Context, _ *Service) { q.lead(ctx) }
	q.follows = true // each fetch takes the latest Service (service)
	return q
}

// lead takes part in the lease of the queue's fetch policy
// ("fetches:private" or "fetches:public"): with several nodes on one store
// one of them works the queue, and another takes over when it stops.
// Entries are claimed by the lease: a fetch cut short by a lost lease stays
// pending and the next holder fetches it.
func (q *fetchQueue) lead(ctx context.Context) {
	lease := "fetches:public"
	if q.private {
		lease = "fetches:private"
	}
	q.st.LeadWoken(ctx, lease, fetchChannel, "pending article fetches", q.notified, q.runFetches)
}

// server is the latest Service of the queue's policy, whose fetcher,
// sanitiser and logger the queue uses (nil: none left, the queue stops).
func (q *fetchQueue) service() *Service {
	s, _ := q.latest()
	return s
}

func (q *fetchQueue) log() *zap.Logger {
	if s := q.service(); s != nil {
		return s.log
	}
	return zap.NewNop()
}

// Look reads the queue again from its first entry: anything may have
// changed (a restore).
func (q *fetchQueue) Look() { q.kickNow() }

// Stop stops the queue for good (the store closes).
func (q *fetchQueue) Stop() {
	q.lent.Stop()
	q.cancel()
}

// runFetches works the queue while ctx (the lease) lasts.
func (q *fetchQueue) runFetches(ctx context.Context) {
	q.leading.Store(true)
	defer q.leading.Store(false)
	q.leads.Add(1)
	q.cursor = nil
	jobs := make(chan library.PendingFetch)
	var wg sync.WaitGroup
	wg.Add(1 + fetchWorkers)
	go func() {
		defer wg.Done()
		defer close(jobs)
		q.feed(ctx, jobs)
	}()
	for i := 0; i < fetchWorkers; i++ {
		go func() {
			defer wg.Done()
			q.work(ctx, jobs)
		}()
	}
	q.kickNow() // what an earlier process, or the former holder, left
	wg.Wait()
}

// notified is a message of fetchChannel from any node.
func (q *fetchQueue) notified(payload string) {
	if payload != "kick" && payload != storage.NotificationsMissed {
		var p library.PendingFetch
		if json.Unmarshal([]byte(payload), &p) == nil && p.Private == q.private && q.leading.Load() {
			q.mu.Lock()
			if len(q.fresh) < freshMax {
				q.fresh = append(q.fresh, p)
			}
			q.mu.Unlock()
		}
	}
	q.kickNow()
}

// freshMax bounds fetchQueue.fresh.
const freshMax = 256

func (q *fetchQueue) kickAll() {
	q.kickNow()
	if !q.leading.Load() && q.ctx.Err() == nil {
		if err := q.st.Publish(q.ctx, fetchChannel, "kick"); err != nil {
			q.log().Debug("publish a pending article fetch", zap.Error(err))
		}
	}
}

// queuedFetch hands the feeder the fetch addArticleFromUrl just queued in
// the store, and kicks it.
func (s *Service) queuedFetch(ctx context.Context, p library.PendingFetch) {
	q := s.fetches
	if !q.leading.Load() {
		b, _ := json.Marshal(p)
		if err := s.store.Publish(q.ctx, fetchChannel, string(b)); err != nil {
			s.log.Debug("publish a pending article fetch", zap.Error(err))
		}
		return
	}
	q.mu.Lock()
	if len(q.fresh) < freshMax {
		q.fresh = append(q.fresh, p)
	}
	q.mu.Unlock()
	q.kickNow()
}

func (q *fetchQueue) kickNow() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *fetchQueue) feed(ctx context.Context, jobs chan<- library.PendingFetch) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
		}
		if q.paused() {
			continue // pause's timer kicks again
		}
		wrapped := q.cursor == nil // a pass from the first entry reads them all
		for {
			// Only those queued under this server's fetch policy: a
			// site that may not fetch private addresses never fetches
			// what another site queued, nor the other way round.
			private := q.private
			waiting := false // an imported item waits for its host's turn
			q.mu.Lock()
			pending := q.fresh
			q.fresh = nil
			q.mu.Unlock()
			scanned, next, read, err := library.Of(q.st).PendingFetchesFrom(ctx, q.cursor, fetchBatch+fetchWorkers, q.scanBudget, func(p library.PendingFetch) bool {
				if p.Private != private {
					return false
				}
				if p.Import && !q.hostReady(importHost(p.URL), false) {
					waiting = true
					return false
				}
				return true
			})
			if int64(read) > q.maxRead.Load() {
				q.maxRead.Store(int64(read))
			}
			q.passes.Add(1)
			if err != nil {
				if ctx.Err() == nil {
					q.log().Error("read pending article fetches", zap.Error(err))
				}
				break
			}
			q.cursor = next
			pending = append(pending, scanned...)
			if waiting {
				q.kickAfterHostInterval()
			}
			sent := 0
			for _, p := range pending {
				if q.paused() {
					break
				}
				k := [2]string{p.MemberID, p.ItemID}
				q.mu.Lock()
				busy := q.inFlight[k]
				q.inFlight[k] = true
				q.mu.Unlock()
				if busy {
					continue
				}
				if p.Import && !q.hostReady(importHost(p.URL), true) {
					q.mu.Lock()
					delete(q.inFlight, k)
					q.mu.Unlock()
					if !waiting {
						waiting = true
						q.kickAfterHostInterval()
					}
					continue
				}
				select {
				case jobs <- p:
					sent++
				case <-ctx.Done():
					q.mu.Lock()
					delete(q.inFlight, k)
					q.mu.Unlock()
					return
				}
			}
			// A pass that met only entries waiting for their host's turn
			// stops: the timer's kick goes on where it stopped. Otherwise
			// the feeder reads on until it has read every entry once
			// since the kick: from where the last pass stopped to the
			// last entry, then from the first.
			if q.paused() {
				break
			}
			if next == nil {
				if wrapped {
					break
				}
				wrapped = true
				continue
			}
			if waiting && sent == 0 {
				break
			}
		}
	}
}

func (q *fetchQueue) work(ctx context.Context, jobs <-chan library.PendingFetch) {
	for p := range jobs {
		// An entry handed over (fresh) or read a while ago may have been
		// fetched since, by this node or the former holder of the lease.
		s := q.service()
		if q.paused() {
			s = nil // handed over before the pause: stays pending
		}
		if ok, err := library.Of(q.st).HasPendingFetch(ctx, p.MemberID, p.ItemID); err == nil && ok && s != nil {
			if p.Images {
				s.fetchImages(ctx, p)
			} else {
				s.fetchPending(ctx, p)
			}
		}
		if p.Import {
			q.releaseHost(importHost(p.URL))
		}
		q.mu.Lock()
		delete(q.inFlight, [2]string{p.MemberID, p.ItemID})
		q.mu.Unlock()
	}
}

// fetchPending fetches one pending item's page and saves the article, or
// marks the item failed with a reason the member can read. Stopped by ctx,
// it leaves the entry pending.
func (s *Service) fetchPending(ctx context.Context, p library.PendingFetch) {
	in, err := s.fetchArticle(ctx, p.URL)
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		var it *library.SavedItem
		it, err = library.Of(s.store).FinishFetch(ctx, p.MemberID, p.ItemID, *in)
		if errors.Is(err, storage.ErrNotFound) {
			err = library.Of(s.store).DropFetch(ctx, p.MemberID, p.ItemID)
		}
		if err == nil {
			if it != nil && it.HighlightCount > 0 {
				s.placeFetchedQuotes(ctx, it)
			}
			// The page's images, queued with it: fetched now, by this
			// worker, so the item shows them soon after its text.
			if ok, err := library.Of(s.store).HasPendingFetch(ctx, p.MemberID, p.ItemID); err == nil && ok {
				s.fetchImages(ctx, library.PendingFetch{MemberID: p.MemberID, ItemID: p.ItemID, URL: in.URL, Private: p.Private, Images: true})
			}
			return
		}
		var fe *FetchError
		var ie *InputError
		if !errors.As(err, &fe) && !errors.As(err, &ie) && !storage.IsInvalid(err) {
			if ctx.Err() == nil && !s.refused(p, err) { // else stopped, or paused: nothing failed
				s.log.Error("save fetched article", zap.String("item", p.ItemID), zap.Error(err))
			}
			return // stays pending: fetched again on the next start
		}
	}
	reason := fetchFailedMessage
	var fe *FetchError
	var ie *InputError
	if errors.As(err, &ie) {
		// Not the site's doing, and trying again later changes nothing
		// (not an HTML page, no readable content): Inboxt's text would
		// mislead.
		reason = "We couldn’t fetch this page: " + ie.Msg + "."
	} else if errors.As(err, &fe) {
		reason = fetchFailedMessage + " (" + fe.Msg + ")"
	} else if storage.IsInvalid(err) {
		reason = fetchFailedMessage + " (" + err.Error() + ")"
	}
	if err := library.Of(s.store).FailFetch(ctx, p.MemberID, p.ItemID, reason); err != nil && !errors.Is(err, storage.ErrNotFound) && ctx.Err() == nil && !s.refused(p, err) {
		s.log.Error("mark article fetch failed", zap.String("item", p.ItemID), zap.Error(err))
	}
}

// placeFetchedQuotes places the quotes an import kept without a place (it
// had no content) in the content just fetched. A failure leaves them where
// they were: text-only highlights, still shown.
func (s *Service) placeFetchedQuotes(ctx context.Context, it *library.SavedItem) {
	c, err := library.Of(s.store).ItemContent(ctx, it.MemberID, it.ID)
	if err == nil {
		_, err = importer.PlaceFetchedQuotes(ctx, s.store, it.MemberID, it.ID, c.HTML)
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, storage.ErrNotFound) {
		s.log.Error("place imported quotes", zap.String("item", it.ID), zap.Error(err))
	}
}
