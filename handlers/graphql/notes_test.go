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

// A note on an item as a whole, in Inboxt's highlight fields (what Inboxt's
// web app asks: its HighlightFragment, apps/web/src/lib/graphql/index.ts at
// Inboxt/inboxt@45f4314, which has no note): one segment without a path
// whose text is the note, in the Highlights view (entries, type:highlight)
// and the item's highlights alike, so the app lists it with its text and
// its reader draws it nowhere; Omnivore's fields keep it a NOTE without a
// quote, and a highlight keeps its own segments.
func TestItemNoteInInboxtsHighlightFields(t *testing.T) {
	e := newEnv(t, options{})
	lib := library.Of(e.store)
	bread := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title, in.Text, in.HTML = "Baking Bread", "Knead the dough.", "<p>Knead the dough.</p>"
	})
	note, err := lib.AddNote(t.Context(), e.member.ID, bread.ID, "Bake it on Sunday.")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateHighlight(t.Context(), e.member.ID, bread.ID, []library.HighlightSegment{{XPath: "/p[1]", EndOffset: 5, Text: "Knead"}}, ""); err != nil {
		t.Fatal(err)
	}
	const fragment = `fragment HighlightFragment on Highlight { id createdAt savedItem { id title createdAt }
		segments { id xpath beforeText startOffset endOffset afterText text } type quote annotation }`
	type segment struct {
		ID, Xpath, BeforeText, AfterText string
		StartOffset, EndOffset           float64
		Text                             *string
	}
	type highlight struct {
		ID, Type          string
		Quote, Annotation *string
		SavedItem         struct{ ID, Title string }
		Segments          []segment
	}
	check := func(where string, hs []highlight) {
		t.Helper()
		if len(hs) != 2 {
			t.Fatalf("%s: %d highlights: %+v", where, len(hs), hs)
		}
		for _, h := range hs {
			if h.SavedItem.ID != bread.ID || h.SavedItem.Title != "Baking Bread" || len(h.Segments) != 1 || h.Segments[0].Text == nil {
				t.Fatalf("%s: %+v", where, h)
			}
			sg := h.Segments[0]
			if h.ID == note.ID {
				if *sg.Text != "Bake it on Sunday." || sg.Xpath != "" || sg.BeforeText != "" || sg.AfterText != "" || sg.StartOffset != 0 || sg.EndOffset != 0 ||
					sg.ID == "" || h.Type != "NOTE" || h.Quote != nil || h.Annotation == nil || *h.Annotation != "Bake it on Sunday." {
					t.Errorf("%s: the note: %+v, segment %+v", where, h, sg)
				}
			} else if *sg.Text != "Knead" || sg.Xpath != "/p[1]" || h.Type != "HIGHLIGHT" || h.Quote == nil || *h.Quote != "Knead" {
				t.Errorf("%s: the highlight: %+v, segment %+v", where, h, sg)
			}
		}
	}
	var list struct {
		Entries struct{ Edges []struct{ Node highlight } }
	}
	e.do(`query entries($query: GetEntriesInput!) { entries(query: $query) { edges { node { __typename ... on Highlight { ...HighlightFragment } } } } } `+fragment,
		map[string]any{"query": map[string]any{"first": 10, "q": "type:highlight"}}, &list)
	var hs []highlight
	for _, ed := range list.Entries.Edges {
		hs = append(hs, ed.Node)
	}
	check("the Highlights view", hs)
	var one struct {
		SavedItem struct{ Highlights []highlight }
	}
	e.do(`query savedItem($query: GetSavedItemInput!) { savedItem(query: $query) { id highlights { ...HighlightFragment } } } `+fragment,
		map[string]any{"query": map[string]any{"id": bread.ID}}, &one)
	check("the item's highlights", one.SavedItem.Highlights)
}
