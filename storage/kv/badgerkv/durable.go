package badgerkv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// This file is the group commit of Badger's commits. It uses Badger's public API for every read and write and
// syncs Badger's log files by name: the file layout it relies on (memtable
// logs %05d.mem numbered upwards, one created per new memtable before its
// first write; value logs %06d.vlog; values of ValueThreshold bytes or more
// in the value log, smaller ones in the memtable's log) is pinned by
// TestBadgerFileLayout, which fails when a Badger upgrade changes it.

// groupSync makes commits durable with one fsync shared by every commit that
// finished before it started (group commit). Badger's own SyncWrites syncs
// its log once per transaction in its single writer goroutine, so N
// concurrent commits cost N fsyncs one after the other; here they cost one
// or two.
//
// A caller commits with Badger's SyncWrites off (the commit is then in the
// memory-mapped logs, which survive a crash of the process) and then calls
// wait, which returns once a sync that started after the call has finished.
type groupSync struct {
	sync func() error

	mu       sync.Mutex
	cond     sync.Cond
	started  uint64 // syncs started so far; the n-th sync has number n
	finished uint64 // number of the last finished sync
	running  bool
	failedAt uint64 // number of the last sync that failed
	failErr  error
	// failures counts the syncs that failed. A sync that only asynchronous
	// commits relied on (flush) fails no caller: the writer acknowledging
	// work made of them (an import's end) reads the count before its first
	// commit and compares it after its Sync, so every such writer that
	// overlapped the failure learns of it, however many end together. A
	// synchronous commit's wait returns only the failure of its own sync:
	// its writes are on disk otherwise, and another writer's failure is
	// not its to report (a member's save would fail though saved).
	failures uint64
	waiting  int // callers blocked in wait (tests)
}

func newGroupSync(sync func() error) *groupSync {
	g := &groupSync{sync: sync}
	g.cond.L = &g.mu
	return g
}

// wait returns when every commit that returned before the call is on disk.
// A failed sync is not tried again (after a write-back error the kernel
// may have dropped the pages, and a later fdatasync can succeed without
// them): the failure is counted (failed) and logged by the flush.
func (g *groupSync) wait() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	// A sync already running may have listed the files before our commit
	// finished, so only the next one to start counts.
	need := g.started + 1
	for g.finished < need {
		if g.running {
			g.waiting++
			g.cond.Wait()
			g.waiting--
			continue
		}
		g.running = true
		g.started++
		n := g.started
		g.mu.Unlock()
		err := g.sync()
		g.mu.Lock()
		g.running = false
		g.finished = n
		if err != nil {
			g.failedAt, g.failErr = n, err
			g.failures++
		}
		g.cond.Broadcast()
	}
	if g.failedAt >= need {
		return fmt.Errorf("%w: sync the store's logs: %w", kv.ErrNotSynced, g.failErr)
	}
	return nil
}

// failed is the number of syncs that failed so far.
func (g *groupSync) failed() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failures
}

// asyncFlushDelay is how long after an asynchronous commit (UpdateAsync) a
// sync starts at the latest, when no synchronous commit's sync covers it
// first: PostgreSQL's wal_writer_delay.
const asyncFlushDelay = 200 * time.Millisecond

// asyncFlush syncs the asynchronous commits a delay after the first of them
// (also when a synchronous commit's sync covered them meanwhile: that costs
// at most one sync per delay).
type asyncFlush struct {
	delay   time.Duration
	pending atomic.Bool // a run is scheduled and has not started
	mu      sync.Mutex  // orders scheduling with stop
	timer   *time.Timer
	stopped bool
	running sync.WaitGroup // runs scheduled and not finished or cancelled
}

// schedule arranges for flush to run after the delay, unless a run is
// already scheduled: that run starts after this call, so it covers every
// commit that returned before it.
func (a *asyncFlush) schedule(flush func()) {
	if !a.pending.CompareAndSwap(false, true) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	a.running.Add(1)
	a.timer = time.AfterFunc(a.delay, func() {
		defer a.running.Done()
		// Cleared before the flush starts: a commit returning from here on
		// schedules the next run, one that returned before is covered.
		a.pending.Store(false)
		flush()
	})
}

