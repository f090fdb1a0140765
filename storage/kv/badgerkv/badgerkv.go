// Package badgerkv is the embedded kv.Engine on Badger v4: the default
// engine, one process on one directory, using only Badger's public API. It
// opens an existing storage_dir unchanged (the same Badger options as
// storage.Open, the same keys and values).
//
// Durability (unless Options.NoSync): a commit is on disk when Update
// returns, as with storage.Store. Badger runs with SyncWrites off and the
// engine syncs Badger's log files itself once per group of concurrent
// commits (durable.go, the group commit): Badger's own
// SyncWrites syncs the memtable log once per transaction, and its public
// DB.Sync misses the log of a memtable made immutable just before it. An
// Async commit survives a crash of the process at once and is synced within
// asyncFlushDelay (200 ms). See docs/storage-engines.md.
//
// Notifications, counters, leases and the id slot are in-process: one
// process holds the directory (Badger's directory lock), so they are exact.
package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/hearthkit/caddy-hearth/internal/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Options configure how the directory is opened; zero values are the
// small-server profile of storage.Options (same defaults).
type Options struct {
	MemTableSize     int64
	BlockCacheSize   int64
	IndexCacheSize   int64 // 0: default; negative: none
	ValueLogFileSize int64
	// NoSync turns the syncing off: commits survive a crash of the process
	// but not a power loss (tests, benchmarks of the engine alone).
	NoSync bool
	// Logger receives Badger's log lines; nil discards them.
	Logger badger.Logger
	// OnSync, when set, is told how long each sync of the logs took
	// (metrics). It runs in the syncing goroutine while commits wait: it
	// must be quick.
	OnSync func(d time.Duration, err error)
}

// Defaults, as storage's (storage/store.go).
const (
	DefaultMemTableSize     = 8 << 20
	DefaultBlockCacheSize   = 32 << 20
	DefaultIndexCacheSize   = 16 << 20
	DefaultValueLogFileSize = 128 << 20
	// ValueThreshold is the value size from which Badger keeps values in
	// the value log; the group commit (durable.go) relies on it. At 4 KiB,
	// article content goes there, out of the compactions' way: the tables
	// hold keys and small records and their builders' memory stays bounded
	// (builders_test.go). A commit that wrote such a value takes the full
	// sync (bench/README.md, "Import memory bounded by the store's options").
	ValueThreshold = 4 << 10
)

// levelZeroTables is how many memtables Badger flushes to level 0 before it
// compacts them into level 1: about 64 MiB of them (8 at the default
// memtable_size, 16 at 4 MiB, at least 4). A burst of writes (an import of
// 10,000 items writes about 25 MiB of tables) is then flushed without a
// compaction running beside it: a compaction's table builders, and the
// pages of the tables it writes while those it replaces are still mapped,
// were most of an import's peak memory when Badger compacted after every
// second flush (bench/README.md, "Imports"). Reads look into each level-0
// table whose key range holds the key (behind its Bloom filter); writes
// stall at twice as many.
func levelZeroTables(memTableSize int64) int {
	return int(min(max(64<<20/memTableSize, 4), 16))
}

// ErrLocked is returned by Open when another process holds the directory.
var ErrLocked = errors.New("the store is in use by another process (is Caddy running? stop it first, or use the admin API)")

// Engine is the Badger kv.Engine.
type Engine struct {
	db  *badger.DB
	hub kv.Hub
	log badger.Logger // nil: none

	durable     *groupSync // nil with NoSync
	logs        *logSyncer // durable's sync; nil with NoSync
	async       asyncFlush // syncs Async commits
	vlogWritten atomic.Bool

	mu     sync.RWMutex // held for reading by every transaction, for writing by Close
	closed bool

	limMu    sync.Mutex
	limiters map[limKey]*ratelimit.Limiter

	leaseMu sync.Mutex
	leases  map[string]chan struct{}
}

type limKey struct {
	limit  int
	window time.Duration
}

var (
	_ kv.Engine   = (*Engine)(nil)
	_ kv.Counters = (*Engine)(nil)
	_ kv.Leases   = (*Engine)(nil)
	_ kv.IDSlots  = (*Engine)(nil)
	_ kv.Cursors  = (*tx)(nil)
)

