//go:build linux

package articles

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// When the disk fills while pages are being fetched, the queue stops at the
// first fetch the store refuses to save, logs that once, and fetches
// nothing more until the store's wait is over: before, every pending page
// (an import's thousands) was fetched from its site, its text dropped and
// an error logged, one after the other, while the disk was full. Nothing is
// lost: the pages stay pending and are fetched and saved after the pause,
// with space freed.
func TestFetchQueuePausesWhileTheDiskIsFull(t *testing.T) {
	const reserve, pages = 16 << 20, 12
	disk := storagetest.NewSmallDisk(t, 64<<20)
	store := disk.Store(reserve, nil)
	var hits atomic.Int64
	site, release := gatedSite(t, func(w http.ResponseWriter, r *http.Request, held func() bool) {
		hits.Add(1)
		if !held() {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>Page %s</title></head><body><p>Some text of the article at %s.</p></body></html>", r.URL.Path, r.URL.Path)
	})
	m := newAlice(t, store)
	s, logs := prepareLogged(t, store)
	ids := make([]string, pages)
	for i := range ids {
		ids[i] = mustQueue(t, s, m.ID, fmt.Sprintf("%s/page%d", site.URL, i))
	}
	for hits.Load() < fetchWorkers { // each worker waits on a page
		time.Sleep(5 * time.Millisecond)
	}
	freeSpace := disk.Fill(reserve / 2)
	release()
	for logs.FilterMessageSnippet("article fetches paused").Len() == 0 && hits.Load() < pages {
		time.Sleep(5 * time.Millisecond)
	}
	// What the workers held is done; the others would follow at once.
	time.Sleep(300 * time.Millisecond)
	if n := hits.Load(); n > fetchWorkers {
		t.Fatalf("%d fetches of the %d pages while the store refused to save them, want at most the %d being fetched when the disk filled", n, pages, fetchWorkers)
	}
	if n := logs.FilterMessageSnippet("article fetches paused").Len(); n != 1 {
		t.Fatalf("%d lines saying the fetches paused, want 1: %v", n, logs.All())
	}
	if n := logs.FilterLevelExact(zap.ErrorLevel).Len(); n != 0 {
		t.Fatalf("%d error lines while the disk was full: %v", n, logs.All())
	}
	for _, id := range ids {
		if ok, err := library.Of(store).HasPendingFetch(t.Context(), m.ID, id); err != nil || !ok {
			t.Fatalf("item %s no longer pending (%v) while the disk was full", id, err)
		}
	}

	freeSpace()
	s.fetches.pausedUntil.Store(0) // the pause is over (a minute on a full disk)
	s.KickFetches()
	storagetest.Eventually(t, "every page fetched and saved", func() bool {
		pending, err := library.Of(store).PendingFetchesWhere(t.Context(), pages+1, func(library.PendingFetch) bool { return true })
		return err == nil && len(pending) == 0
	})
	for _, id := range ids {
		it, err := library.Of(store).SavedItem(t.Context(), m.ID, id)
		if err != nil || it.Title == "" || it.Title[:5] != "Page " {
			t.Fatalf("item %s after the pause: %+v, %v", id, it, err)
		}
	}
}

// An article's images met by a full disk: the first image the store
// refuses to keep pauses the queue, logged once, and the article's other
// images are not fetched meanwhile (before, each was fetched and dropped
// with an error line, and all of them again at every kick); once the pause
// is over and space is freed, every image is stored.
func TestImageFetchesPauseWhileTheDiskIsFull(t *testing.T) {
	const reserve, images = 16 << 20, 6
	disk := storagetest.NewSmallDisk(t, 64<<20)
	store := disk.Store(reserve, nil)
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{200, 10, 10, 255})
	var pngBytes bytes.Buffer
	if err := png.Encode(&pngBytes, img); err != nil {
		t.Fatal(err)
	}
	var imageHits atomic.Int64
	site, release := gatedSite(t, func(w http.ResponseWriter, r *http.Request, held func() bool) {
		if r.URL.Path == "/article" {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><head><title>Pictures</title></head><body><article><p>Some text about pictures, long enough to be read.</p>")
			for i := range images {
				fmt.Fprintf(w, `<p><img src="/img%d.png" alt="picture %d"></p>`, i, i)
			}
			fmt.Fprint(w, "</article></body></html>")
			return
		}
		imageHits.Add(1)
		if !held() {
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes.Bytes())
	})
	m := newAlice(t, store)
	s, logs := prepareLogged(t, store)
	id := mustQueue(t, s, m.ID, site.URL+"/article")
	for imageHits.Load() == 0 { // the page is saved, its first image asked for
		time.Sleep(5 * time.Millisecond)
	}
	freeSpace := disk.Fill(reserve / 2)
	release()
	for logs.FilterMessageSnippet("article fetches paused").Len() == 0 && imageHits.Load() < images {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the other images would follow at once
	if n := imageHits.Load(); n != 1 {
		t.Fatalf("%d fetches of the %d images while the store refused to keep them, want the 1 being fetched when the disk filled", n, images)
	}
	if n := logs.FilterLevelExact(zap.ErrorLevel).Len(); n != 0 {
		t.Fatalf("%d error lines while the disk was full: %v", n, logs.All())
	}
	if ok, err := library.Of(store).HasPendingFetch(t.Context(), m.ID, id); err != nil || !ok {
		t.Fatalf("the images are no longer pending (%v) while the disk was full", err)
	}

	freeSpace()
	s.fetches.pausedUntil.Store(0) // the pause is over (a minute on a full disk)
	s.KickFetches()
	storagetest.Eventually(t, "every image stored", func() bool {
		ok, err := library.Of(store).HasPendingFetch(t.Context(), m.ID, id)
		return err == nil && !ok
	})
	stored, err := library.Of(store).ItemImages(t.Context(), m.ID, id)
	if err != nil || len(stored) != images {
		t.Fatalf("%d images stored after the pause (%v), want %d", len(stored), err, images)
	}
}

// prepareLogged prepares the service with its log lines kept for the test.
func prepareLogged(t *testing.T, store *storage.Store) (*Service, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	opts := testOptions()
	opts.Logger = zap.New(core)
	s := Prepare(store, opts)
	t.Cleanup(func() { s.Close() })
	return s, logs
}
