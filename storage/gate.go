package storage

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
	"go.uber.org/zap"
)

// Errors of a store that cannot take an operation now. Handlers answer them
// with Unavailable's status (503 or 507) and Retry-After, in their
// protocol's format; nothing was changed.
var (
	// ErrClosed: the store was closed (a reload moved to another
	// storage_dir, or Caddy is stopping) while the request was served.
	ErrClosed = errors.New("the store is closed (the server is reloading or stopping); try again")
	// ErrRestoring: a restore is running; writes are refused until it ends
	// so that none is acknowledged and then overwritten. Reads continue.
	ErrRestoring = errors.New("a restore of the store is running; writes are refused until it has finished")
	// ErrDiskFull: the free space of the store's filesystem is below
	// Options.MinFreeBytes; writes are refused, reads continue, and writes
	// resume once space is freed.
	ErrDiskFull = errors.New("the disk of the store is (nearly) full; writes are refused until space is freed")
	// ErrEngineUnavailable: the storage engine's server (PostgreSQL)
	// cannot be reached now; it is retried by itself, and the store serves
	// again once it answers. The cause goes to the log, not to clients.
	ErrEngineUnavailable = errors.New("the store's database cannot be reached; try again shortly")
)

// Retry-After values of Unavailable.
const (
	retryAfterUnavailable = 5 * time.Second
	retryAfterDiskFull    = 60 * time.Second
)

// Unavailable reports whether err (or what it wraps) is one of ErrClosed,
// ErrRestoring or ErrDiskFull, or the storage engine's kv.ErrUnavailable
// (PostgreSQL away) or kv.ErrClosed, with the HTTP status to answer (503, or 507
// Insufficient Storage for a full disk) and how long the client should wait
// before retrying. Every other error gives ok false.
func Unavailable(err error) (status int, retryAfter time.Duration, ok bool) {
	switch {
	case err == nil:
		return 0, 0, false
	case errors.Is(err, ErrDiskFull):
		return 507, retryAfterDiskFull, true
	case errors.Is(err, ErrRestoring), errors.Is(err, ErrClosed), errors.Is(err, ErrEngineUnavailable),
		errors.Is(err, kv.ErrUnavailable), errors.Is(err, kv.ErrClosed):
		return 503, retryAfterUnavailable, true
	}
	return 0, 0, false
}

// gate counts the operations that use the database so that Close waits for
// them (and later ones get ErrClosed instead of Badger's "DB Closed" panic),
// and refuses writes while a restore runs or the disk is nearly full.
// Entering never blocks, so operations may nest.
type gate struct {
	mu        sync.Mutex
	idle      sync.Cond // signalled when active drops to 0 or writes to 0
	open      bool      // the database is open (Store.Open)
	closed    bool
	restoring bool
	active    int // operations in the database, writes included
	writes    int // writes in the database

	// The last reading of the free space (lowOnSpace), without the lock:
	// spaceAt is when it was taken (Unix ns), spaceLeft the bytes writes
	// may still add before it is taken again.
	spaceAt   atomic.Int64
	spaceLeft atomic.Int64
	// full: the last reading was below the reserve; fullLogged is when
	// that was last logged (Unix ns), for diskFullLogEvery.
	full       atomic.Bool
	fullLogged atomic.Int64
}

func (g *gate) init() { g.idle.L = &g.mu }

// opened admits operations: the database is open.
func (g *gate) opened() {
	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
}

// enter admits an operation (a write when write is set), or returns why not.
func (s *Store) enter(write bool) error {
	low := write && s.lowOnSpace() // a system call: outside the lock
	g := &s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed || !g.open:
		return ErrClosed
	case write && g.restoring:
		return ErrRestoring
	case low:
		return ErrDiskFull
	}
	g.active++
	if write {
		g.writes++
	}
	return nil
}