// Open opens (creating if needed) the Badger database in dir.
func Open(dir string, o Options) (*Engine, error) {
	if o.MemTableSize <= 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.BlockCacheSize <= 0 {
		o.BlockCacheSize = DefaultBlockCacheSize
	}
	if o.IndexCacheSize < 0 {
		o.IndexCacheSize = 0
	} else if o.IndexCacheSize == 0 {
		o.IndexCacheSize = DefaultIndexCacheSize
	}
	if o.ValueLogFileSize <= 0 {
		o.ValueLogFileSize = DefaultValueLogFileSize
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create store directory: %w", err)
	}
	// The options of storage.Open (storage/store.go): SyncWrites off, the
	// engine syncs (durable.go).
	bo := badger.DefaultOptions(dir).
		WithLogger(o.Logger).
		WithMemTableSize(o.MemTableSize).
		WithNumMemtables(2).
		WithNumLevelZeroTables(levelZeroTables(o.MemTableSize)).
		WithNumLevelZeroTablesStall(2 * levelZeroTables(o.MemTableSize)).
		WithBlockCacheSize(o.BlockCacheSize).
		WithIndexCacheSize(o.IndexCacheSize).
		WithValueLogFileSize(o.ValueLogFileSize).
		WithNumCompactors(2).
		// Table builders' memory set by these options, not by the store's
		// size (docs/import.md "Speed and memory"): uncompressed tables
		// of 1 MiB at every level (TableSizeMultiplier below), in blocks of
		// 16 KiB that values under the 4 KiB threshold fill.
		WithCompression(options.None).
		WithBaseTableSize(1 << 20).
		WithBlockSize(16 << 10).
		WithSyncWrites(false).
		WithValueThreshold(ValueThreshold).
		WithMetricsEnabled(false)
	bo.TableSizeMultiplier = 1
	db, err := badger.Open(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("open store %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	e := &Engine{db: db, log: o.Logger, limiters: map[limKey]*ratelimit.Limiter{}, leases: map[string]chan struct{}{}}
	e.async.delay = asyncFlushDelay
	if !o.NoSync {
		e.logs = &logSyncer{dir: dir, vlogWritten: &e.vlogWritten}
		sync := e.logs.sync
		if o.OnSync != nil {
			sync = func() error {
				start := time.Now()
				err := e.logs.sync()
				o.OnSync(time.Since(start), err)
				return err
			}
		}
		e.durable = newGroupSync(sync)
	}
	return e, nil
}

// Sync returns once every commit that returned before the call is on disk,
// value logs included (after Badger's value-log garbage collection through
// DB(), which does not sync what it rewrites). With NoSync it is DB.Sync.
func (e *Engine) Sync() error {
	if err := e.enter(context.Background()); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	if e.durable == nil {
		return e.db.Sync()
	}
	e.vlogWritten.Store(true)
	return e.durable.wait()
}

// FailedSyncs implements kv.Syncer: the syncs of the logs that failed
// since Open (none with NoSync, which does not sync).
func (e *Engine) FailedSyncs() uint64 {
	if e.durable == nil {
		return 0
	}
	return e.durable.failed()
}

// synced returns once the commits that returned so far are on disk.
func (e *Engine) synced() error {
	if e.durable == nil {
		return nil
	}
	return e.durable.wait()
}

// flushSoon makes sure a sync starts within asyncFlushDelay after the Async
// commit that just returned. A failed sync is logged and counted
// (FailedSyncs): the writer that acknowledges work made of Async commits (an
// import's end) compares the count with the one before its first commit and
// learns that its work may not be on disk. Synchronous commits return only
// the failure of their own sync.
func (e *Engine) flushSoon() {
	if e.durable == nil {
		return
	}
	e.async.schedule(func() {
		if err := e.durable.wait(); err != nil && e.log != nil {
			e.log.Errorf("badgerkv: sync after asynchronous commits failed: they may not survive a power loss: %v", err)
		}
	})
}

// DB is the Badger database, for tests of what only Badger's own reads
// show.
func (e *Engine) DB() *badger.DB { return e.db }

func (e *Engine) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return kv.ErrClosed
	}
	return nil
}

