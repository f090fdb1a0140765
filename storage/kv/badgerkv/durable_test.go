package badgerkv

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
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
	kvtest.Eventually(t, "the first sync runs", func() bool { return syncs.Load() == 1 })

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
	kvtest.Eventually(t, "every commit waits", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.waiting == n })
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
