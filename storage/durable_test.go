package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// Value logs are synced when a commit wrote a value big enough to go there
// (and once after opening), not after every commit.
func TestValueLogsAreSyncedOnlyAfterBigValues(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var vlogSyncs []bool // per sync: did it cover value logs?
	ls := &logSyncer{dir: dir, vlogWritten: &st.vlogWritten}
	st.durable.sync = func() error {
		vlogSyncs = append(vlogSyncs, st.vlogWritten.Load() || !ls.primed)
		return ls.sync()
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
// write, and its syncs cover the memtable logs Badger wrote.
func TestSyncedStoreUnderConcurrentWritesWithRotation(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{MemTableSize: 8 << 20, ValueLogFileSize: 1 << 20, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ls := &logSyncer{dir: dir, vlogWritten: &st.vlogWritten}
	var synced sync.Map // file name → true
	var syncs atomic.Int32
	st.durable.sync = func() error {
		syncs.Add(1)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		mems, _, _ := logsToSync(entries, ls.vlogFrom)
		for _, f := range mems {
			synced.Store(f, true)
		}
		return ls.sync()
	}
	const writers, each = 16, 200
	big := strings.Repeat("v", 6<<10)
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
	if n := syncs.Load(); n == 0 || n > writers*each {
		t.Fatalf("%d syncs for %d commits", n, writers*each)
	}
	var memsSynced []string
	synced.Range(func(k, _ any) bool {
		if strings.HasSuffix(k.(string), ".mem") {
			memsSynced = append(memsSynced, k.(string))
		}
		return true
	})
	if len(memsSynced) < 2 {
		t.Fatalf("memtable logs synced: %v; the test needs a rotation", memsSynced)
	}
	t.Logf("%d syncs for %d commits; memtable logs synced: %v", syncs.Load(), writers*each, memsSynced)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mems []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".mem" {
			mems = append(mems, e.Name())
		}
	}
	slices.Sort(mems)
	if len(mems) == 0 {
		t.Fatal("no memtable log in the store directory")
	}
	if _, ok := synced.Load(mems[len(mems)-1]); !ok {
		t.Fatalf("the current memtable log %s was never synced", mems[len(mems)-1])
	}
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
