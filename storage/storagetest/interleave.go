package storagetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/internal/testengine"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Interleaver is a store's engine as a test sees it: it runs the test's
// functions at chosen points of other transactions, so that a race between
// two operations (a sign-in and a password change) can be played in each
// order, deterministically, on the real engine. Only its kv.Engine methods
// are offered: the engine's optional services (shared counters, leases,
// Replacer) are not, so a store opened with it keeps rate-limit counts in
// memory and runs its singleton work at once.
type Interleaver struct {
	kv.Engine
	dir   string
	mu    sync.Mutex
	hooks []*hook
}

// Dir is the directory of the store, to open it again once a test has
// closed it (CloseDuring).
func (il *Interleaver) Dir() string { return il.dir }

// CloseDuring closes st, the Interleaver's store, from inside one of its
// transactions (a hook's fn): later operations are refused with
// storage.ErrClosed at once, as on a reload that moved to another
// storage_dir, while the transaction running goes on and commits; the
// store is closed once it has ended, and then closed is. It models a
// store that stops taking writes in the middle of a handler's work.
func (il *Interleaver) CloseDuring(st *storage.Store) (closed <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.Close()
	}()
	for {
		err := st.View(context.Background(), func(*storage.Tx) error { return nil })
		if errors.Is(err, storage.ErrClosed) {
			return done
		}
		time.Sleep(time.Millisecond)
	}
}

type hook struct {
	afterView bool
	deleting  bool // BeforeDeleteCommit: matches the keys deleted
	prefix    []byte
	fn        func()
}

// OpenInterleaved opens a store in a temporary directory (on the engine
// Main chose) whose transactions pass through the returned Interleaver;
// the store is closed when the test ends.
func OpenInterleaved(t testing.TB) (*storage.Store, *Interleaver) {
	t.Helper()
	return OpenInterleavedIn(t, t.TempDir(), storage.Options{})
}

// OpenInterleavedIn is OpenInterleaved for a store in dir opened with opts
// (one on a SmallDisk: SmallDisk.Options).
func OpenInterleavedIn(t testing.TB, dir string, opts storage.Options) (*storage.Store, *Interleaver) {
	t.Helper()
	il := &Interleaver{dir: dir}
	testengine.SetWrap(dir, func(e kv.Engine) kv.Engine { il.Engine = e; return il })
	st, err := storage.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, il
}

// AfterView runs fn once, right after the next read-only transaction that
// read a key starting with prefix has ended, before its caller goes on.
func (il *Interleaver) AfterView(prefix []byte, fn func()) {
	il.add(&hook{afterView: true, prefix: prefix, fn: fn})
}

// BeforeCommit runs fn once, when the next read-write transaction that
// wrote (put) a key starting with prefix has done its reads and writes and
// is about to commit: fn's own transactions commit first.
func (il *Interleaver) BeforeCommit(prefix []byte, fn func()) {
	il.add(&hook{prefix: prefix, fn: fn})
}

// BeforeDeleteCommit is BeforeCommit for the next read-write transaction
// that deleted a key starting with prefix.
func (il *Interleaver) BeforeDeleteCommit(prefix []byte, fn func()) {
	il.add(&hook{deleting: true, prefix: prefix, fn: fn})
}

func (il *Interleaver) add(h *hook) {
	il.mu.Lock()
	defer il.mu.Unlock()
	il.hooks = append(il.hooks, h)
}

// take removes and returns the first hook of the kind that matches one of
// keys.
func (il *Interleaver) take(afterView, deleting bool, keys [][]byte) *hook {
	il.mu.Lock()
	defer il.mu.Unlock()
	for i, h := range il.hooks {
		if h.afterView != afterView || h.deleting != deleting {
			continue
		}
		for _, k := range keys {
			if bytes.HasPrefix(k, h.prefix) {
				il.hooks = append(il.hooks[:i:i], il.hooks[i+1:]...)
				return h
			}
		}
	}
	return nil
}

// View implements kv.Engine.
func (il *Interleaver) View(ctx context.Context, fn func(kv.Reader) error) error {
	rec := &recorder{}
	err := il.Engine.View(ctx, func(r kv.Reader) error {
		rec.Reader = r
		return fn(rec)
	})
	if h := il.take(true, false, rec.read); h != nil {
		h.fn()
	}
	return err
}

// Update implements kv.Engine.
func (il *Interleaver) Update(ctx context.Context, opts kv.TxOptions, fn func(kv.Writer) error) error {
	return il.Engine.Update(ctx, opts, func(w kv.Writer) error {
		rec := &recorder{Reader: w, w: w}
		if err := fn(rec); err != nil {
			return err
		}
		if h := il.take(false, false, rec.put); h != nil {
			h.fn()
		}
		if h := il.take(false, true, rec.deleted); h != nil {
			h.fn()
		}
		return nil
	})
}

// recorder notes the keys a transaction reads, puts and deletes.
type recorder struct {
	kv.Reader
	w                  kv.Writer
	read, put, deleted [][]byte
}

func (r *recorder) Get(key []byte) ([]byte, error) {
	r.read = append(r.read, bytes.Clone(key))
	return r.Reader.Get(key)
}

func (r *recorder) GetMany(keys [][]byte) ([][]byte, error) {
	for _, k := range keys {
		r.read = append(r.read, bytes.Clone(k))
	}
	return r.Reader.GetMany(keys)
}

func (r *recorder) Put(key, val []byte, ttl time.Duration) error {
	r.put = append(r.put, bytes.Clone(key))
	return r.w.Put(key, val, ttl)
}

func (r *recorder) Delete(key []byte) error {
	r.deleted = append(r.deleted, bytes.Clone(key))
	return r.w.Delete(key)
}

func (r *recorder) Notify(channel, payload string) error { return r.w.Notify(channel, payload) }
