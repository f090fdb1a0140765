package importer

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
	"go.uber.org/zap/zaptest"
)

// runWatchingMemoryLimit runs an import of n links through a runner on a
// Badger store and returns the Go memory limit seen after each of its
// batches, the limit once the import has ended, and the search indexer's
// backlog for the member then.
func runWatchingMemoryLimit(t *testing.T, n int) (during []int64, after int64, backlog int) {
	t.Helper()
	s, err := storage.Open(t.TempDir(), storage.Options{MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	keep := func(s string) string { return s }
	r := NewRunner(s, RunnerOptions{Logger: zaptest.NewLogger(t), Dir: t.TempDir(), Sanitize: keep, HTMLText: keep, FetchQueued: func() {
		during = append(during, debug.SetMemoryLimit(-1)) // the runner's goroutine
	}})
	t.Cleanup(r.Close)
	job := startLinksImport(t, r, m.ID, n)
	r.Run()
	storagetest.Eventually(t, "the job ends", func() bool {
		j, err := library.Of(s).ImportJob(t.Context(), m.ID, job.ID)
		return err == nil && j.Finished()
	})
	// The job's end is written before the runner restores the limit.
	storagetest.Eventually(t, "the runner is done with the job", func() bool {
		importMemory.mu.Lock()
		defer importMemory.mu.Unlock()
		return importMemory.running == 0
	})
	after = debug.SetMemoryLimit(-1)
	backlog, err = library.Of(s).SearchIndexBacklog(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 {
		t.Fatal("the import wrote no batch")
	}
	return during, after, backlog
}

// noEnvironmentLimit makes the test's process one started without
// GOMEMLIMIT, with the Go memory limit limit (Caddy's command sets 90 % of
// the machine's memory then), both restored after the test.
func noEnvironmentLimit(t *testing.T, limit int64) {
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	prev := debug.SetMemoryLimit(limit)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

// In a process started without GOMEMLIMIT, whose limit is far above an
// import's memory (Caddy's command sets 90 % of the machine's), an import
// runs with a lower one, of at least importMemoryFloor, and the process has
// its own again once the import has ended: once the search indexer has
// caught up with the texts it wrote (the job's end is written with up to a
// thousand of them waiting, and the indexer lets them gather for half a
// second), not before.
func TestImportLowersTheMemoryLimitWhileItRunsAndRestoresIt(t *testing.T) {
	const machine = 16 << 30
	noEnvironmentLimit(t, machine)
	during, after, backlog := runWatchingMemoryLimit(t, 450) // 3 batches
	if backlog != 0 {
		t.Errorf("the process's memory limit was restored with %d texts of the import still to index, want once they are", backlog)
	}
	for i, l := range during {
		if l >= machine || l < importMemoryFloor {
			t.Errorf("memory limit after batch %d: %d, want a limit of at least %d below the process's %d", i+1, l, importMemoryFloor, machine)
		}
	}
	if after != machine {
		t.Errorf("memory limit after the import: %d, want the process's %d as before it", after, machine)
	}
}

// A limit the environment (GOMEMLIMIT) or the embedding program set is
// left as it is, during the import and after.
func TestImportKeepsTheEnvironmentsMemoryLimit(t *testing.T) {
	const set = 1 << 30
	t.Setenv("GOMEMLIMIT", "1GiB")
	prev := debug.SetMemoryLimit(set)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	during, after, _ := runWatchingMemoryLimit(t, 40)
	for i, l := range during {
		if l != set {
			t.Errorf("memory limit after batch %d: %d, want the environment's %d", i+1, l, set)
		}
	}
	if after != set {
		t.Errorf("memory limit after the import: %d, want the environment's %d", after, set)
	}
}

// Imports that overlap share the limit: it stays while any runs and the one
// before the first is restored when the last ends; a limit changed by
// someone else meanwhile is theirs, and stays.
func TestOverlappingImportsRestoreTheMemoryLimitWhenTheLastEnds(t *testing.T) {
	noEnvironmentLimit(t, math.MaxInt64) // a Go program's default: none
	beginImportMemory()
	first := debug.SetMemoryLimit(-1)
	beginImportMemory()
	endImportMemory()
	if l := debug.SetMemoryLimit(-1); l == math.MaxInt64 || l < importMemoryFloor {
		t.Fatalf("memory limit while the second import runs: %d, want the imports' (first: %d)", l, first)
	}
	endImportMemory()
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Fatalf("memory limit after both imports: %d, want none (math.MaxInt64)", l)
	}

	beginImportMemory()
	const theirs = 3 << 30
	debug.SetMemoryLimit(theirs)
	adjustImportMemory()
	endImportMemory()
	if l := debug.SetMemoryLimit(-1); l != theirs {
		t.Fatalf("memory limit set by another during an import: %d after it, want theirs (%d)", l, theirs)
	}
}
