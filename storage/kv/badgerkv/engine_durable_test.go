package badgerkv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/internal/testchild"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
)

func durabilityKey(i int) []byte { return []byte("test/durability/" + strconv.Itoa(i)) }

func openAt(t testing.TB, dir string, o Options) *Engine {
	t.Helper()
	e, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func put(t testing.TB, e *Engine, opts kv.TxOptions, key, val []byte) {
	t.Helper()
	if err := e.Update(context.Background(), opts, func(w kv.Writer) error { return w.Put(key, val, 0) }); err != nil {
		t.Fatal(err)
	}
}

// memLogs lists the memtable logs in dir by number, failing on a *.mem name
// that is not Badger's %05d.mem (logSyncer would then list the directory on
// every sync: correct, but slow).
func memLogs(t *testing.T, dir string) []uint64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	mems, _, _ := logsToSync(entries, 0)
	var ids []uint64
	for _, name := range mems {
		id, ok := memLogID(name)
		if !ok {
			t.Fatalf("memtable log %q is not named %%05d.mem", name)
		}
		ids = append(ids, id)
	}
	return ids
}

// fileHas reports whether the file dir/name holds marker; false when the
// file is gone.
func fileHas(t *testing.T, dir, name string, marker []byte) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, marker)
}

// filesWith lists the *.mem and *.vlog files in dir holding marker.
func filesWith(t *testing.T, dir string, marker []byte) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		n := en.Name()
		if (strings.HasSuffix(n, ".mem") || strings.HasSuffix(n, ".vlog")) && fileHas(t, dir, n, marker) {
			out = append(out, n)
		}
	}
	return out
}

