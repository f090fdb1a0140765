package library

import (
	"errors"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// A note changed in place moves the highlight's updatedAt and its item's,
// so an app syncing by updatedAt sees it; the highlight's order by
// updatedAt follows.
func TestSetHighlightNote(t *testing.T) {
	st, m := openSavedTest(t)
	item := saveN(t, st, m.ID, 1)[0]
	h, err := Of(st).CreateHighlight(t.Context(), m.ID, item.ID, []HighlightSegment{{XPath: "/p[1]::0", EndOffset: 4, Text: "Body"}}, "first")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	got, err := Of(st).SetHighlightNote(t.Context(), m.ID, h.ID, "  second  ")
	if err != nil {
		t.Fatal(err)
	}
	if got.Note != "second" || !got.UpdatedAt.After(h.UpdatedAt) || got.Segments[0].Text != "Body" {
		t.Fatalf("note %q, updated %v after %v", got.Note, got.UpdatedAt, h.UpdatedAt)
	}
	it, _ := Of(st).SavedItem(t.Context(), m.ID, item.ID)
	if it.UpdatedAt.Before(got.UpdatedAt) {
		t.Fatalf("the item's updatedAt %v is before the note's change %v", it.UpdatedAt, got.UpdatedAt)
	}
	page, err := Of(st).HighlightsPage(t.Context(), m.ID, ItemFilter{UpdatedFrom: &got.UpdatedAt}, PageRequest{Field: SortUpdatedAt, First: 10})
	if err != nil || len(page.Highlights) != 1 || page.Highlights[0].Note != "second" {
		t.Fatalf("highlights updated since the change: %v %+v", err, page)
	}
	if _, err := Of(st).SetHighlightNote(t.Context(), m.ID, "nonexistent", "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown highlight: %v", err)
	}
}

func TestReaderPrefs(t *testing.T) {
	st, m := openSavedTest(t)
	if p, err := Of(st).ReaderPrefs(t.Context(), m.ID); err != nil || p != (ReaderPrefs{}) {
		t.Fatalf("before any: %+v %v", p, err)
	}
	want := ReaderPrefs{Size: 2, Width: 1, Height: 3, Font: "serif", Theme: "dark"}
	if err := Of(st).SetReaderPrefs(t.Context(), m.ID, want); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []ReaderPrefs{{Size: 6}, {Width: -1}, {Font: "comic"}, {Theme: "sepia"}} {
		if err := Of(st).SetReaderPrefs(t.Context(), m.ID, bad); !storage.IsInvalid(err) {
			t.Errorf("%+v: %v, want an invalid-input error", bad, err)
		}
	}
	if p, _ := Of(st).ReaderPrefs(t.Context(), m.ID); p != want {
		t.Fatalf("kept %+v, want %+v", p, want)
	}
}

// ItemHTML is ItemContent's HTML, whatever the content holds and in
// whichever order a record's fields come.
func TestItemHTMLIsTheContentsHTML(t *testing.T) {
	st, m := openSavedTest(t)
	html := "<p>Crème brûlée &amp; \"quotes\" \\ <b>bold</b> \u2028 😀</p>"
	it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://x.example/a", Title: "A", HTML: html, Text: "Crème brûlée"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Of(st).ItemHTML(t.Context(), m.ID, it.ID)
	c, err2 := Of(st).ItemContent(t.Context(), m.ID, it.ID)
	if err != nil || err2 != nil || got != c.HTML || got != html {
		t.Fatalf("ItemHTML %q (%v), ItemContent %q (%v)", got, err, c.HTML, err2)
	}
	for rec, want := range map[string]string{
		`{"text":"t","html":"<p>x</p>"}`:             "<p>x</p>",
		`{"html":"\u003cp\u003e \\\" x","text":"t"}`: `<p> \" x`,
		`{"text":"only"}`:                            "",
	} {
		if got, err := htmlField([]byte(rec)); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", rec, got, err, want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"html":1}`, `{"html":"x`, `{"html":"\u00"}`} {
		if _, err := htmlField([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := Of(st).ItemHTML(t.Context(), m.ID, "nonexistent"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown item: %v", err)
	}
}