// leave ends an operation admitted by enter.
func (s *Store) leave(write bool) {
	g := &s.gate
	g.mu.Lock()
	g.active--
	if write {
		g.writes--
	}
	if g.active == 0 || g.writes == 0 {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}

// closeGate refuses new operations and waits for those running.
func (s *Store) closeGate() {
	g := &s.gate
	g.mu.Lock()
	g.closed = true
	for g.active > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
}

// startRestoring refuses new writes and waits for the running ones, so that
// every write acknowledged before is in the store's snapshot taken next.
func (s *Store) startRestoring() {
	g := &s.gate
	g.mu.Lock()
	g.restoring = true
	for g.writes > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
}

func (s *Store) stopRestoring() {
	s.gate.mu.Lock()
	s.gate.restoring = false
	s.gate.mu.Unlock()
}

// lowOnSpace reports whether the store's filesystem has less free space
// than the reserve (Options.MinFreeBytes). Badger writes its logs and
// tables through memory maps: on a full disk it dies of SIGBUS inside its
// own flushes, so writes must stop while it still has room for them.
//
// Reading the free space is a system call, a few percent of the CPU of a
// small write (token issuance), so a reading is trusted for the next
// quarter of the room it showed above the reserve (writesDone counts what
// the commits add) and for spaceCheckEvery at most (other processes fill
// the disk too). Near the reserve every write reads it again.
func (s *Store) lowOnSpace() bool {
	if s.opts.MinFreeBytes <= 0 {
		return false
	}
	g := &s.gate
	now := time.Now().UnixNano()
	if g.spaceLeft.Load() > 0 && now-g.spaceAt.Load() < int64(spaceCheckEvery) {
		return false
	}
	free, ok := freeBytes(s.path)
	if !ok {
		return false
	}
	room := free - s.opts.MinFreeBytes
	g.spaceLeft.Store(max(room/4, 0))
	g.spaceAt.Store(now)
	s.noteSpace(now, free, room < 0)
	return room < 0
}

// noteSpace logs a reading of the free space below the reserve, at most
// every diskFullLogEvery, and the first one above it again: without it
// the operator would learn of a full disk only from members, since the
// handlers answer the refusal (507) without logging it, and a log line per
// refused write would fill what is left of the disk.
func (s *Store) noteSpace(now, free int64, low bool) {
	g := &s.gate
	if !low {
		if g.full.CompareAndSwap(true, false) {
			s.log.Info("free space is above the store's reserve again; writes resume",
				zap.String("storage_dir", s.path), zap.Int64("free_bytes", free), zap.Int64("min_free_bytes", s.opts.MinFreeBytes))
		}
		return
	}
	g.full.Store(true)
	if last := g.fullLogged.Load(); now-last >= int64(diskFullLogEvery) && g.fullLogged.CompareAndSwap(last, now) {
		s.log.Warn("the store's disk is below its free-space reserve: writes are refused (HTTP 507), reads go on, until space is freed",
			zap.String("storage_dir", s.path), zap.Int64("free_bytes", free), zap.Int64("min_free_bytes", s.opts.MinFreeBytes))
	}
}

// belowReserve reads the free space now, not the reading writes trust
// (lowOnSpace): for the store's own writes outside transactions (value-log
// garbage collection).
func (s *Store) belowReserve() bool {
	if s.opts.MinFreeBytes <= 0 {
		return false
	}
	free, ok := freeBytes(s.path)
	return ok && free < s.opts.MinFreeBytes
}

// spaceCheckEvery is how long a reading of the free space is trusted.
const spaceCheckEvery = 100 * time.Millisecond

// diskFullLogEvery spaces the log lines of a disk below the reserve.
const diskFullLogEvery = time.Minute

// writesDone counts bytes a transaction wrote (keys and values) against the
// room of the last free-space reading.
func (s *Store) writesDone(n int64) {
	if n > 0 && s.opts.MinFreeBytes > 0 {
		s.gate.spaceLeft.Add(-n)
	}
}

// engineErr turns the engine's kv.ErrUnavailable into ErrEngineUnavailable
// (its message names no host), logging the cause at most every
// unavailableLogEvery.
func (s *Store) engineErr(err error) error {
	if err == nil || !errors.Is(err, kv.ErrUnavailable) {
		return err
	}
	now := time.Now().UnixNano()
	if last := s.unavailableLogged.Load(); now-last >= int64(unavailableLogEvery) && s.unavailableLogged.CompareAndSwap(last, now) {
		s.log.Warn("the storage engine is unavailable; requests get 503 until it answers", zap.Error(err))
	}
	return ErrEngineUnavailable
}

const unavailableLogEvery = 10 * time.Second
