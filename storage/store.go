// Package storage is Hearth's store on a storage engine (storage/kv: Badger
// embedded by default, PostgreSQL for several nodes). Its core speaks only
// storage/kv (it names an engine's package only to open it) and serves the
// domain packages under storage/ (storage/members, storage/agents,
// storage/grants, storage/apitokens, storage/library): the Store's
// lifecycle (Open, Close, the engine's housekeeping on a schedule),
// transactions (View, Update, UpdateAsync, UpdateOnce, each with the
// caller's context.Context) and the Tx primitives domain code uses (Get,
// Put, Scan, Notify, NewID… on keys made with Key), ids unique across nodes,
// the record caches (NewCacheKind) and their invalidation across nodes,
// backups and restores, the gate, shared counters, leases (Lead),
// notifications (Subscribe, Publish), the shared errors and the domains'
// hooks (OnMigrate, OnCommit), their per-transaction state (NewTxState) and
// their background work (NewWorkerKind); docs/storage-engines.md
// ("Packages") maps which package holds what. Handlers never build keys
// themselves.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/internal/testengine"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/kv/badgerkv"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv"
	"go.uber.org/zap"
)

// Options configure how the database is opened. The zero value is the
// small-server profile described in docs/configuration.md.
type Options struct {
	// MemTableSize is the size of each in-memory table (bytes).
	MemTableSize int64
	// BlockCacheSize is the size of the block cache (bytes).
	BlockCacheSize int64
	// IndexCacheSize is the size of the index cache (bytes); 0 keeps indexes
	// in memory with the tables.
	IndexCacheSize int64
	// ValueLogFileSize is the size of each value-log file (bytes).
	ValueLogFileSize int64
	// SyncWrites makes every commit but UpdateAsync's wait until its write
	// is on disk, so an acknowledged write survives a power loss, not only
	// a process crash, and syncs UpdateAsync's commits soon after. Concurrent
	// commits share one fsync (see groupSync). Nil means true.
	SyncWrites *bool
	// GCInterval is how often value-log garbage collection runs; zero means
	// DefaultGCInterval, a negative value disables it.
	GCInterval time.Duration
	// Logger receives Badger's log lines; nil discards them.
	Logger *zap.Logger
	// MinFreeBytes is the free-space reserve: writes are refused with
	// ErrDiskFull while the filesystem of the store has less free space
	// (reads go on; writes resume once space is freed). Zero means
	// DefaultMinFreeBytes for the options given, a negative value turns
	// the check off.
	MinFreeBytes int64
	// OnSync, when set, is told how long each flush of the logs for
	// SyncWrites took (metrics). It runs in the flushing goroutine, while
	// commits wait: it must be quick.
	OnSync func(d time.Duration, err error)
	// Postgres, when set, keeps the records in PostgreSQL
	// (storage/kv/pgkv) instead of Badger in the directory; the Badger
	// options above then do nothing, and the directory holds only files
	// (staged imports).
	Postgres *PostgresOptions
}

// PostgresOptions choose the PostgreSQL database of a store.
type PostgresOptions struct {
	// DSN is a libpq connection string or URL.
	DSN string
	// Prefix names the tables (<prefix>_kv, …); default "hearth".
	Prefix string
	// MaxConns bounds the connection pool; default 10.
	MaxConns int32
	// LeaseTTL is how long a node's leases (singleton work, its id slot)
	// last unrenewed; default 10 s (pgkv.Options.LeaseTTL).
	LeaseTTL time.Duration
}

// Defaults of the small-server memory profile. Badger's own defaults
// (64 MiB memtables ×5, 256 MiB block cache) suit large machines; these keep
// a Hearth process well under 200 MiB of store memory.
const (
	DefaultMemTableSize     = 8 << 20
	DefaultBlockCacheSize   = 32 << 20
	DefaultIndexCacheSize   = 16 << 20
	DefaultValueLogFileSize = 128 << 20
	DefaultGCInterval       = 10 * time.Minute
)