// mapErr turns Badger's errors into kv's.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badger.ErrConflict):
		return kv.ErrConflict
	case errors.Is(err, badger.ErrTxnTooBig):
		return kv.ErrTooBig
	case errors.Is(err, badger.ErrKeyNotFound):
		return kv.ErrNotFound
	case errors.Is(err, badger.ErrDBClosed):
		return kv.ErrClosed
	case errors.Is(err, badger.ErrEmptyKey), errors.Is(err, badger.ErrInvalidKey), errors.Is(err, badger.ErrValueLogSize):
		return errors.Join(kv.ErrInvalid, err)
	}
	return err
}

// View implements kv.Engine.
func (e *Engine) View(ctx context.Context, fn func(kv.Reader) error) error {
	if err := e.enter(ctx); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	txn := e.db.NewTransaction(false)
	defer txn.Discard()
	return fn(&tx{ctx: ctx, txn: txn})
}

// Update implements kv.Engine.
func (e *Engine) Update(ctx context.Context, opts kv.TxOptions, fn func(kv.Writer) error) error {
	if err := e.enter(ctx); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	txn := e.db.NewTransaction(true)
	defer txn.Discard()
	t := &tx{ctx: ctx, txn: txn}
	if err := fn(t); err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return mapErr(err)
	}
	if t.bigValue {
		// After the commit, before the wait: a sync that ran in between
		// would clear it with the value not yet written.
		e.vlogWritten.Store(true)
	}
	// Visible from here on, so published also when the sync fails.
	for _, n := range t.notes {
		e.hub.Publish(n[0], n[1])
	}
	if opts.Async {
		e.flushSoon()
		return nil
	}
	return e.synced()
}

type tx struct {
	ctx   context.Context
	txn   *badger.Txn
	notes [][2]string
	// bigValue: a Put of ValueThreshold bytes or more, which Badger writes
	// to the value log.
	bigValue bool
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if err := kv.CheckKey(key); err != nil {
		return nil, err
	}
	item, err := t.txn.Get(key)
	if err != nil {
		return nil, mapErr(err)
	}
	v, err := item.ValueCopy(nil)
	if v == nil && err == nil {
		v = []byte{}
	}
	return v, mapErr(err)
}

func (t *tx) GetMany(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := t.Get(k)
		if errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (t *tx) Scan(r kv.Range, fn func(key, val []byte) (bool, error)) error {
	c := t.Cursor(r).(*cursor)
	defer c.Close()
	it := c.it
	n := 0
	for ; it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if !bytes.HasPrefix(k, r.Prefix) {
			return nil
		}
		if err := t.ctx.Err(); err != nil {
			return err
		}
		var more bool
		var err error
		if r.KeysOnly {
			more, err = fn(k, nil)
		} else if verr := item.Value(func(v []byte) error {
			more, err = fn(k, v)
			return nil
		}); verr != nil {
			return mapErr(verr)
		}
		if err != nil || !more {
			return err
		}
		if n++; r.Limit > 0 && n >= r.Limit {
			return nil
		}
	}
	return nil
}

// Cursor implements kv.Cursors with one Badger iterator.
func (t *tx) Cursor(r kv.Range) kv.Cursor {
	o := badger.DefaultIteratorOptions
	o.Reverse = r.Reverse
	o.PrefetchValues = false
	if !r.Reverse {
		o.Prefix = r.Prefix
	}
	c := &cursor{it: t.txn.NewIterator(o), r: r, end: kv.PrefixEnd(r.Prefix)}
	c.Seek(r.Start)
	return c
}

type cursor struct {
	it  *badger.Iterator
	r   kv.Range
	end []byte
	val []byte // Value's buffer, reused: a value is valid until the cursor moves
}

// Seek positions the iterator as Scan does for a start of key (nil: the
// first key of the prefix in the cursor's direction).
func (c *cursor) Seek(key []byte) {
	it, r, end := c.it, c.r, c.end
	switch {
	case !r.Reverse:
		seek := r.Prefix
		if key != nil && bytes.Compare(key, seek) > 0 {
			seek = key
		}
		it.Seek(seek)
	case key != nil && (end == nil || bytes.Compare(key, end) < 0):
		it.Seek(key)
	case end != nil:
		it.Seek(end)
		if it.Valid() && bytes.Equal(it.Item().Key(), end) {
			it.Next()
		}
	default:
		it.Rewind()
	}
}

