package storage

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
)

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
	waiting  int // callers blocked in wait (tests)
}

func newGroupSync(sync func() error) *groupSync {
	g := &groupSync{sync: sync}
	g.cond.L = &g.mu
	return g
}

// wait returns when every commit that returned before the call is on disk.
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
		}
		g.cond.Broadcast()
	}
	if g.failedAt >= need {
		return fmt.Errorf("sync the store's logs: %w", g.failErr)
	}
	return nil
}

// vlogThreshold is the value size from which Badger keeps a value in the
// value log instead of the memtable's log (Badger's default, set explicitly
// because logSyncer relies on it).
const vlogThreshold = 1 << 20

// logSyncer fsyncs the files a commit may have written: Badger's memtable
// write-ahead logs (*.mem) and, when a value of vlogThreshold bytes or more
// was written, its value logs (*.vlog) in dir.
//
// Badger, with SyncWrites off, neither syncs a memtable's log when it turns
// the memtable immutable nor a value-log file when it starts the next one,
// so syncing only the current files (DB.Sync) could miss a commit that
// landed just before such a rotation. logSyncer therefore syncs every
// memtable log present (there are one or two: a flushed memtable's log is
// deleted only after its table is on disk) and every value log from the
// newest one it synced last time onwards, and the directory itself when
// log files appeared or went since the last sync.
type logSyncer struct {
	dir string
	// vlogWritten is set by Tx.put before a commit that writes to the
	// value log; sync clears it. Most commits don't, and syncing a clean
	// file still costs a disk cache flush.
	vlogWritten *atomic.Bool

	// Only the groupSync leader calls sync, so these need no lock.
	primed   bool     // the first sync covers every value log
	vlogFrom uint64   // lowest value-log id still to sync
	names    []string // log files seen by the last sync
}

func (l *logSyncer) sync() (err error) {
	withVlogs := l.vlogWritten.Swap(false) || !l.primed
	defer func() {
		if err != nil && withVlogs {
			l.vlogWritten.Store(true) // the next sync tries again
		}
	}()
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	mems, vlogs, newest := logsToSync(entries, l.vlogFrom)
	files := mems
	if withVlogs {
		files = append(files, vlogs...)
	}
	for _, name := range files {
		if err := fdatasyncPath(filepath.Join(l.dir, name)); err != nil {
			return err
		}
	}
	names := slices.Concat(mems, vlogs)
	if !sameNames(names, l.names) {
		// New files are durable only once their directory entry is.
		if err := fsyncPath(l.dir); err != nil {
			return err
		}
	}
	l.names = names
	if withVlogs {
		l.vlogFrom = newest
	}
	l.primed = true
	return nil
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

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fsyncPath flushes a file or directory, data and metadata, to disk.
func fsyncPath(path string) error { return syncPath(path, (*os.File).Sync) }

// fdatasyncPath flushes a log file's data to disk: what msync does for
// Badger with SyncWrites on. The logs are memory-mapped, so each write also
// moves their modification time, which fdatasync (unlike fsync) does not
// commit to the journal.
func fdatasyncPath(path string) error { return syncPath(path, fdatasync) }

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