func (o Options) withDefaults() Options {
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
	if o.SyncWrites == nil {
		t := true
		o.SyncWrites = &t
	}
	if o.GCInterval == 0 {
		o.GCInterval = DefaultGCInterval
	}
	if o.Postgres != nil {
		o.MinFreeBytes = -1 // the database server minds its disk
	} else if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes(o.MemTableSize, o.ValueLogFileSize)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// DefaultMinFreeBytes is the free-space reserve for the given memtable and
// value-log file sizes: what Badger may still write after the last write
// admitted, through memory maps that fault (SIGBUS) rather than fail on a
// full disk. A new value-log file is mapped at twice
// ValueLogFileSize; each memtable has its write-ahead file of about
// MemTableSize and is flushed to a table of about that size, and the two
// memtables (plus one being flushed) may be written at once; compactions
// write tables of MemTableSize before deleting the ones they replace.
// 2×ValueLogFileSize + 6×MemTableSize: 304 MiB with the defaults
// (128 MiB value-log files, 8 MiB memtables).
func DefaultMinFreeBytes(memTableSize, valueLogFileSize int64) int64 {
	return 2*valueLogFileSize + 6*memTableSize
}

// ErrLocked is returned by Open when another process holds the database.
var ErrLocked = badgerkv.ErrLocked

// Store is a Hearth database on a storage engine (storage/kv). It is safe
// for concurrent use once open.
type Store struct {
	eng kv.Engine
	// base is the engine as opened, before a test's wrapper
	// (testengine): its optional services (kv.GarbageCollector, kv.Syncer,
	// kv.Sizer) are asked of it.
	base kv.Engine
	path string
	log  *zap.Logger
	opts Options

	caches caches
	ids    *idGen
	slots  kv.IDSlots       // the engine's node slots; nil with Badger (always slot 0)
	idNow  func() time.Time // the clock of new ids; nil: time.Now (tests)
	// restoreHook, when set (tests), is called with the number of records
	// a restore of this store (importReplacing, replaceAll) has imported
	// so far, after each; an error it returns fails the restore there.
	restoreHook func(n int) error
	// shared: the engine serves several processes (not Badger), so the
	// caches follow other nodes' writes (recordcache.go).
	shared     bool
	liveEpochs atomic.Pointer[kv.LiveEpochs] // the shared engine's, once open
	node       string                        // this store's id in notifications (random)
	stopNotes  func()                        // ends the cache subscription

	unavailableLogged atomic.Int64 // when engineErr last logged (Unix ns)

	replacing sync.Mutex // held by Replace
	gate      gate

	openMu sync.Mutex // held by Open and Close
	stopGC chan struct{}
	gcDone sync.WaitGroup
	closed sync.Once
	done   bool // closed; guarded by openMu

	workers []Worker // the domains' background work, by kind (NewWorkerKind)

	// bg is the context of the store's own work (migrations, the search
	// indexer): Close cancels it before waiting for that work to end.
	bg     context.Context
	stopBg context.CancelFunc
}

// Open opens (creating if needed) the database in dir.
func Open(dir string, opts Options) (*Store, error) {
	s := Prepare(dir, opts)
	if err := s.Open(); err != nil {
		return nil, err
	}
	return s, nil
}

// Prepare returns the store of dir without touching the disk: no directory is
// created, locked or read until Open. Caddy's Provision prepares; Start (or
// the first request) opens.
func Prepare(dir string, opts Options) *Store {
	if opts.Postgres == nil && testengine.Postgres != nil {
		// The engine suite (HEARTH_TEST_ENGINE=postgres): a test that
		// chose its database keeps it.
		if dsn, prefix, ok := testengine.Postgres(dir); ok {
			opts.Postgres = &PostgresOptions{DSN: dsn, Prefix: prefix}
		}
	}
	opts = opts.withDefaults()
	s := &Store{path: dir, log: opts.Logger, opts: opts, shared: opts.Postgres != nil, ids: newIDGen(), node: NewSecret("", 9), stopGC: make(chan struct{})}
	if s.shared {
		s.caches = newCaches(s.cacheLive)
	} else {
		s.caches = newCaches(nil)
	}
	s.bg, s.stopBg = context.WithCancel(context.Background())
	s.gate.init()
	s.makeWorkers()
	return s
}

// IsOpen reports whether Open has succeeded (and Close not been called).
func (s *Store) IsOpen() bool {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	return s.eng != nil && !s.done
}

// Open opens (creating if needed) the prepared database. Calling it again
// on an open store does nothing; a closed store cannot be opened again.
func (s *Store) Open() error {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if s.done {
		return fmt.Errorf("open store %s: %w", s.path, ErrClosed)
	}
	if s.eng != nil {
		return nil
	}
	dir, opts := s.path, s.opts
	if opts.Postgres != nil {
		return s.openPostgres()
	}
	// The group commit (Options.SyncWrites) is the engine's:
	// storage/kv/badgerkv/durable.go.
	bdb, err := badgerkv.Open(dir, badgerkv.Options{
		MemTableSize:     opts.MemTableSize,
		BlockCacheSize:   opts.BlockCacheSize,
		IndexCacheSize:   opts.IndexCacheSize,
		ValueLogFileSize: opts.ValueLogFileSize,
		NoSync:           !*opts.SyncWrites,
		Logger:           badgerkv.ZapLogger(opts.Logger),
		OnSync:           opts.OnSync,
	})
	if err != nil {
		return err
	}
	s.eng, s.base = testengine.Wrapped(dir, bdb), bdb
	s.gate.opened()
	if err := s.migrate(); err != nil {
		// Not Close: it waits for openMu, which Open holds.
		bdb.Close()
		s.eng, s.base = nil, nil
		return fmt.Errorf("open store %s: %w", dir, err)
	}
	if opts.GCInterval > 0 {
		s.gcDone.Add(1)
		go s.runGC(opts.GCInterval)
	}
	s.startWorkers()
	return nil
}

func (s *Store) openPostgres() error {
	p := s.opts.Postgres
	e, err := pgkv.Open(pgkv.Options{DSN: p.DSN, Prefix: p.Prefix, MaxConns: p.MaxConns, LeaseTTL: p.LeaseTTL})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	// Other nodes' writes drop cached records here (recordcache.go).
	var le kv.LiveEpochs = e
	stop, err := e.Subscribe(cacheChannel, s.onCacheNote)
	if err != nil {
		e.Close()
		return fmt.Errorf("open store: %w", err)
	}
	s.liveEpochs.Store(&le)
	s.slots = e
	s.eng, s.base, s.stopNotes = testengine.Wrapped(s.path, e), e, stop
	s.gate.opened()
	err = s.migrate()
	if errors.Is(err, ErrEngineUnavailable) {
		// The database is away: serve (503 until it answers) and migrate
		// once it does.
		s.gcDone.Add(1)
		go s.migrateWhenAvailable()
	} else if err != nil {
		stop()
		e.Close()
		s.eng, s.base = nil, nil
		return fmt.Errorf("open store: %w", err)
	}
	s.startWorkers()
	return nil
}

// migrateWhenAvailable runs migrate every few seconds until it has run or
// the store closes.
func (s *Store) migrateWhenAvailable() {
	s.tick(2*time.Second, func() bool {
		err := s.migrate()
		if err == nil {
			s.log.Info("the storage engine answers again: the store is ready")
			return false
		}
		if s.bg.Err() != nil {
			return false // Close: nothing failed
		}
		if !errors.Is(err, ErrEngineUnavailable) {
			s.log.Error("migrate the store", zap.Error(err))
			return false
		}
		return true
	})
}

// tick runs fn every interval until fn returns false or the store closes,
// then marks its goroutine done (gcDone).
func (s *Store) tick(every time.Duration, fn func() bool) {
	defer s.gcDone.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopGC:
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}

// Engine names the store's storage engine: "badger" or "postgres".
func (s *Store) Engine() string {
	if s.opts.Postgres != nil {
		return "postgres"
	}
	return "badger"
}

// migrate brings records written by earlier versions up to date. It runs at
// Open and after Restore, and changes nothing the second time.
func (s *Store) migrate() error {
	// The workers look at everything (the search indexer: every member,
	// building what stores written before the index lack and indexing
	// texts left pending).
	s.workersLook()
	for _, m := range migrations {
		if err := m(s.bg, s); err != nil {
			return err
		}
	}
	return nil
}

// migrations are the domain packages' (OnMigrate): a registry, since
// storage cannot import the packages above it and a package linked in is
// one whose old records a store may hold.
var migrations []func(ctx context.Context, s *Store) error

// OnMigrate registers fn to run when a store opens and after a restore:
// it brings a domain's records written by earlier versions up to date, and
// must change nothing the second time. An error fails Open (or Restore).
// Call it from an init function.
func OnMigrate(fn func(ctx context.Context, s *Store) error) {
	migrations = append(migrations, fn)
}

// Logger is the store's logger (Options.Logger), for domain packages'
// background work and migrations.
func (s *Store) Logger() *zap.Logger { return s.log }

// Background is the context of the store's own work (a domain's Worker,
// its background writes): Close cancels it first, then waits for that work.
func (s *Store) Background() context.Context { return s.bg }

// Path is the directory the store lives in.
func (s *Store) Path() string { return s.path }

// Close stops garbage collection, waits for the operations running, and
// closes the database; operations started later fail with ErrClosed. It
// is safe to call more than once.
func (s *Store) Close() error {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	s.done = true
	if s.eng == nil {
		return nil // never opened
	}
	var err error
	s.closed.Do(func() {
		close(s.stopGC)
		s.stopBg()
		s.gcDone.Wait()
		s.stopWorkers()
		s.closeGate()
		if s.stopNotes != nil {
			s.stopNotes()
		}
		err = s.eng.Close()
	})
	return err
}

func (s *Store) runGC(every time.Duration) {
	s.tick(every, func() bool {
		s.CollectGarbage()
		return true
	})
}

// CollectGarbage runs the engine's housekeeping (kv.GarbageCollector:
// Badger rewrites the value-log files that are at least half garbage); an
// engine without any (PostgreSQL's autovacuum is the server's) does
// nothing. It runs on the schedule set by Options.GCInterval, and stops
// when the store closes. It writes (Badger's rewritten files go only at
// the end of a run), so it keeps to the free-space reserve as writes do:
// it does not start below it and stops between files once there, which
// leaves the rewrite of one file (half a value-log file at most) to the
// reserve. Past the end of the disk, Badger dies of SIGBUS.
func (s *Store) CollectGarbage() {
	gc, ok := s.base.(kv.GarbageCollector)
	if !ok || s.enter(false) != nil {
		return
	}
	defer s.leave(false)
	more := func() bool { return !s.belowReserve() }
	if !more() {
		s.log.Debug("value-log garbage collection waits: the disk is below the free-space reserve")
		return
	}
	n, err := gc.CollectGarbage(s.bg, more)
	if err != nil {
		s.log.Warn("value-log garbage collection", zap.Error(err))
	}
	if n > 0 {
		s.log.Debug("value-log garbage collection", zap.Int("files_rewritten", n))
	}
}

// Restore loads a backup written by Backup into the store, replacing
// records with the same keys. Input that is not a complete, intact backup
// fails with ErrNotBackup (wrapped) before anything is loaded; records
// imported before another failure may stay (RestoreDir loads into a fresh
// directory for that reason).
func (s *Store) Restore(r io.Reader) error {
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.leave(true)
	sp, err := s.spoolBackup(r)
	if err != nil {
		return err
	}
	defer sp.Close()
	next, err := sp.Records()
	if err != nil {
		return err
	}
	s.holdWorkers()
	err = s.eng.Import(restoreCtx, next, kv.ImportMerge)
	s.releaseWorkers()
	s.caches.drop(nil) // also after a failed import: some records may have changed
	if err != nil {
		return s.engineErr(err)
	}
	if err := s.syncEngine(); err != nil {
		return err
	}
	// A backup of an earlier version holds records written the old way.
	return s.migrate()
}

// RestoreDir replaces the database in dir with the backup stream read from
// r, for `caddy hearth restore` while Caddy is stopped. It returns ErrLocked
// (wrapped) when another process holds dir. The backup is loaded into a
// fresh sibling directory first, so a bad stream leaves dir untouched; then
// the old database moves aside to the returned directory (empty when dir
// held no records) and the restored one takes its place.
func RestoreDir(dir string, r io.Reader, opts Options) (previous string, err error) {
	opts.GCInterval = -1
	dir = strings.TrimRight(dir, string(os.PathSeparator))
	hadRecords := false
	if _, statErr := os.Stat(dir); statErr == nil {
		cur, err := Open(dir, opts)
		if err != nil {
			return "", err
		}
		hadRecords, err = cur.hasRecords(context.Background())
		if cerr := cur.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("read current store: %w", err)
		}
	}
	fresh, err := loadBackup(dir, r, opts)
	if err != nil {
		return "", err
	}
	tmp := fresh.path
	if err := fresh.Close(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("load backup: %w", err)
	}
	if hadRecords {
		previous = dir + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(dir, previous); err != nil {
			os.RemoveAll(tmp)
			return "", fmt.Errorf("move the current store aside: %w", err)
		}
	} else if err := os.RemoveAll(dir); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if previous != "" {
			_ = os.Rename(previous, dir)
		}
		return "", fmt.Errorf("move the restored store into place: %w", err)
	}
	return previous, nil
}

