package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A caller's commit is durable only after a sync that started after the
// commit returned; callers that arrive while a sync runs share the next one.
func TestGroupSyncSharesOneSyncAmongWaiters(t *testing.T) {
	release := make(chan struct{})
	var syncs atomic.Int32
	var committed atomic.Int32 // commits done before the current sync started
	var covered []int32        // per sync: commits it covers
	var mu sync.Mutex
	g := newGroupSync(func() error {
		n := syncs.Add(1)
		mu.Lock()
		covered = append(covered, committed.Load())
		mu.Unlock()
		if n == 1 {
			<-release
		}
		return nil
	})

	first := make(chan error)
	committed.Add(1)
	go func() { first <- g.wait() }()
	waitFor(t, func() bool { return syncs.Load() == 1 })

	// 40 commits land while the first sync runs: none of them may return
	// before a sync that starts after their commit.
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			committed.Add(1)
			errs <- g.wait()
		}()
	}
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.waiting == n })
	select {
	case err := <-errs:
		t.Fatalf("a waiter returned (%v) while the sync before its commit was still running", err)
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := syncs.Load(); got != 2 {
		t.Fatalf("%d syncs for 41 commits in two waves, want 2", got)
	}
	if covered[1] != n+1 {
		t.Fatalf("the second sync started after %d commits, want %d", covered[1], n+1)
	}
}

func TestGroupSyncReportsAFailedSyncToItsWaiters(t *testing.T) {
	fail := true
	g := newGroupSync(func() error {
		if fail {
			return errors.New("disk on fire")
		}
		return nil
	})
	if err := g.wait(); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("wait after a failed sync: %v", err)
	}
	fail = false
	if err := g.wait(); err != nil {
		t.Fatalf("wait after the disk recovered: %v", err)
	}
}

func TestLogsToSyncPicksMemtablesAndNewValueLogs(t *testing.T) {
	listing := []string{"000001.sst", "00004.mem", "00005.mem", "000001.vlog", "000002.vlog",
		"000003.vlog", "MANIFEST", "KEYREGISTRY", "DISCARD", "LOCK", "junk.vlog"}
	mems := []string{"00004.mem", "00005.mem"}
	for _, tc := range []struct {
		from       uint64
		wantVlogs  []string
		wantNewest uint64
	}{
		{0, []string{"000001.vlog", "000002.vlog", "000003.vlog"}, 3},
		{2, []string{"000002.vlog", "000003.vlog"}, 3},
		{3, []string{"000003.vlog"}, 3},
		{4, nil, 4},
	} {
		gotMems, vlogs, newest := logsToSync(dirEntries(listing), tc.from)
		if !reflect.DeepEqual(gotMems, mems) || !reflect.DeepEqual(vlogs, tc.wantVlogs) || newest != tc.wantNewest {
			t.Errorf("from %d: %v %v, newest %d; want %v %v, %d", tc.from, gotMems, vlogs, newest, mems, tc.wantVlogs, tc.wantNewest)
		}
	}
}