func (c *cursor) Valid() bool { return c.it.Valid() && bytes.HasPrefix(c.it.Item().Key(), c.r.Prefix) }

func (c *cursor) Key() []byte { return c.it.Item().Key() }

func (c *cursor) Value() ([]byte, error) {
	if c.r.KeysOnly {
		return nil, nil
	}
	v, err := c.it.Item().ValueCopy(c.val[:0])
	if err == nil {
		c.val = v
	}
	return v, mapErr(err)
}

func (c *cursor) Next() { c.it.Next() }

func (c *cursor) Close() { c.it.Close() }

func (t *tx) Put(key, val []byte, ttl time.Duration) error {
	if err := kv.CheckKey(key); err != nil {
		return err
	}
	if err := kv.CheckValue(val); err != nil {
		return err
	}
	if len(val) >= ValueThreshold {
		t.bigValue = true
	}
	// Badger keeps both until the commit, the caller's may change: one
	// copy of the two (each capped, so that an append cannot run into the
	// other) instead of two, for the many small keys a write has.
	buf := make([]byte, len(key)+len(val))
	n := copy(buf, key)
	copy(buf[n:], val)
	k, v := buf[:n:n], buf[n:]
	if val == nil {
		v = nil
	}
	return t.set(k, v, ttl)
}

// set hands Badger the entry of k and v (copies it keeps until the commit).
func (t *tx) set(k, v []byte, ttl time.Duration) error {
	en := badger.NewEntry(k, v)
	if ttl > 0 {
		// Badger keeps whole seconds and hides a key once now ≥ ExpiresAt;
		// rounded up, so a key lives at least ttl (at most 1 s more).
		// Entry.WithTTL truncates, ending it up to 1 s early.
		en.ExpiresAt = uint64((time.Now().Add(ttl).UnixNano() + int64(time.Second) - 1) / int64(time.Second))
	}
	return mapErr(t.txn.SetEntry(en))
}

// PutEach is Put of val at each of keys with one copy of val, shared by
// their entries (Badger only reads an entry's value), and of the keys in
// the same allocation (kv.EachPutter).
func (t *tx) PutEach(keys [][]byte, val []byte, ttl time.Duration) error {
	if err := kv.CheckValue(val); err != nil {
		return err
	}
	n := len(val)
	for _, k := range keys {
		if err := kv.CheckKey(k); err != nil {
			return err
		}
		n += len(k)
	}
	if len(val) >= ValueThreshold {
		t.bigValue = true
	}
	buf := append(make([]byte, 0, n), val...)
	v := buf[:len(val):len(val)]
	if val == nil {
		v = nil
	}
	for _, k := range keys {
		start := len(buf)
		buf = append(buf, k...)
		if err := t.set(buf[start:len(buf):len(buf)], v, ttl); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) Delete(key []byte) error {
	if err := kv.CheckKey(key); err != nil {
		return err
	}
	return mapErr(t.txn.Delete(bytes.Clone(key)))
}

func (t *tx) Notify(channel, payload string) error {
	if err := kv.CheckNotify(channel, payload); err != nil {
		return err
	}
	t.notes = append(t.notes, [2]string{channel, payload})
	return nil
}

// Subscribe implements kv.Engine: this process's commits only (one process
// holds the directory).
func (e *Engine) Subscribe(channel string, fn func(string)) (func(), error) {
	if err := kv.CheckNotify(channel, ""); err != nil {
		return nil, err
	}
	return e.hub.Subscribe(channel, fn), nil
}

// Live implements kv.Engine: always true while open.
func (e *Engine) Live() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return !e.closed
}

