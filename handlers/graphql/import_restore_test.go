package graphql_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Staged uploads live beside the store (<storage_dir>-imports), not in
// it, so a backup holds an unfinished import's job but not its file. A
// store restored elsewhere must not leave that import queued for ever:
// the runner ends it as failed with the reason, which the member sees in
// importJobs (and on the Import page), and the rest of the backup is
// there.
func TestImportRestoredWithoutItsStagedFileFailsWithAReason(t *testing.T) {
	src := graphql.StoreForTest(t, t.TempDir())
	m, _ := graphql.MemberForTest(t, src, "alice")
	if _, _, err := library.Of(src).SaveItem(t.Context(), m.ID, library.NewItem{URL: "https://example.com/kept", Title: "kept", HTML: "<p>kept</p>", Text: "kept"}); err != nil {
		t.Fatal(err)
	}
	// An upload accepted (staged and checked) but not yet run when the
	// backup was taken, as Runner.Start leaves it.
	staged := filepath.Join(t.TempDir(), "staged-upload")
	csv, err := os.ReadFile("../importer/testdata/inboxt.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staged, csv, 0o600); err != nil {
		t.Fatal(err)
	}
	job, err := library.Of(src).CreateImportJob(t.Context(), &library.ImportJob{MemberID: m.ID, Format: "INBOXT_CSV", FileName: "saved-items.csv", Staged: staged, Total: 3})
	if err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := src.Backup(&backup); err != nil {
		t.Fatal(err)
	}

	// Another machine: the backup restored into an empty store, whose
	// import directory does not hold the file.
	if err := os.Remove(staged); err != nil {
		t.Fatal(err)
	}
	dst := graphql.StoreForTest(t, t.TempDir())
	if err := dst.Restore(&backup); err != nil {
		t.Fatal(err)
	}
	if j, err := library.Of(dst).ImportJob(t.Context(), m.ID, job.ID); err != nil || j.Finished() {
		t.Fatalf("the restored job: %+v, %v (want it unfinished, as backed up)", j, err)
	}
	api := newAPI(dst, options{NoImportFetch: true, ImportDir: filepath.Join(t.TempDir(), "imports")})
	defer api.Close()
	j := waitImport(t, dst, m.ID, job.ID)
	if j.State != library.ImportFailed || !strings.Contains(j.Error, "upload it again") {
		t.Fatalf("the import whose file is gone: %+v", j)
	}
	var urls []string
	err = library.Of(dst).ForEachSavedItem(t.Context(), m.ID, func(it *library.SavedItem, _ *library.ItemContent) error {
		urls = append(urls, it.OriginalURL)
		return nil
	})
	if err != nil || len(urls) != 1 || urls[0] != "https://example.com/kept" {
		t.Fatalf("after the failed import the member has %v (%v), want only the backed-up item", urls, err)
	}
}
