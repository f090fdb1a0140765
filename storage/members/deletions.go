package members

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Which node finishes the deletions of members' records that failed or
// were cut short (a full disk, the database away, a restore, a node that
// stopped midway): DeleteMember acknowledges a deletion once the member
// record is gone and leaves a mark (memberDeletingKey) until its records
// are; without a retry, a mark left while the process runs would wait for
// the next opening of the store, and the deleted member's items and tokens
// with it. One node of a store retries at a time, the holder of the lease
// deletionLease, and another takes over when it stops, as the sweep of
// revoked grants does (storage/grants/revocation.go). The holder looks at
// the marks when it takes the lease, when a deletion that failed on any
// node tells it (deletionChannel), when the store is opened or restored,
// and every deletionPoll; after a pass that failed it tries again after a
// backoff that doubles from deletionRetryMin up to deletionPoll. A pass
// finishes at most deletionBatch members, and the next runs at once while
// marks are left. Every step of a deletion is idempotent, so a member whose
// deletion another node is running meanwhile is only deleted twice.

// deletionChannel wakes the holder (payload: the member).
const deletionChannel = "hearth_members_deletion"

// deletionLease is the lease of the node that finishes the deletions.
const deletionLease = "members:delete"

// deletionPoll is how often the holder looks at the marks without being
// woken: for a deletion a stopped node left, or whose notification was
// lost (the store refused it too).
const deletionPoll = time.Minute

// deletionRetryMin is the first wait after a pass that failed.
const deletionRetryMin = time.Second

// deletionBatch bounds the members one pass finishes.
const deletionBatch = 16

// deleterKind is the store's retry of members' deletions.
var deleterKind = storage.NewWorkerKind(newDeleter)

// errDeletionsHeld ends a pass that a Hold cut short: not a failure.
var errDeletionsHeld = errors.New("the deletions of members' records are held")

