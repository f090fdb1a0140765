package storage

// A domain's background work of a Store (the library's search indexer),
// declared by kind as the record caches are (NewCacheKind), so the core
// runs its lifecycle without naming it.

// Worker is the background work of one Store. The core calls Start and
// Stop once each; Look and Hold/Release as often as the store is migrated
// and restored:
type Worker interface {
	// Start starts the work, once the store is open and migrated (Open).
	Start()
	// Look tells it that any record may have changed (Open and a restore,
	// before the migrations run): it looks at everything again.
	Look()
	// Hold returns once none of the work's transactions runs, and keeps
	// it from starting one until Release: a restore imports meanwhile, and
	// the work would read its records half there.
	Hold()
	Release()
	// Stop ends the work and waits for it (Close of a store Open
	// opened).
	Stop()
}

// WorkerKind is one kind of a Store's background work (NewWorkerKind).
type WorkerKind[W Worker] struct{ i int }

// workerKinds make each kind's Worker for a store, in order; written only
// by NewWorkerKind during package initialization (declared kinds for
// cacheKinds' reason).
var workerKinds []func(s *Store) Worker

// NewWorkerKind declares a kind of background work: every Store prepared
// afterwards holds the Worker make returns for it (make runs in Prepare:
// no I/O, no goroutine). Call it only to initialize a package-level
// variable.
func NewWorkerKind[W Worker](make func(s *Store) W) *WorkerKind[W] {
	k := &WorkerKind[W]{i: len(workerKinds)}
	workerKinds = append(workerKinds, func(s *Store) Worker { return make(s) })
	return k
}

// Of returns s's worker of this kind.
func (k *WorkerKind[W]) Of(s *Store) W { return s.workers[k.i].(W) }

// makeWorkers makes s's workers (Prepare).
func (s *Store) makeWorkers() {
	s.workers = make([]Worker, len(workerKinds))
	for i, mk := range workerKinds {
		s.workers[i] = mk(s)
	}
}

func (s *Store) startWorkers() {
	for _, w := range s.workers {
		w.Start()
	}
}

func (s *Store) workersLook() {
	for _, w := range s.workers {
		w.Look()
	}
}

func (s *Store) holdWorkers() {
	for _, w := range s.workers {
		w.Hold()
	}
}

func (s *Store) releaseWorkers() {
	for _, w := range s.workers {
		w.Release()
	}
}

func (s *Store) stopWorkers() {
	for _, w := range s.workers {
		w.Stop()
	}
}