func (s *Store) hasRecords(ctx context.Context) (bool, error) {
	found := false
	err := s.View(ctx, func(tx *Tx) error {
		return tx.scan(nil, nil, false, true, func(_, _ []byte) (bool, error) {
			found = true
			return false, nil
		})
	})
	return found, err
}

// Sync flushes every write committed so far to disk, also with SyncWrites
// off.
func (s *Store) Sync() error {
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.leave(false)
	return s.syncEngine()
}

// syncEngine is Sync inside the gate. A server engine's commits are its
// own business (no kv.Syncer).
func (s *Store) syncEngine() error {
	if sy, ok := s.base.(kv.Syncer); ok {
		return sy.Sync()
	}
	return nil
}

// FailedSyncs is the number of syncs of the engine's logs that failed since
// the store opened (kv.Syncer; zero on a server engine, whose commits fail
// themselves when they cannot be made durable). A writer whose work is made
// of asynchronous commits reads it before its first commit and after its
// Sync: a higher count means some of that work may not be on disk.
func (s *Store) FailedSyncs() uint64 {
	if s.enter(false) != nil {
		return 0
	}
	defer s.leave(false)
	if sy, ok := s.base.(kv.Syncer); ok {
		return sy.FailedSyncs()
	}
	return 0
}

// Size returns the bytes on disk of the store's tables and of its value
// logs (kv.Sizer: Badger's figures, updated about once a minute; zero on
// an engine that does not say).
func (s *Store) Size() (tables, valueLogs int64) {
	sz, ok := s.base.(kv.Sizer)
	if !ok || s.enter(false) != nil {
		return 0, 0
	}
	defer s.leave(false)
	return sz.Size()
}

