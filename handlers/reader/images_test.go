package reader_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// imageOrigin is a site with an article whose images are a PNG, an SVG
// (never stored), a 1×1 tracking pixel (never fetched) and one that
// answers 404; it logs the paths asked of it.
type imageOrigin struct {
	srv  *httptest.Server
	png  []byte
	mu   sync.Mutex
	asks []string
}

func newImageOrigin(t *testing.T) *imageOrigin {
	o := &imageOrigin{}
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{200, 10, 10, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	o.png = b.Bytes()
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.asks = append(o.asks, r.URL.Path)
		o.mu.Unlock()
		switch r.URL.Path {
		case "/article":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			body := `<!doctype html><html><head><title>Bread at home</title></head><body><article><h1>Bread at home</h1>` +
				strings.Repeat(`<p>Flour, water, salt and time make bread; the crust comes from a hot oven and steam in the first minutes.</p>`, 8) +
				`<p><img src="/img/loaf.png" alt="A loaf" width="4" height="3"></p>` +
				`<p><img src="` + o.srv.URL + `/img/mark.svg" alt="A mark"></p>` +
				`<p><img src="/img/gone.png" alt="Gone"></p>` +
				`<p><img src="/track/open.gif" width="1" height="1"></p>` +
				strings.Repeat(`<p>Let the dough rest overnight in a cool place, then shape it and bake it until it sounds hollow.</p>`, 8) +
				`</article></body></html>`
			_, _ = w.Write([]byte(body))
		case "/img/loaf.png":
			w.Header().Set("Content-Type", "text/plain") // its bytes say what it is
			_, _ = w.Write(o.png)
		case "/img/mark.svg":
			w.Header().Set("Content-Type", "image/svg+xml")
			_, _ = w.Write([]byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *imageOrigin) asked(path string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.asks {
		if p == path {
			return true
		}
	}
	return false
}

// waitImages waits until the item's fetch and its images' are done (a
// minute at most: the fetch workers run in the background).
func (f *fixture) waitImages(itemID string) {
	f.t.Helper()
	storagetest.Eventually(f.t, "the item's fetches end", func() bool {
		pending, err := library.Of(f.store).HasPendingFetch(context.Background(), f.member.ID, itemID)
		if err != nil {
			f.t.Fatal(err)
		}
		return !pending
	})
}

// An article saved from its URL keeps its images: fetched once at save
// time with the article fetcher, shown by the reader from the site, to the
// member alone; an SVG and a missing image show their placeholder, and a
// tracking pixel is neither fetched nor shown.
func TestSavedImagesAreServedByTheSite(t *testing.T) {
	f := newFixture(t)
	o := newImageOrigin(t)
	if err := f.lib.SaveURL(context.Background(), f.member.ID, o.srv.URL+"/article", nil); err != nil {
		t.Fatal(err)
	}
	items, err := library.Of(f.store).SavedItemsPage(context.Background(), f.member.ID, library.ItemFilter{}, library.PageRequest{Field: library.SortCreatedAt, First: 10})
	if err != nil || len(items.Items) != 1 {
		t.Fatalf("items = %+v, %v", items, err)
	}
	id := items.Items[0].ID
	f.waitImages(id)
	if f.item(id).Title != "Bread at home" {
		t.Fatalf("title %q", f.item(id).Title)
	}
	_, page, _ := f.get("/library/item/" + id)
	// Every address the page loads is the site's own.
	for _, m := range regexp.MustCompile(`(?i)\s(?:src|srcset)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "/") || strings.HasPrefix(m[1], "//") {
			t.Errorf("the page loads %q", m[1])
		}
	}
	want := `<img src="/library/image/` + id + `/0" alt="A loaf" width="4" height="3">`
	for _, s := range []string{want, `<hearth-img role="img" aria-label="Image not stored: A mark"`, `aria-label="Image not stored: Gone"`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %s", s)
		}
	}
	if strings.Contains(page, "open.gif") || o.asked("/track/open.gif") {
		t.Error("the tracking pixel was fetched or shown")
	}
	if !o.asked("/img/mark.svg") || !o.asked("/img/loaf.png") {
		t.Errorf("the origin was asked %v", o.asks)
	}
	code, data, hdr := f.get("/library/image/" + id + "/0")
	if code != 200 || data != string(o.png) || hdr.Get("Content-Type") != "image/png" || hdr.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(hdr.Get("Cache-Control"), "max-age=31536000") || !strings.Contains(hdr.Get("Cache-Control"), "private") {
		t.Errorf("image: %d, %d bytes, %v", code, len(data), hdr)
	}
	if code, _, _ := f.get("/library/image/" + id + "/1"); code != http.StatusNotFound {
		t.Errorf("image 1 (not stored): %d", code)
	}
	for _, p := range []string{"/library/image/" + id + "/01", "/library/image/" + id + "/-1", "/library/image/" + id, "/library/image/x/0"} {
		if code, _, _ := f.get(p); code != http.StatusNotFound {
			t.Errorf("%s: %d", p, code)
		}
	}
	// Another member, or nobody, gets nothing.
	if _, err := members.Of(f.store).CreateMember(context.Background(), "bob", "Bob", password); err != nil {
		t.Fatal(err)
	}
	bob := f.browser()
	resp, err := bob.Get(f.srv.URL + "/library/image/" + id + "/0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Error("a visitor without a session got the image")
	}
	f.signInAs(bob, "bob")
	resp, err = bob.Get(f.srv.URL + "/library/image/" + id + "/0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("another member: %d", resp.StatusCode)
	}
}

// A path of this site in saved content is not an image the site stored: a
// newsletter (which has no address of its own to resolve it against) that
// names one shows its placeholder, so opening it in the reader makes the
// member's browser ask this site for nothing the sender chose (an export of
// the whole library, an app behind hearth_gate on the same host).
func TestContentNeverMakesTheReaderAskThisSiteForAPath(t *testing.T) {
	f := newFixture(t)
	secret, err := apitokens.Of(f.store).RotateInboundSecret(context.Background(), f.member.ID, f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	mail := httptest.NewServer(f.lib.Inbound())
	t.Cleanup(mail.Close)
	msg := "From: News <news@letters.example>\r\nTo: me@example.com\r\nSubject: Weekly\r\nMessage-ID: <w1@letters.example>\r\n" +
		"Content-Type: text/html; charset=utf-8\r\n\r\n" +
		`<p>This week.</p><p><img src="/settings/export/hearth-export.zip" alt="Export"></p>` +
		`<p><img src="/app/delete?id=1" alt="App" width="300" height="200"></p>`
	resp, err := http.Post(mail.URL+inbound.Path+secret, "message/rfc822", strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		t.Fatalf("inbound: %d", resp.StatusCode)
	}
	page, err := library.Of(f.store).SavedItemsPage(context.Background(), f.member.ID, library.ItemFilter{}, library.PageRequest{Field: library.SortCreatedAt, First: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("items = %+v, %v", page, err)
	}
	id := page.Items[0].ID
	_, body, _ := f.get("/library/item/" + id)
	_, content, _ := strings.Cut(body, `id="content">`)
	content, _, _ = strings.Cut(content, "</article>")
	for _, m := range regexp.MustCompile(`(?i)\s(?:src|srcset)="([^"]*)"`).FindAllStringSubmatch(content, -1) {
		t.Errorf("the content loads %q", m[1])
	}
	for _, want := range []string{`aria-label="Image not stored: Export"></hearth-img>`, `aria-label="Image not stored: App" width="300" height="200"></hearth-img>`, "<p>This week.</p>"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}
