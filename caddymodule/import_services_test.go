package caddymodule

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each service's export, imported with caddy hearth import: detected from
// the file, its items counted as the import page counts them, and a second
// import of the same file adds nothing, highlights included (the files
// hold 12, Pocket's zip 4 of them: the API shows as many after the second
// round as after the first).
func TestCLIImportsEachServiceExport(t *testing.T) {
	addr := startWithAlice(t, hearthCaddyfile(t.TempDir(), graphqlSites()))
	pocket := filepath.Join(t.TempDir(), "pocket.zip")
	writeZipOf(t, pocket, filepath.Join("..", "handlers", "importer", "testdata", "pocket"))
	token := createAPIToken(t, "alice")
	highlights := func() int {
		return len(allEntries(t, token, map[string]any{"first": 100, "q": "type:highlight"}, nil))
	}
	var first int
	for round := range 2 {
		for _, c := range []struct {
			file                      string
			created, existing, failed int
		}{
			// Readwise's highlights after its Reader export: the article is
			// there already, and gets the highlights.
			{"raindrop.csv", 4, 0, 1}, {"readwise_reader.csv", 3, 0, 1}, {"readwise.csv", 0, 1, 1}, {"matter.csv", 2, 0, 0},
			{"goodlinks.json", 3, 0, 1}, {"karakeep.json", 2, 0, 1}, {"linkwarden.json", 2, 0, 1},
			{pocket, 4, 1, 1}, // one of its rows Raindrop's file had
		} {
			file := c.file
			if !filepath.IsAbs(file) {
				file = filepath.Join("..", "handlers", "importer", "testdata", c.file)
			}
			// --no-fetch-wait: the items' sites are not reachable from the
			// tests; the entries are written when the command returns.
			out, err := runHearth(t, "", "import", "--member", "alice", "--no-fetch-wait", file, addr)
			want := fmt.Sprintf("%d new, %d already saved, %d not imported", c.created, c.existing, c.failed)
			if round == 1 {
				want = fmt.Sprintf("0 new, %d already saved", c.created+c.existing)
			}
			if err != nil || !strings.Contains(out, want) {
				t.Fatalf("%s, round %d: %q, %v", c.file, round+1, out, err)
			}
		}
		if round == 0 {
			if first = highlights(); first != 12 {
				t.Fatalf("%d highlights after the imports, want the files' 12", first)
			}
		} else if n := highlights(); n != first {
			t.Fatalf("%d highlights after importing the same files again, %d before", n, first)
		}
	}
}

// A Raindrop bookmark's note is the item's note: its reader page lists it
// as a note, without a quote, before the highlights with their notes, and
// the export's Markdown writes it as a note without a quote (not as a
// highlight of the title).
func TestRaindropNoteIsTheItemsNote(t *testing.T) {
	addr := startWithAlice(t, hearthCaddyfile(t.TempDir(), graphqlSites()))
	out, err := runHearth(t, "", "import", "--member", "alice", "--no-fetch-wait", filepath.Join("..", "handlers", "importer", "testdata", "raindrop.csv"), addr)
	if err != nil || !strings.Contains(out, "4 new") {
		t.Fatalf("import: %q, %v", out, err)
	}
	token := createAPIToken(t, "alice")
	const title = "Le pain au levain, pas à pas"
	var id string
	for _, e := range allEntries(t, token, map[string]any{"first": 10}, nil) {
		if e.Title == title {
			id = e.ID
		}
	}
	br := newBrowser(t, testSite)
	br.signIn("alice", "a good password")
	p := br.get("/library/item/" + id)
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, ">Relire avant dimanche</textarea>") ||
		strings.Contains(p.body, "<blockquote>"+title+"</blockquote>") ||
		!strings.Contains(p.body, "<blockquote>Le levain double de volume en quatre heures.</blockquote>") {
		t.Fatalf("reader page: HTTP %d:\n%s", p.StatusCode, p.body)
	}
	status, export := getWithToken(t, token, "/api/export")
	zr, err := zip.NewReader(bytes.NewReader(export), int64(len(export)))
	if status != http.StatusOK || err != nil {
		t.Fatalf("export: HTTP %d, %v", status, err)
	}
	want := "## Highlights\n\nNote: Relire avant dimanche\n\n> Le levain double de volume en quatre heures.\n\nNote: à vérifier\n\n"
	found := false
	for _, f := range zr.File {
		if !strings.HasPrefix(f.Name, "markdown/") {
			continue
		}
		rc, _ := f.Open()
		md, _ := io.ReadAll(rc)
		rc.Close()
		if strings.Contains(string(md), "# "+title+"\n") {
			found = true
			if !strings.Contains(string(md), want) {
				t.Errorf("%s, no %q:\n%s", f.Name, want, md)
			}
		}
	}
	if !found {
		t.Fatal("the export has no Markdown file of the item")
	}
}

// writeZipOf writes a zip of the files under dir to name.
func writeZipOf(t *testing.T, name, dir string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	if err := zw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