// deleter finishes, while its node holds the lease, the deletions that
// DeleteMember left.
type deleter struct {
	st   *storage.Store
	wake chan struct{}
	// mu is held by each pass; Hold takes it once it has ended the
	// pass running (stopPass): a member's deletion is many transactions.
	mu       sync.Mutex
	holdMu   sync.Mutex
	held     bool
	stopPass context.CancelFunc
	// running counts, by member, the deletions DeleteMember runs on this
	// node, which a pass leaves to it.
	runMu   sync.Mutex
	running map[string]int
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

func newDeleter(st *storage.Store) *deleter {
	return &deleter{st: st, wake: make(chan struct{}, 1), running: map[string]int{}, done: make(chan struct{})}
}

func (w *deleter) Start() {
	ctx, cancel := context.WithCancel(w.st.Background())
	w.cancel, w.started = cancel, true
	go w.run(ctx)
}

func (w *deleter) Look() { w.poke() }

func (w *deleter) Hold() {
	w.holdMu.Lock()
	w.held = true
	if w.stopPass != nil {
		w.stopPass()
	}
	w.holdMu.Unlock()
	w.mu.Lock()
}

func (w *deleter) Release() {
	w.mu.Unlock()
	w.holdMu.Lock()
	w.held = false
	w.holdMu.Unlock()
	w.poke() // a pass the hold cut short
}

func (w *deleter) Stop() {
	if !w.started {
		return
	}
	w.cancel()
	<-w.done
}

// poke wakes the holder on this node.
func (w *deleter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// begin and end bracket a deletion DeleteMember runs itself.
func (w *deleter) begin(id string) {
	w.runMu.Lock()
	w.running[id]++
	w.runMu.Unlock()
}

func (w *deleter) end(id string) {
	w.runMu.Lock()
	if w.running[id]--; w.running[id] == 0 {
		delete(w.running, id)
	}
	w.runMu.Unlock()
}

func (w *deleter) isRunning(id string) bool {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	return w.running[id] > 0
}

// failed tells the holder, on whichever node, that the deletion of id's
// records failed. A notification the store refuses as well (its cause is
// often the deletion's) leaves the mark to the holder's next poll.
func (w *deleter) failed(ctx context.Context, id string) {
	w.poke()
	if err := w.st.Publish(ctx, deletionChannel, id); err != nil {
		w.st.Logger().Debug("tell the retry of members' deletions", zap.Error(err))
	}
}

func (w *deleter) run(ctx context.Context) {
	defer close(w.done)
	w.st.LeadWoken(ctx, deletionLease, deletionChannel, "failed deletions of members", func(string) { w.poke() }, w.lead)
}

// lead finishes deletions while this node holds the lease: at once, when
// woken, every deletionPoll, and after a failure with a backoff.
func (w *deleter) lead(ctx context.Context) {
	t := time.NewTimer(deletionPoll)
	defer t.Stop()
	var backoff time.Duration
	for {
		more, err := w.pass(ctx)
		wait := deletionPoll
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errDeletionsHeld):
			// Release wakes it.
		case err != nil:
			backoff = min(max(2*backoff, deletionRetryMin), deletionPoll)
			wait = backoff
			w.st.Logger().Warn("the records of deleted members are deleted later", zap.Duration("retry_in", wait), zap.Error(err))
		case more:
			backoff = 0
			continue
		default:
			backoff = 0
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// pass finishes up to deletionBatch of the deletions left, leaving those
// DeleteMember runs on this node; more says whether others are left.
func (w *deleter) pass(ctx context.Context) (more bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holdMu.Lock()
	if w.held {
		w.holdMu.Unlock()
		return false, errDeletionsHeld
	}
	ctx, w.stopPass = context.WithCancel(ctx)
	stop := w.stopPass
	w.holdMu.Unlock()
	defer func() {
		w.holdMu.Lock()
		w.stopPass = nil
		w.holdMu.Unlock()
		stop()
	}()
	more, _, err = Of(w.st).finishSomeDeletions(ctx, deletionBatch, w.isRunning)
	if err != nil && ctx.Err() != nil && w.isHeld() {
		return false, errDeletionsHeld
	}
	return more, err
}

func (w *deleter) isHeld() bool {
	w.holdMu.Lock()
	defer w.holdMu.Unlock()
	return w.held
}

func init() {
	storage.OnMigrate(func(ctx context.Context, st *storage.Store) error {
		Of(st).finishDeletions(ctx)
		return nil
	})
}

// finishDeletions deletes, when the store opens or is restored, the
// records of members whose deletion was cut short. A store that refuses
// writes now (a full disk) leaves them to the retry (deleter): the store
// still opens.
func (s Store) finishDeletions(ctx context.Context) {
	var done int
	var err error
	for more := true; more && err == nil; {
		var n int
		more, n, err = s.finishSomeDeletions(ctx, deletionBatch, nil)
		done += n
	}
	if err != nil {
		s.st.Logger().Warn("the records of deleted members are deleted later", zap.Error(err))
	} else if done > 0 {
		s.st.Logger().Info("deleted the records of members whose deletion was cut short", zap.Int("members", done))
	}
}

// finishSomeDeletions deletes the records of up to limit members whose
// deletion mark is left, but those skip names (nil: none); more says
// whether other marks are left, n how many members it finished.
func (s Store) finishSomeDeletions(ctx context.Context, limit int, skip func(id string) bool) (more bool, n int, err error) {
	var ids []string
	prefix := memberDeletingKey("")
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		ids, more = ids[:0], false
		return tx.Scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
			id := string(k[len(prefix):])
			if skip != nil && skip(id) {
				return true, nil
			}
			if len(ids) == limit {
				more = true
				return false, nil
			}
			ids = append(ids, id)
			return true, nil
		})
	})
	if err != nil {
		return false, 0, err
	}
	for _, id := range ids {
		if err := s.deleteMemberData(ctx, id); err != nil {
			return false, n, err
		}
		n++
	}
	return more, n, nil
}
