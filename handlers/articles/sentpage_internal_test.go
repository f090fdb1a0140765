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
