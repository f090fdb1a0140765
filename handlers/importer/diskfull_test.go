//go:build linux

package importer

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// An import that meets a full disk waits where it stopped, says once that
// the store refuses writes (not that another node took it, nor a warning
// at each look for unfinished jobs, every few seconds for as long as the
// disk stays full), and goes on by itself to its last entry once space is
// freed.
func TestImportWaitsOutAFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fills a disk and waits for space")
	}
	const reserve, n = 16 << 20, 3 * batchEntries
	disk := storagetest.NewSmallDisk(t, 64<<20)
	s := disk.Store(reserve, nil)
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	keep := func(s string) string { return s }
	var freeSpace func()
	filled := make(chan struct{})
	r := NewRunner(s, RunnerOptions{Logger: zap.New(core), Dir: t.TempDir(), Sanitize: keep, HTMLText: keep, FetchQueued: func() {
		if freeSpace == nil { // after the first batch
			freeSpace = disk.Fill(reserve / 2)
			close(filled)
		}
	}})
	t.Cleanup(r.Close)
	job := startLinksImport(t, r, m.ID, n)
	r.Run()
	<-filled
	// Two looks for unfinished jobs while the disk is full.
	time.Sleep(2*pollEvery + time.Second)
	j, err := library.Of(s).ImportJob(t.Context(), m.ID, job.ID)
	if err != nil || j.Finished() || j.Created != batchEntries {
		t.Fatalf("the job on a full disk: %+v, %v; want it running, %d created", j, err, batchEntries)
	}
	if n := logs.FilterMessageSnippet("another node").Len(); n != 0 {
		t.Fatalf("the log blames another node on a single one: %v", logs.All())
	}
	if n := logs.FilterLevelExact(zap.ErrorLevel).Len() + logs.FilterLevelExact(zap.WarnLevel).Len(); n != 1 {
		t.Fatalf("%d warnings and errors while the disk was full, want 1: %v", n, logs.All())
	}

	freeSpace()
	r.Kick()
	storagetest.Eventually(t, "the job ends", func() bool {
		j, err = library.Of(s).ImportJob(t.Context(), m.ID, job.ID)
		return err == nil && j.Finished()
	})
	if j.State != library.ImportDone || j.Created != n {
		t.Fatalf("the job after space was freed: %s, %d created, want done with %d", j.State, j.Created, n)
	}
}
