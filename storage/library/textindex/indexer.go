package textindex

import (
	"errors"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"go.uber.org/zap"
)

// Indexer does the background work of the indexes of one store: passes
// over the keys (one per index: a member) marked as having work, each
// after a delay that lets a burst of changes gather. It is a
// storage.Worker: the store starts, holds and stops it.
type Indexer struct {
	st    *storage.Store
	cfg   IndexerConfig
	mu    sync.Mutex
	dirty map[string]bool // keys with work, or all when all
	all   bool
	// urgent: someone waits for the work (Urge): the next pass starts
	// without letting changes gather.
	urgent bool
	wake   chan struct{}
	// urge cuts short a delay already begun when Urge comes meanwhile.
	urge chan struct{}
	stop chan struct{}
	done sync.WaitGroup
	// hold is read-held by each pass and held by a restore while it
	// imports (the records are half there).
	hold sync.RWMutex
	// refused are keys whose work the store refused for now (a full
	// disk): retryTimer, armed by the first, marks them again once the
	// store's wait is over (RetryRefused).
	refused    map[string]bool
	retryTimer *time.Timer
	// refusedLogged is when a refusal was last logged (retryLater).
	refusedLogged time.Time
}

// IndexerConfig says what an Indexer works on.
type IndexerConfig struct {
	// All lists every key that may have work (at Look: the store opened
	// or restored).
	All func() ([]string, error)
	// Work does the work of one key; ErrStopped when Stopping.
	Work func(key string) error
	// Delay is how long changes gather before a pass.
	Delay func() time.Duration
}

// NewIndexer returns st's indexer, not started.
func NewIndexer(st *storage.Store, cfg IndexerConfig) *Indexer {
	return &Indexer{st: st, cfg: cfg, dirty: map[string]bool{}, wake: make(chan struct{}, 1),
		urge: make(chan struct{}, 1), stop: make(chan struct{}), refused: map[string]bool{}}
}

// Start starts the indexer (Worker).
func (ix *Indexer) Start() {
	ix.done.Add(1)
	go ix.run()
}

// Look marks every key as having work (Worker): at Open and after a
// restore.
func (ix *Indexer) Look() { ix.Notify("") }

// Hold waits for the pass running and keeps the next from starting
// (Worker).
func (ix *Indexer) Hold() { ix.hold.Lock() }

// Release lets passes run again (Worker).
func (ix *Indexer) Release() { ix.hold.Unlock() }

// Stop ends the indexer and waits for it (Worker).
func (ix *Indexer) Stop() {
	close(ix.stop)
	ix.done.Wait()
	ix.mu.Lock()
	if ix.retryTimer != nil {
		ix.retryTimer.Stop()
	}
	ix.mu.Unlock()
}

// retryLater keeps key, whose work the store refused for now, for when
// the store's wait is over: the work goes on by itself once space is
// freed, not at the next change, which may never come. A refusal is
// logged once a minute at most, not each (a writer waiting for its backlog
// urges a pass every few milliseconds).
func (ix *Indexer) retryLater(key string, wait time.Duration, err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.refused[key] = true
	if ix.retryTimer != nil {
		return
	}
	ix.retryTimer = time.AfterFunc(wait, ix.RetryRefused)
	if time.Since(ix.refusedLogged) < time.Minute {
		return
	}
	ix.refusedLogged = time.Now()
	ix.st.Logger().Warn("search index: the store refuses writes; indexing goes on by itself when it takes them again",
		zap.Duration("retry_in", wait), zap.Error(err))
}

// RetryRefused marks the keys the store refused as having work again, at
// once: the store's wait is over, or a writer's commit shows that the
// store takes writes again.
func (ix *Indexer) RetryRefused() {
	ix.mu.Lock()
	keys := ix.refused
	ix.refused = map[string]bool{}
	if ix.retryTimer != nil {
		ix.retryTimer.Stop()
		ix.retryTimer = nil
	}
	ix.mu.Unlock()
	for k := range keys {
		ix.Notify(k)
	}
}

// WaitsForStore reports whether the store refused the indexer's last
// writes and it waits to try again (RetryRefused).
func (ix *Indexer) WaitsForStore() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.retryTimer != nil
}

// Stopping reports whether the indexer is stopping: long work checks it
// between its transactions.
func (ix *Indexer) Stopping() bool {
	select {
	case <-ix.stop:
		return true
	default:
		return false
	}
}

