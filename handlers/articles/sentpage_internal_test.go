package articles

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Pages clients send are read a few at a time in the process
// (sentPageReads), where every request read its page at once (readability
// takes about a second of CPU on a page of the fetcher's largest size): a
// request that finds every turn taken waits for one, and only as long as
// its client does, reading and saving nothing once it has left.
func TestSentPagesAreReadInTurns(t *testing.T) {
	store := openStore(t)
	m := newAlice(t, store)
	s := Prepare(store, testOptions())
	defer s.Close()
	page := []byte("<html><head><title>Bread</title></head><body><article><p>Flour, water and salt.</p></article></body></html>")
	save := func(ctx context.Context, url string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.SaveHTML(ctx, m.ID, url, "", page, "text/html", Placement{})
			done <- err
		}()
		return done
	}

	for range cap(sentPageReads) {
		sentPageReads <- struct{}{}
	}
	waiting := save(t.Context(), "https://example.com/waiting")
	ctx, cancel := context.WithCancel(t.Context())
	left := save(ctx, "https://example.com/left")
	// Neither may finish while every turn is taken; a save that did not
	// wait would have finished long before this.
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-waiting:
		t.Fatalf("a sent page read while every turn was taken (%v)", err)
	default:
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("a save waiting for its turn when its client left: %v, want the client's context ended", err)
	}
	<-sentPageReads
	if err := <-waiting; err != nil {
		t.Fatalf("the waiting save once a turn was free: %v", err)
	}
	for range cap(sentPageReads) - 1 {
		<-sentPageReads
	}
	items, err := library.Of(store).SavedItemsPage(t.Context(), m.ID, library.ItemFilter{Status: library.StatusAll}, library.PageRequest{Field: library.SortCreatedAt, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(items.Items) != 1 || items.Items[0].OriginalURL != "https://example.com/waiting" {
		t.Fatalf("items saved: %+v, want the waiting page's only", items.Items)
	}
}

// A quote a client sends alone (Omnivore's createHighlight) is placed in
// its item's stored content in a turn of the same reads: the content's
// parse costs as a sent page's does. A client gone before its turn has its
// highlight kept unplaced, the content never read.
func TestQuotesArePlacedInTurnsOfThePageReads(t *testing.T) {
	store := openStore(t)
	m := newAlice(t, store)
	s := Prepare(store, testOptions())
	defer s.Close()
	lib := library.Of(store)
	it, _, err := lib.SaveItem(t.Context(), m.ID, library.NewItem{URL: "https://example.com/bread", Title: "Bread", HTML: "<p>Flour, water and salt.</p>", Text: "Flour, water and salt."})
	if err != nil {
		t.Fatal(err)
	}
	h, err := lib.CreateHighlight(t.Context(), m.ID, it.ID, []library.HighlightSegment{{XPath: "/", Text: "water and salt"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	for range cap(sentPageReads) {
		sentPageReads <- struct{}{}
	}
	ctx, cancel := context.WithCancel(t.Context())
	left := make(chan error, 1)
	go func() {
		_, err := s.PlaceQuote(ctx, m.ID, h)
		left <- err
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-left:
		t.Fatalf("a quote placed while every turn was taken (%v)", err)
	default:
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("a quote waiting for its turn when its client left: %v, want the client's context ended", err)
	}
	for range cap(sentPageReads) {
		<-sentPageReads
	}
	if got, err := lib.Highlight(t.Context(), m.ID, h.ID); err != nil || !library.Unplaced(got.Segments) {
		t.Fatalf("the highlight of a client gone: %+v (%v), want it kept unplaced", got, err)
	}
	got, err := s.PlaceQuote(t.Context(), m.ID, h)
	if err != nil || library.Unplaced(got.Segments) || got.Segments[0].Text != "water and salt" {
		t.Fatalf("placed in a free turn: %+v (%v)", got, err)
	}
}