// Ping reports whether the store answers reads.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.leave(false)
	return s.engineErr(s.eng.Ping(ctx))
}

// Lead calls fn while this node holds the lease name among every node of
// the store (kv.Leases: in-process with Badger, a lease row renewed in
// PostgreSQL), and takes it again after fn returned or the lease was lost,
// until ctx ends. fn's context ends when the lease is lost: singleton work
// (the directory document, relay subscriptions, sweeps, queues) runs under
// it and must be idempotent. It returns once ctx has ended and fn returned.
func (s *Store) Lead(ctx context.Context, name string, fn func(ctx context.Context)) {
	if l, ok := s.eng.(kv.Leases); ok {
		l.Lead(ctx, name, fn)
		return
	}
	fn(ctx)
}

// LeadWoken is Lead for a worker that notifications on channel wake
// (Subscribe, from whichever node publishes): it subscribes wake for as long
// as ctx lasts, the lease held or not, so that the node that takes the lease
// next has heard what was published meanwhile. A failed subscription is
// logged as subscribing to what, and the worker then goes by its own polls.
func (s *Store) LeadWoken(ctx context.Context, name, channel, what string, wake func(payload string), fn func(ctx context.Context)) {
	if stop, err := s.Subscribe(channel, wake); err != nil {
		s.Logger().Error("subscribe to "+what, zap.Error(err))
	} else {
		defer stop()
	}
	s.Lead(ctx, name, fn)
}