// stop cancels the scheduled run and any later one and waits for a run that
// already started (Engine.Close, before Badger closes and writes its
// memtables to disk).
func (a *asyncFlush) stop() {
	a.mu.Lock()
	a.stopped = true
	if a.timer != nil && a.timer.Stop() {
		a.running.Done()
	}
	a.mu.Unlock()
	a.running.Wait()
}

// logSyncer fsyncs the files a commit may have written: Badger's memtable
// write-ahead logs (*.mem) and, when a value of ValueThreshold bytes or more
// was written, its value logs (*.vlog) in dir.
//
// Badger, with SyncWrites off, neither syncs a memtable's log when it turns
// the memtable immutable nor a value-log file when it starts the next one,
// so syncing only the current files (DB.Sync) could miss a commit that
// landed just before such a rotation. A full sync therefore syncs every
// memtable log present (there are one or two: a flushed memtable's log is
// deleted only after its table is on disk) and every value log from the
// newest one it synced last time onwards, and the directory itself when
// log files appeared or went since the last full sync.
//
// Most syncs are not full: between rotations the only file a commit can
// have written is the newest memtable log, which logSyncer keeps open. Badger
// numbers memtable logs %05d.mem from one more than the highest present when
// it opens, adding one per new memtable, and its single writer goroutine
// creates the next log after its last write to the current memtable and
// before its first write to the new one. So while no log numbered one more
// than the open one exists, every commit that finished is in the open log or
// in an older one that an earlier sync covered after it stopped changing,
// and one fdatasync of the open log suffices. The next log could also have
// come and gone (filled and flushed to a table) between two syncs, leaving a
// newer one behind; that creates and removes directory entries, so the fast
// path also requires the directory's modification time to be the one read
// before the last full sync listed it. (The next name's stat covers a log
// created within the same timestamp tick as that reading; flushing it takes
// far longer than a tick.) The first sync, a sync after big values, a
// rotation, any change to the directory and anything unexpected take the
// full path.
type logSyncer struct {
	dir string
	// vlogWritten is set after a commit that wrote to the value log, before
	// its caller waits (Engine.Update); sync clears it. Most commits don't, and syncing a clean
	// file still costs a disk cache flush.
	vlogWritten *atomic.Bool
	// flush syncs one log file's data; nil means fdatasync (tests watch it).
	flush func(*os.File) error

	// Only the groupSync leader calls sync; mu orders it with close.
	mu       sync.Mutex
	closed   bool
	primed   bool      // the first sync covers every value log
	vlogFrom uint64    // lowest value-log id still to sync
	names    []string  // log files seen by the last full sync
	mem      *os.File  // the newest memtable log, open between syncs
	memNext  string    // path of the log that would follow mem
	dirTime  time.Time // dir's modification time before the last listing
	fullRuns int       // full syncs so far (tests)
}

func (l *logSyncer) sync() (err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	withVlogs := l.vlogWritten.Swap(false) || !l.primed
	defer func() {
		if err != nil && withVlogs {
			l.vlogWritten.Store(true) // the next sync tries again
		}
	}()
	if !withVlogs && l.mem != nil && l.noRotation() {
		return l.flushFile(l.mem)
	}
	if err := l.syncAll(withVlogs); err != nil {
		// Forget what this sync may have half done (a newly opened log
		// whose directory entry was not synced), so the next sync is a
		// full one again.
		if l.mem != nil {
			l.mem.Close()
			l.mem = nil
		}
		l.names = nil
		return err
	}
	return nil
}

// noRotation reports whether the open memtable log is still the newest:
// the next one does not exist and the directory did not change since the
// last full sync. Checked before the flush, it covers every commit that
// finished before the call.
func (l *logSyncer) noRotation() bool {
	if _, err := os.Lstat(l.memNext); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	st, err := os.Stat(l.dir)
	return err == nil && st.ModTime().Equal(l.dirTime)
}