// Export implements kv.Engine.
func (e *Engine) Export(ctx context.Context, fn func(kv.Record) error) error {
	return e.View(ctx, func(r kv.Reader) error {
		it := r.(*tx).txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			var ferr error
			if err := item.Value(func(v []byte) error {
				ferr = fn(kv.Record{Key: item.Key(), Value: v, ExpiresAt: item.ExpiresAt()})
				return nil
			}); err != nil {
				return mapErr(err)
			}
			if ferr != nil {
				return ferr
			}
		}
		return nil
	})
}

// Import implements kv.Engine. ImportReplace wants the records in
// ascending key order (a backup's) and walks them beside the current keys
// (importReplace): not atomic (see kv.Engine). The records are checked as
// they come; a bad one stops the import with ErrInvalid (the records before
// it stay written). Callers wanting "refused input changes nothing"
// validate first: kv.ReadStream checks a whole backup before yielding a
// record.
func (e *Engine) Import(ctx context.Context, next func() (kv.Record, error), mode kv.ImportMode) error {
	if err := e.enter(ctx); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	if err := e.importRecords(ctx, next, mode == kv.ImportReplace); err != nil {
		return err
	}
	e.vlogWritten.Store(true)
	return e.synced()
}

// Ping implements kv.Engine.
func (e *Engine) Ping(ctx context.Context) error {
	if err := e.enter(ctx); err != nil {
		return err
	}
	e.mu.RUnlock()
	return nil
}

// Close implements kv.Engine.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	// No commit is running (they hold mu); a scheduled async sync is
	// cancelled: Badger's Close writes the memtables to tables and syncs.
	e.async.stop()
	var lerr error
	if e.logs != nil {
		lerr = e.logs.close()
	}
	return errors.Join(e.db.Close(), lerr)
}

// ---- in-process capabilities ----

func (e *Engine) limiter(limit int, window time.Duration) *ratelimit.Limiter {
	e.limMu.Lock()
	defer e.limMu.Unlock()
	k := limKey{limit, window}
	l := e.limiters[k]
	if l == nil {
		l = ratelimit.New(limit, window)
		e.limiters[k] = l
	}
	return l
}

// CountAllow implements kv.Counters with internal/ratelimit's limiter.
func (e *Engine) CountAllow(ctx context.Context, key string, limit int, window time.Duration) (bool, int, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, 0, err
	}
	r := e.limiter(limit, window).Allow(key)
	return r.Allowed, r.Remaining, r.RetryAfter, nil
}

// CountPeek implements kv.Counters.
func (e *Engine) CountPeek(ctx context.Context, key string, limit int, window time.Duration) (bool, int, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, 0, err
	}
	r := e.limiter(limit, window).Peek(key)
	return r.Allowed, r.Remaining, r.RetryAfter, nil
}

// CountUndo implements kv.Counters (every limit's count of key).
func (e *Engine) CountUndo(ctx context.Context, key string, window time.Duration) error {
	e.limMu.Lock()
	defer e.limMu.Unlock()
	for k, l := range e.limiters {
		if k.window == window {
			l.Undo(key)
		}
	}
	return ctx.Err()
}

// CountReset implements kv.Counters.
func (e *Engine) CountReset(ctx context.Context, key string) error {
	e.limMu.Lock()
	defer e.limMu.Unlock()
	for _, l := range e.limiters {
		l.Reset(key)
	}
	return ctx.Err()
}

// leaseRetry is how long Lead waits before taking the lease again after fn
// returned on its own.
const leaseRetry = time.Second

// Lead implements kv.Leases within this process.
func (e *Engine) Lead(ctx context.Context, name string, fn func(context.Context)) {
	e.leaseMu.Lock()
	sem := e.leases[name]
	if sem == nil {
		sem = make(chan struct{}, 1)
		e.leases[name] = sem
	}
	e.leaseMu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		fn(ctx)
		<-sem
		t := time.NewTimer(leaseRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// IDSlot implements kv.IDSlots: slot 0, the only process on the directory.
func (e *Engine) IDSlot(ctx context.Context) (uint16, error) {
	if err := e.enter(ctx); err != nil {
		return 0, err
	}
	e.mu.RUnlock()
	return 0, nil
}

// HeldIDSlot implements kv.IDSlots: slot 0, always.
func (e *Engine) HeldIDSlot() (uint16, bool) { return 0, true }
