package importer

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// Import jobs with several nodes on one PostgreSQL database: two stores on
// one database stand for two Caddy processes, each with its runner.

// pgNodes is this package's PostgreSQL server for two nodes of one site
// (each package its own port, so packages may run at once).
var pgNodes = storagetest.NewPostgres(15440)

func TestMain(m *testing.M) {
	code := m.Run()
	pgNodes.Stop()
	os.Exit(code)
}

// An import job is carried out by one node: not while another node's claim
// lasts, and by exactly one of the others once that claim has expired (its
// node stopped without releasing it).
func TestImportJobRunsOnOneNode(t *testing.T) {
	sa, sb := pgNodes.TwoNodes(t)
	dir := t.TempDir() // an import directory both nodes see
	keep := func(s string) string { return s }
	runner := func(s *storage.Store) *Runner {
		r := NewRunner(s, RunnerOptions{Dir: dir, Sanitize: keep, HTMLText: keep, NoFetch: true, Node: "shared"})
		t.Cleanup(r.Close)
		return r
	}
	ra, rb := runner(sa), runner(sb)
	m, err := members.Of(sa).CreateMember(t.Context(), "alice", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	job := startLinksImport(t, ra, m.ID, n)
	// A node that has stopped holds the claim.
	if ok, err := library.Of(sa).ClaimImportJob(t.Context(), job.ID, "stopped-node", time.Hour); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	ra.Run()
	rb.Run()
	storagetest.Eventually(t, "both runners look for jobs", func() bool { return ra.passes.Load() >= 1 && rb.passes.Load() >= 1 })
	ra.Kick()
	rb.Kick()
	storagetest.Eventually(t, "both runners look for jobs again", func() bool { return ra.passes.Load() >= 2 && rb.passes.Load() >= 2 })
	j, err := library.Of(sb).ImportJob(t.Context(), m.ID, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != library.ImportQueued || j.Position != 0 || ra.ran.Load()+rb.ran.Load() != 0 {
		t.Fatalf("claimed elsewhere, the job ran here: %s at %d (runs %d+%d)", j.State, j.Position, ra.ran.Load(), rb.ran.Load())
	}

	// Its claim runs out (renewed one last time, briefly).
	if ok, err := library.Of(sa).ClaimImportJob(t.Context(), job.ID, "stopped-node", 200*time.Millisecond); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	storagetest.Eventually(t, "the job is done", func() bool {
		ra.Kick() // look again (rather than at the next poll)
		rb.Kick()
		j, err = library.Of(sb).ImportJob(t.Context(), m.ID, job.ID)
		return err == nil && j.State == library.ImportDone
	})
	if runs := ra.ran.Load() + rb.ran.Load(); runs != 1 {
		t.Errorf("the job ran %d times across the nodes, want 1", runs)
	}
	if j.Created != n || j.Position != n || j.Failed != 0 {
		t.Errorf("job: created %d, position %d, failed %d; want %d, %d, 0", j.Created, j.Position, j.Failed, n, n)
	}
}

// startLinksImport starts the import of an Inboxt CSV of n links for member.
func startLinksImport(t *testing.T, r *Runner, member string, n int) *library.ImportJob {
	t.Helper()
	var csv strings.Builder
	csv.WriteString("name,url,description,date,labels\n")
	for i := range n {
		fmt.Fprintf(&csv, "Link %d,https://example.org/%d,,2025-03-01T10:00:00.000Z,\n", i, i)
	}
	staged, err := r.Stage(strings.NewReader(csv.String()))
	if err != nil {
		t.Fatal(err)
	}
	job, err := r.Start(t.Context(), member, staged, "links.csv", InboxtCSV, nil)
	if err != nil {
		t.Fatal(err)
	}
	return job
}
