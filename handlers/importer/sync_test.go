package importer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
	"go.uber.org/zap/zaptest"
)

// An import whose batches the store could not bring to disk fails, with an
// error that says so, instead of ending as done: its batches are committed
// without waiting for the disk, so the job's end is the first write to hear
// of the failed sync. The failure is a real one of the Badger store's sync:
// its directory is moved away while the sync after the batch lists it, and
// back before the job's end.
func TestImportFailsWhenItsBatchesCouldNotBeSynced(t *testing.T) {
	s, dir, away, syncFailed := openReportingSyncFailures(t)
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	keep := func(s string) string { return s }
	var moveErr error
	batches := 0
	r := NewRunner(s, RunnerOptions{Logger: zaptest.NewLogger(t), Dir: t.TempDir(), Sanitize: keep, HTMLText: keep, FetchQueued: func() {
		// After the batch, before the job's end (the runner's goroutine).
		batches++
		if batches > 1 {
			return
		}
		if moveErr = os.Rename(dir, away); moveErr != nil {
			return
		}
		select {
		case <-syncFailed:
		case <-time.After(time.Minute):
			moveErr = fmt.Errorf("no sync failed within a minute after the batch")
		}
		if err := os.Rename(away, dir); err != nil && moveErr == nil {
			moveErr = err
		}
	}})
	t.Cleanup(r.Close)
	const n = 40
	job := startLinksImport(t, r, m.ID, n)
	r.Run()
	var j *library.ImportJob
	storagetest.Eventually(t, "the job ends", func() bool {
		j, err = library.Of(s).ImportJob(t.Context(), m.ID, job.ID)
		return err == nil && j.Finished()
	})
	if moveErr != nil {
		t.Fatal(moveErr)
	}
	if j.State != library.ImportFailed || j.Error != notSynced {
		t.Fatalf("job after a failed sync of its batches: %s %q, want %s %q", j.State, j.Error, library.ImportFailed, notSynced)
	}
	if j.Created != n {
		t.Errorf("created %d, want %d (visible, only not known to be on disk)", j.Created, n)
	}
}

// Two imports that overlap a failed sync of asynchronous commits both fail
// with the error that says so, not only the first to end: each compares the
// store's count of failed syncs after its end's sync with the count before
// its first batch. They run on two runners of one store (two sites), each
// held after its first batch until the sync has failed; the failure is a
// real one, of the background sync after an asynchronous commit made while
// the store's directory is moved away.
func TestOverlappingImportsEachFailAfterAFailedSync(t *testing.T) {
	s, dir, away, syncFailed := openReportingSyncFailures(t)
	keep := func(s string) string { return s }
	staging := t.TempDir()
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	runner := func() *Runner {
		batches := 0 // the runner's goroutine only
		r := NewRunner(s, RunnerOptions{Logger: zaptest.NewLogger(t), Dir: staging, Sanitize: keep, HTMLText: keep, FetchQueued: func() {
			batches++
			if batches == 1 {
				started <- struct{}{}
				<-release
			}
		}})
		t.Cleanup(r.Close)
		return r
	}
	r1, r2 := runner(), runner()
	const n = 40
	var jobs []*library.ImportJob
	for i, r := range []*Runner{r1, r2} {
		m, err := members.Of(s).CreateMember(t.Context(), fmt.Sprintf("member%d", i), "", "correct horse battery")
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, startLinksImport(t, r, m.ID, n))
	}
	r1.Run()
	r2.Run()
	for range 2 {
		select {
		case <-started:
		case <-time.After(time.Minute):
			close(release)
			t.Fatal("the two imports did not both write a batch within a minute")
		}
	}
	if err := os.Rename(dir, away); err != nil {
		close(release)
		t.Fatal(err)
	}
	err := s.UpdateAsync(t.Context(), func(tx *storage.Tx) error { return tx.Put([]byte("test/overlap"), []byte("v"), 0) })
	if err == nil {
		select {
		case <-syncFailed:
		case <-time.After(time.Minute):
			err = fmt.Errorf("no sync failed within a minute after an asynchronous commit")
		}
	}
	if rerr := os.Rename(away, dir); rerr != nil && err == nil {
		err = rerr
	}
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range jobs {
		var j *library.ImportJob
		storagetest.Eventually(t, "the job ends", func() bool {
			j, err = library.Of(s).ImportJob(t.Context(), job.MemberID, job.ID)
			return err == nil && j.Finished()
		})
		if j.State != library.ImportFailed || j.Error != notSynced {
			t.Errorf("job %s after a failed sync during it: %s %q, want %s %q", job.ID, j.State, j.Error, library.ImportFailed, notSynced)
		}
		if j.Created != n {
			t.Errorf("job %s created %d, want %d (visible, only not known to be on disk)", job.ID, j.Created, n)
		}
	}
}

// openReportingSyncFailures opens a Badger store in dir whose failed syncs
// are sent on syncFailed; a test moves dir to away (and back) to make its
// sync fail for real.
func openReportingSyncFailures(t *testing.T) (s *storage.Store, dir, away string, syncFailed chan error) {
	t.Helper()
	parent := t.TempDir()
	dir, away = filepath.Join(parent, "store"), filepath.Join(parent, "away")
	syncFailed = make(chan error, 16)
	s, err := storage.Open(dir, storage.Options{MinFreeBytes: -1, OnSync: func(_ time.Duration, err error) {
		if err != nil {
			syncFailed <- err
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir, away, syncFailed
}
