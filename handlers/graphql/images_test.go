package graphql_test

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// testImages are a PNG and a JPEG of a few pixels, and WebP bytes (a
// type EPUB 3.2 does not carry).
func testImages(t testing.TB) (pngData, jpegData, webpData []byte) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(0, 0, color.RGBA{0, 90, 200, 255})
	var p, j bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	return p.Bytes(), j.Bytes(), []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
}

// saveWithImages saves an article naming four images, three of them
// stored (PNG, JPEG, WebP) and one not.
func saveWithImages(t *testing.T, e *env) (*library.SavedItem, [][]byte) {
	t.Helper()
	p, j, w := testImages(t)
	it := e.saveArticle(e.member.ID, 7, func(in *library.NewItem) {
		in.Title = "Pictures"
		in.URL = "https://photos.example/post"
		in.HTML = `<p>A <img src="https://cdn.example/a.png" alt="A square"> and</p><ul><li><img src="/b.jpg" alt="B"></li></ul>` +
			`<figure><picture><source srcset="https://cdn.example/c.avif"><img src="https://cdn.example/c.webp" alt="C"></picture><figcaption>C</figcaption></figure>` +
			`<p><img src="https://cdn.example/missing.png" alt="Missing"><img src="https://t.example/p.gif" width="1" height="1"></p>`
	})
	for _, x := range []struct {
		src  string
		data []byte
	}{{"https://cdn.example/a.png", p}, {"https://photos.example/b.jpg", j}, {"https://cdn.example/c.webp", w}} {
		if _, err := library.Of(e.store).StoreItemImage(t.Context(), e.member.ID, it.ID, x.src, x.data, libraryservice.DefaultImageQuota); err != nil {
			t.Fatalf("%s: %v", x.src, err)
		}
	}
	return it, [][]byte{p, j, w}
}

// anotherMembersImage saves an item of another member, bob, with one
// stored image, for the tests that an address answers only its own image.
func anotherMembersImage(t *testing.T, e *env) (*members.Member, *library.SavedItem) {
	t.Helper()
	other, _ := e.newMember("bob")
	theirs := e.saveArticle(other.ID, 9, nil)
	p, _, _ := testImages(t)
	if _, err := library.Of(e.store).StoreItemImage(t.Context(), other.ID, theirs.ID, "https://cdn.example/bob.png", p, libraryservice.DefaultImageQuota); err != nil {
		t.Fatal(err)
	}
	return other, theirs
}

// An EPUB embeds the stored images its items show (PNG, JPEG: in the
// manifest with their media types) and passes epubcheck; an image not
// stored, and one of a type EPUB does not carry, are left out, their alt
// text said in their place.
func TestEPUBEmbedsStoredImages(t *testing.T) {
	e := newEnv(t, options{})
	it, data := saveWithImages(t, e)
	book := getEPUB(t, e, "id="+it.ID)
	epubcheck(t, book)
	files := epubFiles(t, book)
	if files["OEBPS/images/c0001-0.png"] != string(data[0]) || files["OEBPS/images/c0001-1.jpg"] != string(data[1]) {
		t.Errorf("the book's images: %v", keys(files))
	}
	if _, ok := files["OEBPS/images/c0001-2.webp"]; ok {
		t.Error("a WebP image is in the book")
	}
	opf := files["OEBPS/content.opf"]
	for _, want := range []string{`href="images/c0001-0.png" media-type="image/png"`, `href="images/c0001-1.jpg" media-type="image/jpeg"`} {
		if !strings.Contains(opf, want) {
			t.Errorf("the manifest lacks %s:\n%s", want, opf)
		}
	}
	ch := files["OEBPS/c0001.xhtml"]
	for _, want := range []string{`<img src="images/c0001-0.png" alt="A square"/>`, `<img src="images/c0001-1.jpg" alt="B"/>`} {
		if !strings.Contains(ch, want) {
			t.Errorf("the chapter lacks %s:\n%s", want, ch)
		}
	}
	for _, want := range []string{"<span>[Image: C]</span>", "<span>[Image: Missing]</span>"} {
		if !strings.Contains(ch, want) {
			t.Errorf("the chapter lacks %s:\n%s", want, ch)
		}
	}
	if strings.Contains(ch, "example/") && strings.Contains(ch, "<img src=\"http") || strings.Count(ch, "<img") != 2 {
		t.Errorf("the chapter shows other images:\n%s", ch)
	}
}