// Between rotations a sync is one fdatasync of the newest memtable log,
// kept open; a log numbered one more, or any change to the directory, makes
// the next sync list the directory and cover every memtable log and the
// directory entry.
func TestLogSyncerFollowsMemtableLogRotations(t *testing.T) {
	dir := t.TempDir()
	// changed marks the directory as changed, also where the file system's
	// timestamps are coarser than the test's steps.
	changed := func() {
		t.Helper()
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		later := st.ModTime().Add(time.Second)
		if err := os.Chtimes(dir, later, later); err != nil {
			t.Fatal(err)
		}
	}
	create := func(names ...string) {
		t.Helper()
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("log"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(names ...string) {
		t.Helper()
		for _, n := range names {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	create("00004.mem", "00005.mem", "000001.vlog", "MANIFEST", "000001.sst")
	var vlogWritten atomic.Bool
	var flushed []string
	ls := &logSyncer{dir: dir, vlogWritten: &vlogWritten, flush: func(f *os.File) error {
		flushed = append(flushed, filepath.Base(f.Name()))
		return nil
	}}
	step := func(what string, wantFlushed []string, wantFull bool) {
		t.Helper()
		flushed = nil
		full := ls.fullRuns
		if err := ls.sync(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !reflect.DeepEqual(flushed, wantFlushed) {
			t.Errorf("%s: flushed %v, want %v", what, flushed, wantFlushed)
		}
		if gotFull := ls.fullRuns > full; gotFull != wantFull {
			t.Errorf("%s: listed the directory: %v, want %v", what, gotFull, wantFull)
		}
	}

	step("first sync", []string{"00004.mem", "00005.mem", "000001.vlog"}, true)
	step("no rotation", []string{"00005.mem"}, false)
	step("no rotation again", []string{"00005.mem"}, false)
	open5 := ls.mem

	// The next log is seen by its name alone (the directory's time is
	// left as it was).
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	create("00006.mem")
	if err := os.Chtimes(dir, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	step("rotation", []string{"00004.mem", "00005.mem", "00006.mem"}, true)
	if _, err := open5.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the replaced log is still open (Stat: %v)", err)
	}
	step("after rotation", []string{"00006.mem"}, false)

	remove("00004.mem")
	changed()
	step("old log flushed to a table", []string{"00005.mem", "00006.mem"}, true)
	step("after the flush", []string{"00006.mem"}, false)

	// Between two syncs the next log filled up and was flushed: only the
	// directory's change tells.
	create("00007.mem", "00008.mem")
	remove("00007.mem")
	changed()
	step("next log came and went", []string{"00005.mem", "00006.mem", "00008.mem"}, true)
	step("after it", []string{"00008.mem"}, false)

	create("000002.sst")
	changed()
	step("other file", []string{"00005.mem", "00006.mem", "00008.mem"}, true)

	vlogWritten.Store(true)
	create("000002.vlog")
	step("big value", []string{"00005.mem", "00006.mem", "00008.mem", "000001.vlog", "000002.vlog"}, true)
	step("small value", []string{"00008.mem"}, false)

	if err := ls.close(); err != nil {
		t.Fatal(err)
	}
	step("after close", []string{"00005.mem", "00006.mem", "00008.mem"}, true)
	if ls.mem != nil {
		t.Error("a sync after close left a log open")
	}
}

// A memtable log name that is not Badger's %05d form leaves nothing open:
// every sync lists the directory.
func TestLogSyncerFallsBackOnUnexpectedNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"4.mem", "00005.mem.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var vlogWritten atomic.Bool
	var flushed []string
	ls := &logSyncer{dir: dir, vlogWritten: &vlogWritten, flush: func(f *os.File) error {
		flushed = append(flushed, filepath.Base(f.Name()))
		return nil
	}}
	for i := range 2 {
		if err := ls.sync(); err != nil {
			t.Fatal(err)
		}
		if ls.fullRuns != i+1 || ls.mem != nil {
			t.Fatalf("sync %d: %d full syncs, open log %v", i, ls.fullRuns, ls.mem)
		}
	}
	if want := []string{"4.mem", "4.mem"}; !reflect.DeepEqual(flushed, want) {
		t.Fatalf("flushed %v, want %v", flushed, want)
	}
	for _, tc := range []struct {
		name string
		id   uint64
		ok   bool
	}{{"00001.mem", 1, true}, {"123456.mem", 123456, true}, {"1.mem", 0, false}, {"00001.vlog", 0, false}, {"0000x.mem", 0, false}} {
		if id, ok := memLogID(tc.name); id != tc.id || ok != tc.ok {
			t.Errorf("memLogID(%q) = %d, %v", tc.name, id, ok)
		}
	}
}

// Value logs are synced when a commit wrote a value big enough to go there
// (and once after opening), not after every commit.
func TestValueLogsAreSyncedOnlyAfterBigValues(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var vlogFlushed bool
	st.logs.flush = func(f *os.File) error {
		vlogFlushed = vlogFlushed || strings.HasSuffix(f.Name(), ".vlog")
		return fdatasync(f)
	}
	var vlogSyncs []bool // per sync: did it cover value logs?
	st.durable.sync = func() error {
		vlogFlushed = false
		err := st.logs.sync()
		vlogSyncs = append(vlogSyncs, vlogFlushed)
		return err
	}
	put := func(i, size int) {
		t.Helper()
		if err := st.Update(func(tx *Tx) error {
			return tx.put(durabilityKey(i), []byte(strings.Repeat("v", size)), 0)
		}); err != nil {
			t.Fatal(err)
		}
	}
	put(0, 10)
	put(1, 10)
	put(2, vlogThreshold)
	put(3, 10)
	if want := []bool{true, false, true, false}; !reflect.DeepEqual(vlogSyncs, want) {
		t.Fatalf("syncs covering value logs: %v, want %v", vlogSyncs, want)
	}
	err = st.View(func(tx *Tx) error {
		v, err := tx.get(durabilityKey(2))
		if err == nil && len(v) != vlogThreshold {
			err = fmt.Errorf("big value has %d bytes", len(v))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// With sync_writes on, a store under concurrent writers whose memtables
// rotate (8 MiB memtables, about 19 MiB written) keeps every acknowledged
// write, and every sync covers each memtable log that existed when it
// started: in that sync, or in an earlier one that started after the log
// stopped changing (a newer log existed), or the log was gone (flushed to a
// table).
func TestSyncedStoreUnderConcurrentWritesWithRotation(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{MemTableSize: 8 << 20, ValueLogFileSize: 1 << 20, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Only the groupSync leader runs these, one at a time.
	var flushed map[string]bool       // in the current sync
	newerAtFlush := map[string]bool{} // a newer log existed when it was flushed
	settled := map[string]bool{}      // synced after a newer log existed
	everSynced := map[string]bool{}
	var syncs int
	var problems []string
	st.logs.flush = func(f *os.File) error {
		name := filepath.Base(f.Name())
		flushed[name] = true
		// Listed here, not before the sync: a log can appear in between,
		// and the sync's own listing then sees it.
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if mems, _, _ := logsToSync(entries, 0); len(mems) > 0 && mems[len(mems)-1] > name {
			newerAtFlush[name] = true
		}
		return fdatasync(f)
	}
	st.durable.sync = func() error {
		syncs++
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		before, _, _ := logsToSync(entries, 0)
		flushed = map[string]bool{}
		if err := st.logs.sync(); err != nil {
			return err
		}
		for _, name := range before {
			switch {
			case flushed[name]:
				everSynced[name] = true
				if newerAtFlush[name] {
					settled[name] = true
				}
			case settled[name]:
			default:
				if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
					problems = append(problems, fmt.Sprintf("sync %d left %s (of %v) unsynced", syncs, name, before))
				}
			}
		}
		return nil
	}
	const writers, each = 16, 300
	big := strings.Repeat("v", vlogThreshold-1) // in the memtable logs, filling them
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := st.Update(func(tx *Tx) error {
					return tx.put(durabilityKey(w*each+i), []byte(big), 0)
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s", len(problems), problems[0])
	}
	if syncs == 0 || syncs > writers*each {
		t.Fatalf("%d syncs for %d commits", syncs, writers*each)
	}
	if len(everSynced) < 2 || len(settled) == 0 {
		t.Fatalf("memtable logs synced: %v, settled: %v; the test needs a rotation", everSynced, settled)
	}
	t.Logf("%d syncs (%d full) for %d commits; memtable logs synced: %v", syncs, st.logs.fullRuns, writers*each, everSynced)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir, Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.View(func(tx *Tx) error {
		for i := range writers * each {
			if _, err := tx.get(durabilityKey(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type fakeEntry string

func (e fakeEntry) Name() string               { return string(e) }
func (e fakeEntry) IsDir() bool                { return false }
func (e fakeEntry) Type() fs.FileMode          { return 0 }
func (e fakeEntry) Info() (fs.FileInfo, error) { return nil, errors.New("no info") }

func dirEntries(names []string) []fs.DirEntry {
	out := make([]fs.DirEntry, len(names))
	for i, n := range names {
		out[i] = fakeEntry(n)
	}
	return out
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A sync that runs while a transaction with a big value is still open (it
// has put the value, Badger has not written it yet) must not use up the
// sign that value logs need syncing: the commit's own sync covers them.
func TestBigValueCommitSyncsValueLogsAfterAConcurrentSync(t *testing.T) {
	st, err := Open(t.TempDir(), Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Sync(); err != nil { // the first sync covers every log
		t.Fatal(err)
	}
	var mu sync.Mutex
	var flushed []string
	st.logs.flush = func(f *os.File) error {
		mu.Lock()
		flushed = append(flushed, filepath.Base(f.Name()))
		mu.Unlock()
		return fdatasync(f)
	}
	var beforeCommit int
	err = st.Update(func(tx *Tx) error {
		if err := tx.put([]byte("big"), []byte(strings.Repeat("v", vlogThreshold)), 0); err != nil {
			return err
		}
		// Another request's commit syncs now, before ours is committed.
		if err := st.Sync(); err != nil {
			return err
		}
		mu.Lock()
		beforeCommit = len(flushed)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range flushed[beforeCommit:] {
		if strings.HasSuffix(n, ".vlog") {
			return
		}
	}
	t.Fatalf("after the commit of a big value only %v were synced", flushed[beforeCommit:])
}

// A failed sync in garbage collection is logged and keeps the old value-log
// files; it does not bring the process down.
func TestGarbageCollectionSurvivesAFailedSync(t *testing.T) {
	st, err := Open(t.TempDir(), Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.durable.sync = func() error { return errors.New("EIO") }
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("CollectGarbage panicked: %v", r)
		}
	}()
	st.CollectGarbage()
}

// An asynchronous commit returns without a sync; the next synchronous commit
// covers it, and without one it is synced after the store's delay. A failed
// sync is logged, not tried again (a later fdatasync can succeed without the
// pages a write-back error dropped); Close waits for a sync that started.
func TestAsynchronousCommitsAreSyncedLater(t *testing.T) {
	open := func(t *testing.T, dir string, delay time.Duration) (*Store, *atomic.Int32) {
		t.Helper()
		st, err := Open(dir, Options{GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		st.async.delay = delay
		var syncs atomic.Int32
		sync := st.durable.sync
		st.durable.sync = func() error {
			err := sync()
			if err == nil {
				syncs.Add(1)
			}
			return err
		}
		return st, &syncs
	}
	put := func(t *testing.T, update func(func(*Tx) error) error, i int) {
		t.Helper()
		if err := update(func(tx *Tx) error { return tx.put(durabilityKey(i), []byte(strconv.Itoa(i)), 0) }); err != nil {
			t.Fatal(err)
		}
	}
	syncsReach := func(t *testing.T, syncs *atomic.Int32, n int32) {
		t.Helper()
		waitFor(t, func() bool { return syncs.Load() >= n })
	}

	t.Run("covered by the next synchronous commit", func(t *testing.T) {
		st, syncs := open(t, t.TempDir(), time.Hour)
		defer st.Close()
		put(t, st.UpdateAsync, 0)
		put(t, st.UpdateAsync, 1)
		if n := syncs.Load(); n != 0 {
			t.Fatalf("asynchronous commits waited for %d syncs", n)
		}
		put(t, st.Update, 2)
		if n := syncs.Load(); n != 1 {
			t.Fatalf("synchronous commit: %d syncs, want 1", n)
		}
	})

	t.Run("synced after the delay, each time", func(t *testing.T) {
		st, syncs := open(t, t.TempDir(), time.Millisecond)
		defer st.Close()
		put(t, st.UpdateAsync, 0)
		syncsReach(t, syncs, 1)
		put(t, st.UpdateAsync, 1)
		syncsReach(t, syncs, 2)
	})

	t.Run("a failed sync is logged, and the next commit schedules again", func(t *testing.T) {
		st, syncs := open(t, t.TempDir(), time.Millisecond)
		defer st.Close()
		core, logs := observer.New(zap.ErrorLevel)
		st.log = zap.New(core)
		var calls atomic.Int32
		sync := st.durable.sync
		st.durable.sync = func() error {
			if calls.Add(1) == 1 {
				return errors.New("disk said no")
			}
			return sync()
		}
		put(t, st.UpdateAsync, 0)
		waitFor(t, func() bool { return logs.Len() == 1 })
		if e := logs.All()[0]; !strings.Contains(e.Message, "may not survive a power loss") {
			t.Fatalf("logged %q", e.Message)
		}
		put(t, st.UpdateAsync, 1)
		syncsReach(t, syncs, 1)
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d syncs tried, want 2 (no retry of the failed one)", n)
		}
	})

	t.Run("Close waits for a sync that started", func(t *testing.T) {
		st, _ := open(t, t.TempDir(), time.Millisecond)
		started, release := make(chan struct{}), make(chan struct{})
		var finished atomic.Bool
		sync := st.durable.sync
		st.durable.sync = func() error {
			close(started)
			<-release
			defer finished.Store(true)
			return sync()
		}
		put(t, st.UpdateAsync, 0)
		<-started
		closed := make(chan error)
		go func() { closed <- st.Close() }()
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while a sync was running", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if !finished.Load() {
			t.Fatal("Close returned before the sync finished")
		}
	})
}