// syncAll is the full sync: it lists the directory and syncs every memtable
// log and, withVlogs, the value logs from vlogFrom on, and keeps the newest
// memtable log open for the syncs that follow.
func (l *logSyncer) syncAll(withVlogs bool) error {
	st, err := os.Stat(l.dir)
	if err != nil {
		return err
	}
	dirTime := st.ModTime()
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	l.fullRuns++
	mems, vlogs, newest := logsToSync(entries, l.vlogFrom)
	var newestMem string
	var newestMemID uint64
	for _, name := range mems {
		if id, ok := memLogID(name); ok && (newestMem == "" || id > newestMemID) {
			newestMem, newestMemID = name, id
		}
	}
	if l.mem != nil && newestMem != filepath.Base(l.mem.Name()) {
		// A newer log took over: the open one is synced by name below if
		// it is still there, and then closed.
		old := l.mem
		l.mem = nil
		defer old.Close()
	}
	for _, name := range mems {
		if err := l.syncMemLog(name, name == newestMem, newestMemID); err != nil {
			return err
		}
	}
	if withVlogs {
		for _, name := range vlogs {
			if err := syncPath(filepath.Join(l.dir, name), l.flushFile); err != nil {
				return err
			}
		}
	}
	names := slices.Concat(mems, vlogs)
	if !slices.Equal(names, l.names) {
		// New files are durable only once their directory entry is.
		if err := fsyncPath(l.dir); err != nil {
			return err
		}
	}
	l.names = names
	l.dirTime = dirTime
	if withVlogs {
		l.vlogFrom = newest
	}
	l.primed = true
	return nil
}

// syncMemLog syncs the memtable log name; the newest one, with number id,
// stays open as l.mem unless the store is closed.
func (l *logSyncer) syncMemLog(name string, newest bool, id uint64) error {
	path := filepath.Join(l.dir, name)
	if l.mem != nil && l.mem.Name() == path {
		return l.flushFile(l.mem)
	}
	if !newest || l.closed {
		return syncPath(path, l.flushFile)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // flushed to a table already; see syncPath
	}
	if err != nil {
		return err
	}
	if err := l.flushFile(f); err != nil {
		f.Close()
		return err
	}
	l.mem, l.memNext = f, filepath.Join(l.dir, memLogName(id+1))
	return nil
}

// flushFile flushes a log file's data to disk: what msync does for Badger
// with SyncWrites on. The logs are memory-mapped, so each write also moves
// their modification time, which fdatasync (unlike fsync) does not commit to
// the journal.
func (l *logSyncer) flushFile(f *os.File) error {
	if l.flush != nil {
		return l.flush(f)
	}
	return fdatasync(f)
}

// close closes the open memtable log; later syncs (of commits that raced
// with Engine.Close) take the full path and keep nothing open.
func (l *logSyncer) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.mem == nil {
		return nil
	}
	err := l.mem.Close()
	l.mem = nil
	return err
}

// memLogName is Badger's name for the memtable log numbered id.
func memLogName(id uint64) string { return fmt.Sprintf("%05d.mem", id) }

// memLogID parses a name made by memLogName.
func memLogID(name string) (uint64, bool) {
	num, ok := strings.CutSuffix(name, ".mem")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(num, 10, 64)
	if err != nil || memLogName(id) != name {
		return 0, false
	}
	return id, true
}

// logsToSync picks from a directory listing the memtable logs (every *.mem
// file) and the value logs numbered vlogFrom or higher, in listing order,
// and returns the highest value-log id seen (the vlogFrom of the next sync
// that syncs value logs).
func logsToSync(entries []fs.DirEntry, vlogFrom uint64) (mems, vlogs []string, newestVlog uint64) {
	newestVlog = vlogFrom
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".mem"):
			mems = append(mems, name)
		case strings.HasSuffix(name, ".vlog"):
			id, err := strconv.ParseUint(strings.TrimSuffix(name, ".vlog"), 10, 32)
			if err != nil || id < vlogFrom {
				continue
			}
			vlogs = append(vlogs, name)
			newestVlog = max(newestVlog, id)
		}
	}
	return mems, vlogs, newestVlog
}

// fsyncPath flushes a file or directory, data and metadata, to disk.
func fsyncPath(path string) error { return syncPath(path, (*os.File).Sync) }

// syncPath opens path and flushes it with flush. A file that is gone was a
// memtable log whose table Badger already wrote and synced, or a value log
// that garbage collection removed.
func syncPath(path string, flush func(*os.File) error) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = flush(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