// The export zip holds the stored images as images/<item>/<n>.<ext>, and
// the item's Markdown shows them from there, and no tracking pixel.
func TestExportZipHoldsStoredImages(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	it, data := saveWithImages(t, e)
	resp, b := e.get(export.APIPath)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
	files := epubFiles(t, b) // a zip's files
	dir := "images/" + it.ID + "/"
	if files[dir+"0.png"] != string(data[0]) || files[dir+"1.jpg"] != string(data[1]) || files[dir+"2.webp"] != string(data[2]) {
		t.Errorf("the zip's files: %v", keys(files))
	}
	md := files["markdown/00001-pictures.md"]
	for _, want := range []string{"![A square](../" + dir + "0.png)", "![B](../" + dir + "1.jpg)", "![C](../" + dir + "2.webp)"} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %s:\n%s", want, md)
		}
	}
	if strings.Contains(md, "t.example/p.gif") {
		t.Errorf("the Markdown names the tracking pixel:\n%s", md)
	}
	if strings.Contains(md, "hearth-export.invalid") {
		t.Errorf("the Markdown names the stand-in address:\n%s", md)
	}
	// The Export page names every file and folder at the top of the zip.
	srv, browser := site(t, e)
	status, body := page(t, browser, http.MethodGet, srv.URL+export.PagePath, nil)
	for name := range files {
		top, _, inFolder := strings.Cut(name, "/")
		if inFolder {
			top += "/"
		}
		if status != http.StatusOK || !strings.Contains(body, "<code>"+top+"</code>") {
			t.Errorf("the Export page (HTTP %d) does not name %s of the zip:\n%s", status, top, body)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A newsletter and a page sent with its HTML get their images fetched
// after the save (the worker, with the article fetcher): stored when they
// are raster images within the member's quota; a tracking pixel is never
// asked for; past the quota an image is not stored and the fetch ends.
func TestNewslettersAndSnapshotsGetTheirImages(t *testing.T) {
	p, _, _ := testImages(t)
	var mu sync.Mutex
	asked := map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/a.png", "/b.png":
			w.Write(p)
		case "/big.png":
			w.Write(append(append([]byte{}, p...), make([]byte, 4096)...))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(origin.Close)
	e := newEnv(t, options{AllowPrivateAddresses: true, ImageQuota: int64(2*len(p) + 100)})
	msg := strings.Replace(newsletterMessage, "coffee.</p></body></html>",
		`coffee.</p><img src=3D"`+origin.URL+`/a.png" alt=3D"A"><img src=3D"`+origin.URL+`/open.gif" width=3D"1" height=3D"1"></body></html>`, 1)
	if status, body := postInbound(t, e, inboundURL(t, e), msg); status != http.StatusCreated {
		t.Fatalf("newsletter: %d %s", status, body)
	}
	var out struct {
		ID string `json:"addArticleFromHtmlSnapshot"`
	}
	e.do(`mutation AddArticleFromHtmlSnapshot($data: AddArticleFromHtmlSnapshotInput!) { addArticleFromHtmlSnapshot(data: $data) }`,
		map[string]any{"data": map[string]any{"url": origin.URL + "/page", "html": "<html><head><title>Snapshot</title></head><body><article><p>" +
			strings.Repeat("word ", 200) + `</p><p><img src="/b.png" alt="B"><img src="/big.png" alt="Big"></p></article></body></html>`}}, &out)
	items := e.waitFetched()
	byTitle := map[string]string{}
	for _, it := range items {
		byTitle[it.Title] = it.ID
	}
	letter, err := library.Of(e.store).ItemImages(t.Context(), e.member.ID, byTitle["Issue 42: Café edition"])
	if err != nil || len(letter) != 1 || letter[0].URL != origin.URL+"/a.png" || letter[0].Type != "image/png" {
		t.Errorf("the newsletter's images: %+v, %v (items %v)", letter, err, byTitle)
	}
	page, err := library.Of(e.store).ItemImages(t.Context(), e.member.ID, out.ID)
	if err != nil || len(page) != 1 || page[0].URL != origin.URL+"/b.png" {
		t.Errorf("the snapshot's images: %+v, %v", page, err)
	}
	if used, _ := library.Of(e.store).ImageBytes(t.Context(), e.member.ID); used != int64(2*len(p)) {
		t.Errorf("image bytes %d, want %d (the large one over the quota)", used, 2*len(p))
	}
	mu.Lock()
	defer mu.Unlock()
	if asked["/open.gif"] != 0 || asked["/big.png"] != 1 || asked["/a.png"] != 1 {
		t.Errorf("the origin was asked %v", asked)
	}
}

// Images are fetched under the article fetcher's address policy: a site
// that may not fetch private addresses never asks a loopback origin for a
// newsletter's image (nor stores it), and the item's images entry ends.
func TestImagesAtPrivateAddressesAreNotFetched(t *testing.T) {
	p, _, _ := testImages(t)
	var mu sync.Mutex
	asked := 0
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked++
		mu.Unlock()
		w.Write(p)
	}))
	t.Cleanup(origin.Close)
	e := newEnv(t, options{})
	msg := strings.Replace(newsletterMessage, "coffee.</p></body></html>", `coffee.</p><img src=3D"`+origin.URL+`/a.png" alt=3D"A"></body></html>`, 1)
	if status, body := postInbound(t, e, inboundURL(t, e), msg); status != http.StatusCreated {
		t.Fatalf("newsletter: %d %s", status, body)
	}
	items := e.waitFetched()
	if len(items) != 1 {
		t.Fatalf("items %+v", items)
	}
	if imgs, err := library.Of(e.store).ItemImages(t.Context(), e.member.ID, items[0].ID); err != nil || len(imgs) != 0 {
		t.Errorf("images stored: %+v, %v", imgs, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 0 {
		t.Errorf("the loopback origin was asked %d times", asked)
	}
}

// The Atom feed shows an item's stored images from the site, at addresses
// signed for each image (a feed reader sends no cookie, and the feed's
// secret in the content would read the whole library wherever the content
// went), with the reader's headers but shown by any site's pages (a web
// feed reader's); an image not stored keeps its address, a tracking pixel
// is left out. An address answers only its own image, and stops with the
// secret.
func TestAtomFeedShowsStoredImagesAtSignedAddresses(t *testing.T) {
	e := newEnv(t, options{})
	it, data := saveWithImages(t, e)
	other, theirs := anotherMembersImage(t, e)
	atom, _ := feedsCall(t, e, http.MethodPost)["atom"].(string)
	secret := strings.TrimSuffix(atom[strings.Index(atom, "/api/feed/")+len("/api/feed/"):], "/atom")
	status, _, b := fetch(t, atom)
	got := feedparse(t, b)
	notBozo(t, got, "the feed")
	entries, _ := got["entries"].([]any)
	if status != http.StatusOK || len(entries) != 1 {
		t.Fatalf("HTTP %d, %v", status, got)
	}
	c, _ := entries[0].(map[string]any)["content"].([]any)
	if len(c) != 1 {
		t.Fatalf("content: %v", entries[0])
	}
	content := c[0].(string)
	site := strings.TrimSuffix(atom, "/api/feed/"+secret+"/atom")
	var srcs []string
	for _, m := range regexp.MustCompile(`src="(`+regexp.QuoteMeta(site)+`/api/feed/i/[^"]+)"`).FindAllStringSubmatch(content, -1) {
		srcs = append(srcs, m[1])
	}
	if len(srcs) != len(data) || !strings.Contains(content, `alt="A square"`) || !strings.Contains(content, `src="https://cdn.example/missing.png"`) {
		t.Fatalf("the content's images: %q\n%s", srcs, content)
	}
	if strings.Contains(content, secret) || strings.Contains(content, "cdn.example/a.png") || strings.Contains(content, "t.example/p.gif") {
		t.Errorf("the content names the feed's secret, a stored image's origin or a tracking pixel:\n%s", content)
	}
	for n, u := range srcs {
		resp, body := send(t, mustRequest(t, u))
		h := resp.Header
		if resp.StatusCode != http.StatusOK || string(body) != string(data[n]) || h.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "sandbox") || h.Get("Cross-Origin-Resource-Policy") != "cross-origin" {
			t.Fatalf("image %d: HTTP %d %v", n, resp.StatusCode, h)
		}
	}
	// Another image, item or member under a signature made for one image
	// of one item is none of them; so is a signature changed.
	parts := strings.Split(strings.TrimPrefix(srcs[0], site+"/api/feed/i/"), "/")
	mine, sig := parts[0], parts[3]
	digest := storage.Digest(secret)
	for _, u := range []string{
		site + "/api/feed/i/" + mine + "/" + it.ID + "/1/" + sig,
		site + "/api/feed/i/" + other.ID + "/" + theirs.ID + "/0/" + sig,
		site + "/api/feed/i/" + mine + "/" + theirs.ID + "/0/" + apitokens.ImageSignature(apitokens.FeedImageKey(digest), mine, theirs.ID, "0"),
		site + "/api/feed/i/" + mine + "/" + it.ID + "/0/" + strings.ToUpper(sig),
		site + "/api/feed/i/" + mine + "/" + it.ID + "/0",
		site + "/api/feed/i/" + mine + "/" + it.ID + "/00/" + apitokens.ImageSignature(apitokens.FeedImageKey(digest), mine, it.ID, "00"),
	} {
		if resp, body := send(t, mustRequest(t, u)); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: HTTP %d %s", u, resp.StatusCode, body)
		}
	}
	feedsCall(t, e, http.MethodPost) // a new secret: the old addresses end
	if resp, _ := send(t, mustRequest(t, srcs[0])); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after renewing the secret: HTTP %d", resp.StatusCode)
	}
}

func mustRequest(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
