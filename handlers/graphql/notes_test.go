package graphql_test

import (
	"archive/zip"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// A note on an item as a whole (what Omnivore's browser extension's "Add
// note" writes) goes through Hearth's export and back: the Markdown file
// shows it as a note without a quote, and importing the export into
// another member gives the item the same note (and a second import no
// second one).
func TestNotesSurviveHearthExportAndImport(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	lib := library.Of(e.store)
	bread := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title, in.Text, in.HTML = "Baking Bread", "Knead the dough.", "<p>Knead the dough.</p>"
	})
	if _, err := lib.AddNote(t.Context(), e.member.ID, bread.ID, "Bake it on Sunday."); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateHighlight(t.Context(), e.member.ID, bread.ID, []library.HighlightSegment{{XPath: "/p[1]", EndOffset: 5, Text: "Knead"}}, ""); err != nil {
		t.Fatal(err)
	}

	srv, browser := site(t, e)
	resp, err := browser.Get(srv.URL + export.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	file, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	zr, err := zip.NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "markdown/") {
			rc, _ := f.Open()
			md, _ := io.ReadAll(rc)
			rc.Close()
			if !strings.Contains(string(md), "## Highlights\n\n") || !strings.Contains(string(md), "Note: Bake it on Sunday.\n") ||
				!strings.Contains(string(md), "> Knead\n") || strings.Contains(string(md), ">  \n") || strings.Contains(string(md), "> \n") {
				t.Errorf("%s:\n%s", f.Name, md)
			}
		}
	}

	bob, bobToken := e.newMember("bob")
	for round := range 2 {
		status, out := upload(t, e.srv.URL, bobToken, "hearth-export-alice.zip", file, "")
		if status != http.StatusCreated {
			t.Fatalf("upload %d: HTTP %d %v", round, status, out)
		}
		if job := waitImport(t, e.store, bob.ID, out["jobId"].(string)); job.State != library.ImportDone || job.Failed != 0 {
			t.Fatalf("job %d: %+v", round, job)
		}
	}
	want, got := snapshot(t, e.store, e.member.ID), snapshot(t, e.store, bob.ID)
	if len(got) != 1 {
		t.Fatalf("bob has %d items", len(got))
	}
	for k, w := range want {
		if g := got[k]; !equalJSON(g, w) || len(g.Highlights) != 2 {
			t.Errorf("item %s:\n got %+v\nwant %+v", k, g, w)
		}
	}
	var notes int
	_ = lib.ForEachHighlight(t.Context(), bob.ID, func(h *library.Highlight) error {
		if h.IsNote() && h.Note == "Bake it on Sunday." {
			notes++
		}
		return nil
	})
	if notes != 1 {
		t.Fatalf("bob's notes: %d", notes)
	}
}
