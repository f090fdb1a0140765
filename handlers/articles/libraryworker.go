package articles

import (
	"context"
	"sync"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage"
)

// The library's background work beside the search indexer (a worker of
// storage/library): the fetch queue of each fetch policy and the import
// runner. Each is a worker of the store, as the indexer is: it runs from the
// store's Open to its Close, pauses around a restore, and runs once per
// store however many Services use it (a reload prepares the next Server
// while the last one still serves; two sites may share one store). What it
// needs of a site (the fetcher, the sanitiser, the import directory and
// limits) it takes from the Services, given when each is prepared (use) and
// taken back when it closes; the latest given is the one used.

// libraryWorkKind is each store's libraryWork.
var libraryWorkKind = storage.NewWorkerKind(newLibraryWork)

// libraryWork is a store's fetch queues and import runner.
type libraryWork struct {
	fetches [2]*fetchQueue // by fetch policy: public addresses only, private too
	imports *lent[*importer.Runner]
	// importKick tells the import runner that works of a job started
	// through any Service's runner (importer.RunnerOptions.Kick).
	importKick chan struct{}
}

func newLibraryWork(st *storage.Store) *libraryWork {
	w := &libraryWork{importKick: make(chan struct{}, 1)}
	for i := range w.fetches {
		w.fetches[i] = newFetchQueue(st, i == 1)
	}
	w.imports = &lent[*importer.Runner]{run: func(ctx context.Context, r *importer.Runner) { r.Work(ctx) }}
	return w
}

// kickFetches tells both fetch queues that fetches are pending: an
// import's batches queue fetches under the job's policy, which need not be
// that of the runner working it (two sites on one store).
func (w *libraryWork) kickFetches() {
	for _, q := range w.fetches {
		q.kickAll()
	}
}

func (w *libraryWork) each(f func(storage.Worker)) {
	for _, q := range w.fetches {
		f(q)
	}
	f(w.imports)
}

func (w *libraryWork) Start()   { w.each(storage.Worker.Start) }
func (w *libraryWork) Look()    { w.each(storage.Worker.Look) }
func (w *libraryWork) Hold()    { w.each(storage.Worker.Hold) }
func (w *libraryWork) Release() { w.each(func(x storage.Worker) { x.Release() }) }
func (w *libraryWork) Stop()    { w.each(storage.Worker.Stop) }

// lent is background work of a store that runs with what a Service lends
// it (use): run runs while the store is open, no restore holds it and
// something is lent, with the latest lent when it starts. When what it
// started with is taken back, it is stopped and started again with the
// latest; when it returns by itself (what it ran with was closed), the
// same.
type lent[T comparable] struct {
	run func(ctx context.Context, with T)
	// follows says run reads the latest itself (latest): it goes on when
	// what it started with is taken back.
	follows bool

	mu                     sync.Mutex
	users                  []T // lent, the latest last
	started, held, stopped bool
	with                   T                  // what the run started with
	cancel                 context.CancelFunc // nil: not running
	done                   chan struct{}
}

// use lends v until release is called (more than once does no harm).
func (l *lent[T]) use(v T) (release func()) {
	l.mu.Lock()
	l.users = append(l.users, v)
	l.update()
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { l.takeBack(v) }) }
}

func (l *lent[T]) takeBack(v T) {
	l.mu.Lock()
	for i, u := range l.users {
		if u == v {
			l.users = append(l.users[:i], l.users[i+1:]...)
			break
		}
	}
	if l.cancel != nil && (len(l.users) == 0 || l.with == v && !l.follows) {
		l.halt() // started again with the latest, if any
	}
	l.update()
	l.mu.Unlock()
}

// latest is what was lent last.
func (l *lent[T]) latest() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero T
	if len(l.users) == 0 {
		return zero, false
	}
	return l.users[len(l.users)-1], true
}

// update starts the run if it should run and does not (l.mu held).
func (l *lent[T]) update() {
	if l.cancel != nil || !l.started || l.held || l.stopped || len(l.users) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	with := l.users[len(l.users)-1]
	l.with, l.cancel, l.done = with, cancel, done
	go func() {
		defer close(done)
		l.run(ctx, with)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.done != done {
			return // halted
		}
		cancel()
		l.cancel, l.done = nil, nil
		if n := len(l.users); n > 0 && l.users[n-1] != with {
			l.update() // what it ran with is gone: run with the latest
		}
	}()
}

// halt stops the run and waits for it (l.mu held, released meanwhile).
func (l *lent[T]) halt() {
	if l.cancel == nil {
		return
	}
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	cancel()
	l.mu.Unlock()
	<-done
	l.mu.Lock()
}

func (l *lent[T]) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = true
	l.update()
}

func (l *lent[T]) Look() {}

func (l *lent[T]) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = true
	l.halt()
}

func (l *lent[T]) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = false
	l.update()
}

func (l *lent[T]) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.halt()
}
