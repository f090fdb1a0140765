package library

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Which node carries on the emptyings of the trash that requests left
// (trash.go): one node of a store at a time, the holder of the lease
// emptyingLease, and another takes over when it stops, as the sweep of
// revoked grants does (storage/grants/revocation.go). The holder looks
// for the members whose emptying is pending when it takes the lease, when
// a request that left one tells it (emptyingChannel), when the store is
// opened or restored, and every emptyingPoll; it hands each to its
// indexer, whose work for a member carries the emptying on
// (finishEmptyingTrash, which only the holder runs): the indexer already
// waits while the disk is full and pauses around a restore, which that
// job needs. A request deletes its own first batches, and tells the
// holder only once they are over, so two nodes do not run the same
// batches.

// emptyingChannel wakes the holder (payload: the member).
const emptyingChannel = "hearth_library_emptying"

// emptyingLease is the lease of the node that carries on the emptyings.
const emptyingLease = "library:emptytrash"

// emptyingPoll is how often the holder looks for pending emptyings without
// being woken: one a node left when it stopped in the middle of a
// request, or whose notification was lost.
const emptyingPoll = time.Minute

// emptierKind is the store's holder of the emptyings.
var emptierKind = storage.NewWorkerKind(newEmptier)

// emptier takes the lease and, while it holds it, finds the pending
// emptyings for its node's indexer.
type emptier struct {
	st *storage.Store
	// leading is true while this node holds the lease.
	leading atomic.Bool
	// mu is held by each look for emptyings; Hold takes it.
	mu sync.Mutex
	// wanted are the members a request told of (all: every member), to
	// look at on the next wake.
	wantMu  sync.Mutex
	wanted  map[string]bool
	all     bool
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

func newEmptier(st *storage.Store) *emptier {
	return &emptier{st: st, wanted: map[string]bool{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (w *emptier) Start() {
	ctx, cancel := context.WithCancel(w.st.Background())
	w.cancel, w.started = cancel, true
	go w.run(ctx)
}

func (w *emptier) Look()    { w.want("") }
func (w *emptier) Hold()    { w.mu.Lock() }
func (w *emptier) Release() { w.mu.Unlock() }

func (w *emptier) Stop() {
	if !w.started {
		return
	}
	w.cancel()
	<-w.done
}

// want asks the next look to see the member's emptying ("": every
// member's) and wakes it.
func (w *emptier) want(memberID string) {
	w.wantMu.Lock()
	if memberID == "" || memberID == storage.NotificationsMissed {
		w.all = true
	} else {
		w.wanted[memberID] = true
	}
	w.wantMu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *emptier) run(ctx context.Context) {
	defer close(w.done)
	w.st.LeadWoken(ctx, emptyingLease, emptyingChannel, "emptyings of the trash", w.want, w.lead)
}

// lead looks for emptyings while this node holds the lease: at once (an
// emptying the last holder left), when woken, and every emptyingPoll.
func (w *emptier) lead(ctx context.Context) {
	w.leading.Store(true)
	defer w.leading.Store(false)
	w.want("")
	t := time.NewTicker(emptyingPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
			w.wantMu.Lock()
			w.all = true
			w.wantMu.Unlock()
		}
		w.wantMu.Lock()
		all, wanted := w.all, w.wanted
		w.all, w.wanted = false, map[string]bool{}
		w.wantMu.Unlock()
		if err := w.look(ctx, all, wanted); err != nil && ctx.Err() == nil {
			w.st.Logger().Warn("the emptyings of the trash are looked for again later", zap.Error(err))
		}
	}
}

// look hands this node's indexer the members (every member's, when all)
// whose emptying of the trash is pending.
func (w *emptier) look(ctx context.Context, all bool, wanted map[string]bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if all {
		ms, err := members.Of(w.st).Members(ctx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			wanted[m.ID] = true
		}
	}
	var pending []string
	err := w.st.View(ctx, func(tx *storage.Tx) error {
		pending = pending[:0]
		for id := range wanted {
			if ok, err := tx.Has(emptyingKey(id)); err != nil {
				return err
			} else if ok {
				pending = append(pending, id)
			}
		}
		return nil
	})
	for _, id := range pending {
		Of(w.st).state().Notify(id)
	}
	return err
}