// Urge marks key as having work someone waits for: the next pass starts
// at once, without the delay that lets changes gather.
func (ix *Indexer) Urge(key string) {
	ix.mu.Lock()
	ix.urgent = true
	ix.mu.Unlock()
	ix.Notify(key)
	select {
	case ix.urge <- struct{}{}:
	default:
	}
}

// Notify marks a key (or all, with "") as having work.
func (ix *Indexer) Notify(key string) {
	ix.mu.Lock()
	if key == "" {
		ix.all = true
	} else {
		ix.dirty[key] = true
	}
	ix.mu.Unlock()
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// spareIdle is how long the indexer keeps its scratch buffers
// (spareBufs) after its last pass: across an import's batches and the
// gathering delays between them, not while the store sits idle.
const spareIdle = 10 * time.Second

func (ix *Indexer) run() {
	defer ix.done.Done()
	idle := time.NewTimer(spareIdle)
	defer idle.Stop()
	for {
		select {
		case <-ix.stop:
			return
		case <-idle.C:
			dropSpareBufs()
			continue
		case <-ix.wake:
		}
		ix.mu.Lock()
		now := ix.all || ix.urgent
		ix.urgent = false
		ix.mu.Unlock()
		if now {
			select { // this pass answers it
			case <-ix.urge:
			default:
			}
		}
		// Changes gather for a while, but after an open or a restore
		// (Look) nothing is gathering, and a writer held back (Urge)
		// waits: the pass starts at once, so that searches read a
		// backlog for as short a time as can be. An Urge during the
		// delay ends it.
		if d := ix.cfg.Delay(); d > 0 && !now {
			select {
			case <-ix.stop:
				return
			case <-ix.urge:
			case <-time.After(d):
			}
		}
		if ix.pass() {
			return
		}
		idle.Reset(spareIdle)
	}
}

// pass works on the keys marked since the last pass; true when the
// indexer is stopping.
func (ix *Indexer) pass() (stopped bool) {
	ix.hold.RLock()
	defer ix.hold.RUnlock()
	ix.mu.Lock()
	all, dirty := ix.all, ix.dirty
	ix.all, ix.dirty = false, map[string]bool{}
	ix.mu.Unlock()
	if all {
		keys, err := ix.cfg.All()
		if err != nil {
			ix.st.Logger().Warn("search index: cannot list the indexes to update", zap.Error(err))
			return false
		}
		for _, k := range keys {
			dirty[k] = true
		}
	}
	for k := range dirty {
		if err := ix.cfg.Work(k); err != nil {
			if errors.Is(err, ErrStopped) || ix.st.Background().Err() != nil {
				return true
			}
			if _, wait, ok := storage.Unavailable(err); ok {
				ix.retryLater(k, wait, err)
				continue
			}
			ix.st.Logger().Warn("search index: indexing failed; retried at the next change or start", zap.Error(err))
		}
	}
	return false
}

// batch is the number of documents one indexing transaction takes at most
// (halved when the engine finds the transaction too big).
const batch = 512

// Build indexes the queue, a segment a transaction, then merges segments;
// it returns ErrStopped as soon as stopping reports true, and nil, leaving
// the queue, as soon as paused does (tests of searches meanwhile).
func (x Index) Build(st *storage.Store, texts Texts, stopping, paused func() bool) error {
	limit := batch
	for {
		if stopping() {
			return ErrStopped
		}
		if paused() {
			return nil
		}
		n := 0
		// Asynchronous: the index is rebuilt from the texts if lost.
		err := st.UpdateAsync(st.Background(), func(tx *storage.Tx) error {
			var err error
			n, err = x.IndexPending(tx, texts, limit)
			return err
		})
		if errors.Is(err, kv.ErrTooBig) && limit > 1 {
			limit /= 2
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return x.Merge(st, texts, stopping)
		}
		indexedBatch()
	}
}

// indexed is closed (and replaced) each time a batch of queued documents
// has been indexed, by any index of the process.
var indexed = struct {
	sync.Mutex
	ch chan struct{}
}{ch: make(chan struct{})}

// Indexed returns a channel closed when the next batch of queued documents
// has been indexed (committed). A writer waiting for a queue to shrink
// takes it before it reads the queue's length, and reads again once it is
// closed: it goes on as soon as the indexer has made room, rather than
// at its next poll. (Any index's batch closes it: the reader checks its
// own.)
func Indexed() <-chan struct{} {
	indexed.Lock()
	defer indexed.Unlock()
	return indexed.ch
}

func indexedBatch() {
	indexed.Lock()
	close(indexed.ch)
	indexed.ch = make(chan struct{})
	indexed.Unlock()
}
