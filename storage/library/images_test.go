package library

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

// An item saved with content naming images gets an images entry; its
// images are stored within the quota, read back, kept by a backup, and
// removed with the item, giving their bytes back.
func TestItemImagesLiveAndDieWithTheirItem(t *testing.T) {
	st, m := openSavedTest(t)
	lib := Of(st)
	ctx := t.Context()
	html := `<p>Hi <img src="https://img.example/a.png" alt="a"> <img src="/b.jpg"></p>`
	it, _, err := lib.SaveItem(ctx, m.ID, NewItem{URL: "https://example.com/post", HTML: html, Text: "Hi", FetchImages: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := lib.SaveItem(ctx, m.ID, NewItem{URL: "https://example.com/plain", HTML: "<p>no image</p>", FetchImages: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := lib.PendingFetches(ctx, 10, false, true)
	if err != nil || len(p) != 1 || p[0].ItemID != it.ID || !p[0].Images || p[0].URL != "https://example.com/post" || p[0].Import {
		t.Fatalf("pending = %+v, %v (want one images entry, none for %s)", p, err, plain.ID)
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 92)...)
	n, err := lib.StoreItemImage(ctx, m.ID, it.ID, "https://img.example/a.png", png, 150)
	if err != nil || n != 0 {
		t.Fatalf("store: %d, %v", n, err)
	}
	// The same address again is the same image; past the quota, nothing.
	if n, err := lib.StoreItemImage(ctx, m.ID, it.ID, "https://img.example/a.png", png, 150); err != nil || n != 0 {
		t.Fatalf("again: %d, %v", n, err)
	}
	if _, err := lib.StoreItemImage(ctx, m.ID, it.ID, "https://example.com/b.jpg", png, 150); !errors.Is(err, ErrImageQuota) {
		t.Fatalf("over quota: %v", err)
	}
	if n, err := lib.StoreItemImage(ctx, m.ID, it.ID, "https://example.com/b.jpg", []byte("\xff\xd8\xff\xe0"), 150); err != nil || n != 1 {
		t.Fatalf("second: %d, %v", n, err)
	}
	// Only raster images: SVG (and anything else) is refused, whatever
	// its server says it is.
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	if _, err := lib.StoreItemImage(ctx, m.ID, it.ID, "https://img.example/c.svg", svg, 150); !storage.IsInvalid(err) {
		t.Fatalf("svg: %v", err)
	}
	if err := lib.FinishImages(ctx, m.ID, it.ID); err != nil {
		t.Fatal(err)
	}
	if p, _ := lib.PendingFetches(ctx, 10, false, true); len(p) != 0 {
		t.Fatalf("pending after finish = %+v", p)
	}
	img, data, err := lib.ItemImageData(ctx, m.ID, it.ID, 0)
	if err != nil || img.Type != "image/png" || img.URL != "https://img.example/a.png" || !bytes.Equal(data, png) {
		t.Fatalf("image 0 = %+v, %d bytes, %v", img, len(data), err)
	}
	if _, _, err := lib.ItemImageData(ctx, m.ID, it.ID, 2); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("image 2: %v", err)
	}
	if used, err := lib.ImageBytes(ctx, m.ID); err != nil || used != 104 {
		t.Fatalf("bytes = %d, %v", used, err)
	}
	// A backup holds them, and the restored store serves them.
	var b bytes.Buffer
	if err := st.Backup(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Replace(bytes.NewReader(b.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, data, err := lib.ItemImageData(ctx, m.ID, it.ID, 0); err != nil || !bytes.Equal(data, png) {
		t.Fatalf("restored image = %d bytes, %v", len(data), err)
	}
	// Gone with the item, and its bytes back to the member.
	if _, err := lib.SetItemsStatus(ctx, m.ID, []string{it.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := lib.PermanentlyDeleteItems(ctx, m.ID, []string{it.ID}); err != nil {
		t.Fatal(err)
	}
	if list, err := lib.ItemImages(ctx, m.ID, it.ID); err != nil || len(list) != 0 {
		t.Fatalf("images after delete = %+v, %v", list, err)
	}
	if _, _, err := lib.ItemImageData(ctx, m.ID, it.ID, 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("image after delete: %v", err)
	}
	if used, err := lib.ImageBytes(ctx, m.ID); err != nil || used != 0 {
		t.Fatalf("bytes after delete = %d, %v", used, err)
	}
	if _, err := lib.StoreItemImage(ctx, m.ID, it.ID, "https://img.example/a.png", png, 150); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("store for a deleted item: %v", err)
	}
}

// A fetched page queues its images under the policy of its fetch, and a
// page fetch pending for an item is not replaced by an images entry.
func TestFetchedPagesQueueTheirImages(t *testing.T) {
	st, m := openSavedTest(t)
	lib := Of(st)
	ctx := t.Context()
	it, err := lib.QueueFetch(ctx, m.ID, NewItem{URL: "https://example.com/a", Title: "Processing"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if page, err := lib.HasPendingPageFetch(ctx, m.ID, it.ID); err != nil || !page {
		t.Fatalf("page fetch pending: %v, %v", page, err)
	}
	// Saved again with content while its fetch is pending: still a page fetch.
	if _, _, err := lib.SaveItem(ctx, m.ID, NewItem{URL: "https://example.com/a", HTML: `<img src="https://i.example/x.png">`, FetchImages: true}); err != nil {
		t.Fatal(err)
	}
	if p, _ := lib.PendingFetches(ctx, 10, true, false); len(p) != 1 || p[0].Images {
		t.Fatalf("pending = %+v", p)
	}
	if _, err := lib.FinishFetch(ctx, m.ID, it.ID, NewItem{URL: "https://example.com/a", Title: "A", HTML: `<img src="https://i.example/x.png">`}); err != nil {
		t.Fatal(err)
	}
	p, err := lib.PendingFetches(ctx, 10, true, false)
	if err != nil || len(p) != 1 || !p[0].Images || !p[0].Private || p[0].ItemID != it.ID {
		t.Fatalf("pending after the fetch = %+v, %v", p, err)
	}
	// Its content is there: only its images are pending.
	if page, err := lib.HasPendingPageFetch(ctx, m.ID, it.ID); err != nil || page {
		t.Fatalf("page fetch pending after the fetch: %v, %v", page, err)
	}
}

func TestImageSource(t *testing.T) {
	for _, c := range []struct{ src, srcset, base, want string }{
		{"https://i.example/a.png", "", "", "https://i.example/a.png"},
		{"https://i.example/a.png#x", "", "", "https://i.example/a.png"},
		{"//i.example/a.png", "", "https://site.example/p", "https://i.example/a.png"},
		{"a.png", "", "https://site.example/p/q", "https://site.example/p/a.png"},
		{"a.png", "", "", ""},
		{"data:image/png;base64,AAAA", "", "https://site.example/", ""},
		{"", "https://i.example/s.png 1x, https://i.example/l.png 2x", "", "https://i.example/s.png"},
		{"javascript:alert(1)", "", "", ""},
		{"", "", "https://site.example/", ""},
	} {
		if got := ImageSource(c.src, c.srcset, c.base); got != c.want {
			t.Errorf("ImageSource(%q, %q, %q) = %q, want %q", c.src, c.srcset, c.base, got, c.want)
		}
	}
}

// An image as large as the article fetcher takes (5 MiB by default) is
// stored in its own transaction, and read back whole.
func TestALargeImageIsStored(t *testing.T) {
	st, m := openSavedTest(t)
	lib := Of(st)
	it, _, err := lib.SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/big", HTML: "<p>x</p>"})
	if err != nil {
		t.Fatal(err)
	}
	big := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("0123456789abcdef"), 5<<16)...)
	if _, err := lib.StoreItemImage(t.Context(), m.ID, it.ID, "https://img.example/big.png", big, 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, data, err := lib.ItemImageData(t.Context(), m.ID, it.ID, 0); err != nil || !bytes.Equal(data, big) {
		t.Fatalf("read back %d bytes of %d, %v", len(data), len(big), err)
	}
}