// TestBadgerFileLayout pins the file layout of Badger (v4.9.6) that the
// group commit (durable.go) relies on; it fails when an upgrade changes it:
//
//   - memtable logs are named %05d.mem (memtable.go mtFilePath) and value
//     logs %06d.vlog (value.go vlogFilePath);
//   - a value shorter than ValueThreshold is written to the newest memtable
//     log, one of ValueThreshold bytes or more to a value log and not to a
//     memtable log (structs.go skipVlogAndSetThreshold: len < threshold);
//   - when a memtable fills, the next log is numbered one more, and the
//     commit after it appeared is in that log, not in the previous one
//     (db.go ensureRoomForWrite creates the new memtable in the writer
//     goroutine before writing to it).
func TestBadgerFileLayout(t *testing.T) {
	dir := t.TempDir()
	e := openAt(t, dir, Options{MemTableSize: 8 << 20, ValueLogFileSize: 1 << 20, NoSync: true})
	mems := memLogs(t, dir)
	if len(mems) != 1 {
		t.Fatalf("a new store has memtable logs %v, want one", mems)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	vlogName := regexp.MustCompile(`^[0-9]{6}\.vlog$`)
	var vlogs int
	for _, en := range entries {
		if strings.HasSuffix(en.Name(), ".vlog") {
			if !vlogName.MatchString(en.Name()) {
				t.Fatalf("value log %q is not named %%06d.vlog", en.Name())
			}
			vlogs++
		}
	}
	if vlogs == 0 {
		t.Fatal("no value log in a new store")
	}

	marked := func(mark string, size int) []byte {
		v := bytes.Repeat([]byte{'.'}, size)
		copy(v, mark)
		return v
	}
	small := marked("small-value-marker-7f3a", ValueThreshold-1)
	put(t, e, kv.TxOptions{}, []byte("small"), small)
	newest := memLogName(mems[0])
	if got := filesWith(t, dir, small[:23]); !reflect.DeepEqual(got, []string{newest}) {
		t.Fatalf("a value of ValueThreshold-1 bytes is in %v, want only the memtable log %s", got, newest)
	}
	big := marked("big-value-marker-9c1e", ValueThreshold)
	put(t, e, kv.TxOptions{}, []byte("big"), big)
	got := filesWith(t, dir, big[:21])
	if len(got) != 1 || !vlogName.MatchString(got[0]) {
		t.Fatalf("a value of ValueThreshold bytes is in %v, want one value log", got)
	}

	// Fill the memtable until the next log appears (values that stay in it).
	last := mems[0]
	val := make([]byte, ValueThreshold-1)
	for i := 0; ; i++ {
		if i > 10_000 {
			t.Fatalf("no memtable rotation after %d commits of %d bytes (logs %v)", i, len(val), memLogs(t, dir))
		}
		put(t, e, kv.TxOptions{}, durabilityKey(i), val)
		ids := memLogs(t, dir)
		if newestID := ids[len(ids)-1]; newestID != last {
			if newestID != last+1 {
				t.Fatalf("the memtable log after %s is %s, want %s", memLogName(last), memLogName(newestID), memLogName(last+1))
			}
			break
		}
	}
	after := marked("after-rotation-marker-51d0", 100)
	put(t, e, kv.TxOptions{}, []byte("after"), after)
	if !fileHas(t, dir, memLogName(last+1), after[:26]) {
		t.Fatalf("the commit after the rotation is not in %s (it is in %v)", memLogName(last+1), filesWith(t, dir, after[:26]))
	}
	if fileHas(t, dir, memLogName(last), after[:26]) {
		t.Fatalf("the commit after the rotation is in the previous log %s", memLogName(last))
	}
}

// With the group commit, an engine under concurrent writers whose memtables
// rotate (8 MiB memtables, about 19 MiB written) keeps every acknowledged
// write, and every sync covers each memtable log that existed when it
// started: in that sync, or in an earlier one that started after the log
// stopped changing (a newer log existed), or the log was gone (flushed to a
// table). Syncing only the newest log (what Badger's DB.Sync does) fails
// here once a rotation happens between a commit and its sync.
func TestSyncedCommitsUnderConcurrentWritesWithRotation(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{MemTableSize: 8 << 20, ValueLogFileSize: 1 << 20})
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
	e.logs.flush = func(f *os.File) error {
		name := filepath.Base(f.Name())
		flushed[name] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if mems, _, _ := logsToSync(entries, 0); len(mems) > 0 && mems[len(mems)-1] > name {
			newerAtFlush[name] = true
		}
		return fdatasync(f)
	}
	e.durable.sync = func() error {
		syncs++
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		before, _, _ := logsToSync(entries, 0)
		flushed = map[string]bool{}
		if err := e.logs.sync(); err != nil {
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
	big := bytes.Repeat([]byte("v"), ValueThreshold-1) // in the memtable logs, filling them
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := e.Update(context.Background(), kv.TxOptions{}, func(tx kv.Writer) error {
					return tx.Put(durabilityKey(w*each+i), big, 0)
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
	t.Logf("%d syncs (%d full) for %d commits; memtable logs synced: %v", syncs, e.logs.fullRuns, writers*each, everSynced)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openAt(t, dir, Options{})
	if err := e.View(context.Background(), func(r kv.Reader) error {
		for i := range writers * each {
			if _, err := r.Get(durabilityKey(i)); err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Value logs are synced when a commit wrote a value big enough to go there
// (and once after opening), not after every commit.
func TestValueLogsAreSyncedOnlyAfterBigValues(t *testing.T) {
	e := openAt(t, t.TempDir(), Options{})
	var vlogFlushed bool
	e.logs.flush = func(f *os.File) error {
		vlogFlushed = vlogFlushed || strings.HasSuffix(f.Name(), ".vlog")
		return fdatasync(f)
	}
	var vlogSyncs []bool // per sync: did it cover value logs?
	e.durable.sync = func() error {
		vlogFlushed = false
		err := e.logs.sync()
		vlogSyncs = append(vlogSyncs, vlogFlushed)
		return err
	}
	put(t, e, kv.TxOptions{}, durabilityKey(0), bytes.Repeat([]byte("v"), 10))
	put(t, e, kv.TxOptions{}, durabilityKey(1), bytes.Repeat([]byte("v"), 10))
	put(t, e, kv.TxOptions{}, durabilityKey(2), bytes.Repeat([]byte("v"), ValueThreshold))
	put(t, e, kv.TxOptions{}, durabilityKey(3), bytes.Repeat([]byte("v"), 10))
	if want := []bool{true, false, true, false}; !reflect.DeepEqual(vlogSyncs, want) {
		t.Fatalf("syncs covering value logs: %v, want %v", vlogSyncs, want)
	}
	// An import may bring big values: its sync covers the value logs.
	recs := []kv.Record{{Key: []byte("imported"), Value: []byte("x")}}
	next := func() (kv.Record, error) {
		if len(recs) == 0 {
			return kv.Record{}, io.EOF
		}
		r := recs[0]
		recs = recs[1:]
		return r, nil
	}
	if err := e.Import(context.Background(), next, kv.ImportMerge); err != nil {
		t.Fatal(err)
	}
	if len(vlogSyncs) != 5 || !vlogSyncs[4] {
		t.Fatalf("Import: syncs covering value logs %v, want a fifth one that does", vlogSyncs)
	}
}

// A sync that runs while a transaction with a big value is still open (it
// has put the value, Badger has not written it yet) must not use up the
// sign that value logs need syncing: the commit's own sync covers them.
func TestBigValueCommitSyncsValueLogsAfterAConcurrentSync(t *testing.T) {
	e := openAt(t, t.TempDir(), Options{})
	if err := e.Sync(); err != nil { // the first sync covers every log
		t.Fatal(err)
	}
	var mu sync.Mutex
	var flushed []string
	e.logs.flush = func(f *os.File) error {
		mu.Lock()
		flushed = append(flushed, filepath.Base(f.Name()))
		mu.Unlock()
		return fdatasync(f)
	}
	var beforeCommit int
	err := e.Update(context.Background(), kv.TxOptions{}, func(w kv.Writer) error {
		if err := w.Put([]byte("big"), bytes.Repeat([]byte("v"), ValueThreshold), 0); err != nil {
			return err
		}
		// Another request's commit syncs now, before ours is committed
		// (a goroutine: Update holds the engine for reading).
		done := make(chan error)
		go func() { done <- e.durable.wait() }()
		if err := <-done; err != nil {
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

// errLog is a badger.Logger keeping its Errorf lines.
type errLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *errLog) Errorf(f string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
}
func (l *errLog) Warningf(string, ...any) {}
func (l *errLog) Infof(string, ...any)    {}
func (l *errLog) Debugf(string, ...any)   {}
func (l *errLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// An Async commit returns without a sync; the next synchronous commit covers
// it, and without one it is synced after the delay. A failed sync is
// logged, not tried again; Close waits for a sync that started.
func TestAsyncCommitsAreSyncedLater(t *testing.T) {
	open := func(t *testing.T, delay time.Duration, log *errLog) (*Engine, *atomic.Int32) {
		t.Helper()
		o := Options{}
		if log != nil {
			o.Logger = log
		}
		e := openAt(t, t.TempDir(), o)
		e.async.delay = delay
		var syncs atomic.Int32
		sync := e.durable.sync
		e.durable.sync = func() error {
			err := sync()
			if err == nil {
				syncs.Add(1)
			}
			return err
		}
		return e, &syncs
	}
	async := kv.TxOptions{Async: true}
	v := []byte("v")

	t.Run("covered by the next synchronous commit", func(t *testing.T) {
		e, syncs := open(t, time.Hour, nil)
		put(t, e, async, durabilityKey(0), v)
		put(t, e, async, durabilityKey(1), v)
		if n := syncs.Load(); n != 0 {
			t.Fatalf("asynchronous commits waited for %d syncs", n)
		}
		put(t, e, kv.TxOptions{}, durabilityKey(2), v)
		if n := syncs.Load(); n != 1 {
			t.Fatalf("synchronous commit: %d syncs, want 1", n)
		}
	})

	t.Run("synced after the delay, each time", func(t *testing.T) {
		e, syncs := open(t, time.Millisecond, nil)
		put(t, e, async, durabilityKey(0), v)
		kvtest.Eventually(t, "a sync", func() bool { return syncs.Load() >= 1 })
		put(t, e, async, durabilityKey(1), v)
		kvtest.Eventually(t, "a second sync", func() bool { return syncs.Load() >= 2 })
	})

	t.Run("a failed sync is logged, and the next commit schedules again", func(t *testing.T) {
		log := &errLog{}
		e, syncs := open(t, time.Millisecond, log)
		var calls atomic.Int32
		sync := e.durable.sync
		e.durable.sync = func() error {
			if calls.Add(1) == 1 {
				return errors.New("disk said no")
			}
			return sync()
		}
		put(t, e, async, durabilityKey(0), v)
		kvtest.Eventually(t, "the failed sync logged", func() bool { return log.len() == 1 })
		if l := log.lines[0]; !strings.Contains(l, "may not survive a power loss") || !strings.Contains(l, "disk said no") {
			t.Fatalf("logged %q", l)
		}
		put(t, e, async, durabilityKey(1), v)
		kvtest.Eventually(t, "a sync", func() bool { return syncs.Load() >= 1 })
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d syncs tried, want 2 (no retry of the failed one)", n)
		}
	})

	t.Run("a failed sync fails the synchronous commit it covers", func(t *testing.T) {
		e, _ := open(t, time.Hour, nil)
		e.durable.sync = func() error { return errors.New("disk on fire") }
		err := e.Update(context.Background(), kv.TxOptions{}, func(w kv.Writer) error { return w.Put([]byte("k"), v, 0) })
		if err == nil || !strings.Contains(err.Error(), "disk on fire") {
			t.Fatalf("Update with a failing sync: %v", err)
		}
	})

	t.Run("Close waits for a sync that started", func(t *testing.T) {
		e, _ := open(t, time.Millisecond, nil)
		started, release := make(chan struct{}), make(chan struct{})
		var finished atomic.Bool
		sync := e.durable.sync
		e.durable.sync = func() error {
			close(started)
			<-release
			defer finished.Store(true)
			return sync()
		}
		put(t, e, async, durabilityKey(0), v)
		<-started
		closed := make(chan error)
		go func() { closed <- e.Close() }()
		close(release)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if !finished.Load() {
			t.Fatal("Close returned before the running sync finished")
		}
	})
}

// has reports whether a line holding s was logged.
func (l *errLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// A sync that fails after Async commits is not only logged: it is counted
// (FailedSyncs), so that each writer acknowledging work made of Async
// commits (an import's end), reading the count before its first commit and
// after its Sync, learns of it, however many do. A synchronous commit in
// between, whose own sync succeeds, returns nil: its write is on disk (a
// member's save is not failed for another writer's records), and so does a
// Sync whose own sync succeeds. The failure is a real one of the logs'
// sync: the store's directory is moved away while the sync lists it.
func TestFailedSyncAfterAsyncCommitsIsCounted(t *testing.T) {
	parent := t.TempDir()
	dir, away := filepath.Join(parent, "store"), filepath.Join(parent, "away")
	log := &errLog{}
	e := openAt(t, dir, Options{Logger: log})
	e.async.delay = time.Millisecond
	v := []byte("v")
	put(t, e, kv.TxOptions{}, durabilityKey(0), v)
	if n := e.FailedSyncs(); n != 0 {
		t.Fatalf("FailedSyncs before any failure: %d, want 0", n)
	}

	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	put(t, e, kv.TxOptions{Async: true}, durabilityKey(1), v)
	kvtest.Eventually(t, "the failed sync logged", func() bool { return log.has("may not survive a power loss") })
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}

	put(t, e, kv.TxOptions{}, durabilityKey(2), v)
	if err := e.Sync(); err != nil {
		t.Fatalf("Sync after the disk came back: %v, want nil (its own sync succeeded)", err)
	}
	if n := e.FailedSyncs(); n != 1 {
		t.Fatalf("FailedSyncs after a failed sync of Async commits: %d, want 1", n)
	}
	put(t, e, kv.TxOptions{}, durabilityKey(3), v)
	// Every commit is visible: the failure is of the disk, not of the commits.
	for i := range 4 {
		if err := e.View(context.Background(), func(r kv.Reader) error { _, err := r.Get(durabilityKey(i)); return err }); err != nil {
			t.Fatalf("key %d after the failed sync: %v", i, err)
		}
	}
}

// killChildEnv makes the test binary act as the writer process of
// TestAcknowledgedWritesSurviveSIGKILL; killModeEnv is "sync" or "async".
const (
	killChildEnv = "HEARTH_BADGERKV_KILL_CHILD_DIR"
	killModeEnv  = "HEARTH_BADGERKV_KILL_MODE"
)

// killChild runs 16 writers, each putting its own records one by one and
// printing "ack <writer> <n>" once Update returned, as a server answers its
// client, until it is killed. Small memtables make them rotate.
func killChild(dir string) {
	e, err := Open(dir, Options{MemTableSize: 8 << 20, ValueLogFileSize: 1 << 20})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	opts := kv.TxOptions{Async: os.Getenv(killModeEnv) == "async"}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	val := bytes.Repeat([]byte("v"), 2<<10)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Appendf(nil, "test/kill/%02d/%08d", g, i)
				err := e.Update(context.Background(), opts, func(tx kv.Writer) error { return tx.Put(key, val, 0) })
				mu.Lock()
				if err != nil {
					fmt.Fprintln(w, "error", err)
					w.Flush()
					os.Exit(1)
				}
				fmt.Fprintf(w, "ack %d %d\n", g, i)
				w.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// Every write the child acknowledged (Update returned) is there after a
// kill -9 in the middle of 16 concurrent writers, with memtables rotating:
// synchronous and Async commits. (A killed process loses nothing Badger
// wrote to its memory-mapped logs, synced or not; the syncing itself, for
// power loss, is what TestSyncedCommitsUnderConcurrentWritesWithRotation
// checks.)
func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) { testSurvivesSIGKILL(t, mode) })
	}
}

func testSurvivesSIGKILL(t *testing.T, mode string) {
	dir := t.TempDir()
	child := testchild.Start(t, "TestAcknowledgedWritesSurviveSIGKILL", killChildEnv+"="+dir, killModeEnv+"="+mode)
	const killAt = 6000    // about 12 MiB: at least one rotation of 8 MiB memtables
	acked := map[int]int{} // writer → highest acknowledged n
	total := 0
	for child.Lines.Scan() {
		var g, n int
		if _, err := fmt.Sscanf(child.Lines.Text(), "ack %d %d", &g, &n); err != nil {
			child.Process.Kill()
			t.Fatalf("child: %s", child.Lines.Text())
		}
		if prev, ok := acked[g]; ok && n != prev+1 {
			child.Process.Kill()
			t.Fatalf("writer %d acknowledged %d after %d", g, n, prev)
		}
		acked[g] = n
		if total++; total == killAt {
			// Kill it mid-stream: its writers are committing now.
			child.Kill(t)
		}
	}
	child.WaitKilled(t)
	if total < killAt {
		t.Fatalf("child acknowledged only %d writes", total)
	}
	memsAtKill := memLogs(t, dir)

	e := openAt(t, dir, Options{})
	if err := e.View(context.Background(), func(r kv.Reader) error {
		for g, last := range acked {
			for i := 0; i <= last; i++ {
				if _, err := r.Get(fmt.Appendf(nil, "test/kill/%02d/%08d", g, i)); err != nil {
					return fmt.Errorf("acknowledged write %d of writer %d (of %d) lost: %w", i, g, last+1, err)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("all %d acknowledged writes of %d writers present after SIGKILL (memtable logs left: %v)", total, len(acked), memsAtKill)
}