// Counters is the engine's shared rate-limit counting (kv.Counters), so a
// limit holds across every node of the store (handlers/ratelimit's
// NewSharedRegistry). Its calls answer ErrClosed while the store is not
// open and ErrEngineUnavailable while the database is away
// (storage/counters.go).
func (s *Store) Counters() kv.Counters { return storeCounters{s} }

// Subscribe calls fn with every payload published on channel by any node
// of the store (Publish) after it returned, and with kv.Missed when some may
// have been lost (the engine's listener reconnected): then drop whatever was
// cached. stop ends it.
func (s *Store) Subscribe(channel string, fn func(payload string)) (stop func(), err error) {
	return s.eng.Subscribe(channel, fn)
}

// NotificationsMissed is the payload a Subscribe callback receives when
// notifications may have been lost (the engine's listener reconnected):
// whatever was derived from them must be read again.
const NotificationsMissed = kv.Missed

// Publish sends payload on channel to the subscribers of every node
// (kv.Writer.Notify in a transaction of its own). Within a transaction that
// changes records, use Tx.notify so the message goes if and only if the
// change commits. The transaction writes nothing, so its commit is
// asynchronous: it does not wait for a disk flush (Badger's group commit).
func (s *Store) Publish(ctx context.Context, channel, payload string) error {
	return s.UpdateAsync(ctx, func(tx *Tx) error { return tx.notify(channel, payload) })
}

// Live reports whether every notification published since it last
// returned true reached this node's subscribers (kv.Engine.Live): caches
// filled from the store may be trusted only while it is true.
func (s *Store) Live() bool { return s.eng != nil && s.eng.Live() }

// DeletePrefixInBatches deletes every key with prefix, a bounded number of
// keys (1000) per transaction, for more keys than one transaction may hold.
// It is not atomic: an error leaves the batches before it deleted, and
// keys written under prefix meanwhile may or may not be deleted.
func (s *Store) DeletePrefixInBatches(ctx context.Context, prefix []byte) error {
	const batch = 1000
	for {
		n := 0
		err := s.Update(ctx, func(tx *Tx) error {
			n = 0
			var keys [][]byte
			err := tx.scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
				keys = append(keys, append([]byte{}, k...))
				return len(keys) < batch, nil
			})
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := tx.delete(k); err != nil {
					return err
				}
			}
			n = len(keys)
			return nil
		})
		if err != nil {
			return fmt.Errorf("delete records in batches: %w", err)
		}
		if n < batch {
			return nil
		}
	}
}
