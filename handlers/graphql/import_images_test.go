package graphql_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// exportOf is the member's export zip as GET /api/export gives it.
func exportOf(t *testing.T, e *env) []byte {
	t.Helper()
	resp, b := e.get(export.APIPath)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export: HTTP %d %s", resp.StatusCode, b)
	}
	return b
}

// exportedImages are the images of an export zip by the address of their
// item and the address their content names them by: what a client of the
// export reads of them (saved_items.json's list, the files' bytes).
func exportedImages(t *testing.T, zipData []byte) map[string]string {
	t.Helper()
	files := epubFiles(t, zipData)
	var items []importer.HearthItem
	if err := json.Unmarshal([]byte(files["saved_items.json"]), &items); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range items {
		for _, img := range it.Images {
			data, ok := files[img.File]
			if !ok || !strings.HasPrefix(img.File, "images/"+it.ID+"/") {
				t.Errorf("%s lists %s, which the zip lacks", it.URL, img.File)
			}
			out[it.URL+" "+img.URL] = data
		}
	}
	return out
}

// importInto uploads file to e's member and waits for the job's end.
func importInto(t *testing.T, e *env, file []byte) *library.ImportJob {
	t.Helper()
	status, out := upload(t, e.srv.URL, e.token, "hearth-export.zip", file, "")
	if status != http.StatusCreated || out["format"] != "HEARTH" {
		t.Fatalf("upload: HTTP %d %v", status, out)
	}
	return waitImport(t, e.store, e.member.ID, out["jobId"].(string))
}

// itemByURL is the id of the member's item saved from u.
func itemByURL(t *testing.T, e *env, u string) string {
	t.Helper()
	id := ""
	err := library.Of(e.store).ForEachSavedItem(t.Context(), e.member.ID, func(it *library.SavedItem, _ *library.ItemContent) error {
		if it.OriginalURL == u {
			id = it.ID
		}
		return nil
	})
	if err != nil || id == "" {
		t.Fatalf("no item of %s: %v", u, err)
	}
	return id
}

// A library taken out and brought into another Hearth comes back whole:
// its images are stored with the new items (their ids are the new
// site's), served at /api/images/<item>/<n> with the bytes and type they
// had, and the new site's export holds the same images for the same items.
func TestHearthExportImportKeepsImagesOnAnotherSite(t *testing.T) {
	from := newEnv(t, options{NoImportFetch: true})
	it, data := saveWithImages(t, from)
	first := exportOf(t, from)
	want := exportedImages(t, first)
	if len(want) != 3 {
		t.Fatalf("the first export lists %d images: %v", len(want), want)
	}

	to := newEnv(t, options{NoImportFetch: true}) // another store
	job := importInto(t, to, first)
	if job.State != library.ImportDone || job.Created != 1 || job.Images != 3 || job.ImagesSkipped != 0 || len(job.Failures) != 0 {
		t.Fatalf("job: %+v", job)
	}
	id := itemByURL(t, to, it.OriginalURL)
	for n, typ := range []string{"image/png", "image/jpeg", "image/webp"} {
		resp, b := to.get(fmt.Sprintf("%s%s/%d", export.ImageAPIPath, id, n))
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, data[n]) || resp.Header.Get("Content-Type") != typ {
			t.Errorf("image %d: HTTP %d, %d bytes, %s", n, resp.StatusCode, len(b), resp.Header.Get("Content-Type"))
		}
	}
	if resp, _ := to.get(fmt.Sprintf("%s%s/3", export.ImageAPIPath, id)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a fourth image: HTTP %d", resp.StatusCode)
	}
	// The round trip: the same images for the same items, and the
	// Markdown shows them from the zip.
	again := exportOf(t, to)
	if got := exportedImages(t, again); !equalJSON(got, want) {
		t.Errorf("the second export's images differ:\n got %v\nwant %v", keysOf(got), keysOf(want))
	}
	if md := epubFiles(t, again)["markdown/00001-pictures.md"]; !strings.Contains(md, "![A square](../images/"+id+"/0.png)") {
		t.Errorf("the Markdown does not show the image from the zip:\n%s", md)
	}
	// Imported again: nothing new, no image twice, none counted as stored.
	if job := importInto(t, to, first); job.Created != 0 || job.Existing != 1 || job.Images != 0 || job.ImagesSkipped != 0 {
		t.Fatalf("repeat job: %+v", job)
	}
	if imgs, _ := library.Of(to.store).ItemImages(t.Context(), to.member.ID, id); len(imgs) != 3 {
		t.Errorf("after a repeat the item has %d images", len(imgs))
	}
}

// An export made before saved_items.json listed the images: the files of
// an item are its content's images in order when there are as many (every
// image was stored); when there are not, they are skipped and said so.
func TestHearthExportWithoutImageListPairsFilesWithTheContent(t *testing.T) {
	from := newEnv(t, options{NoImportFetch: true})
	it, data := saveWithImages(t, from)
	// Its fourth image was never stored: as many files as images named
	// only once it is gone from the content.
	whole := from.saveArticle(from.member.ID, 8, func(in *library.NewItem) {
		in.Title, in.URL = "Two pictures", "https://photos.example/two"
		in.HTML = `<p><img src="https://cdn.example/x.png" alt="X"><img src="https://cdn.example/y.jpg" alt="Y"></p>`
	})
	for i, src := range []string{"https://cdn.example/x.png", "https://cdn.example/y.jpg"} {
		if _, err := library.Of(from.store).StoreItemImage(t.Context(), from.member.ID, whole.ID, src, data[i], 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	old := rewriteZip(t, exportOf(t, from), func(name string, b []byte) []byte {
		if name != "saved_items.json" {
			return b
		}
		var items []map[string]any
		if err := json.Unmarshal(b, &items); err != nil {
			t.Fatal(err)
		}
		for _, x := range items {
			delete(x, "images")
		}
		out, _ := json.Marshal(items)
		return out
	})
	to := newEnv(t, options{NoImportFetch: true})
	job := importInto(t, to, old)
	if job.State != library.ImportDone || job.Created != 2 || job.Images != 2 || job.ImagesSkipped != 3 {
		t.Fatalf("job: %+v", job)
	}
	for _, f := range job.Failures {
		if !strings.HasPrefix(f.Ref, "images/"+it.ID+"/") || !strings.Contains(f.Reason, "made before exports listed them") {
			t.Errorf("failure %+v", f)
		}
	}
	id := itemByURL(t, to, whole.OriginalURL)
	for n := range 2 {
		if resp, b := to.get(fmt.Sprintf("%s%s/%d", export.ImageAPIPath, id, n)); resp.StatusCode != http.StatusOK || !bytes.Equal(b, data[n]) {
			t.Errorf("image %d: HTTP %d", n, resp.StatusCode)
		}
	}
	imgs, _ := library.Of(to.store).ItemImages(t.Context(), to.member.ID, id)
	if len(imgs) != 2 || imgs[0].URL != "https://cdn.example/x.png" || imgs[1].URL != "https://cdn.example/y.jpg" {
		t.Errorf("images: %+v", imgs)
	}
}

// rewriteZip is the zip with each file's bytes as edit returns them
// (nil: the file is left out).
func rewriteZip(t *testing.T, data []byte, edit func(name string, b []byte) []byte) []byte {
	t.Helper()
	files := epubFiles(t, data)
	names := keysOf(files)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		b := edit(n, []byte(files[n]))
		if b == nil {
			continue
		}
		w, _ := zw.Create(n)
		w.Write(b)
	}
	zw.Close()
	return buf.Bytes()
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hearthZip is a Hearth export of items, with files added beside
// saved_items.json and labels.json (deflated unless stored says).
func hearthZip(t *testing.T, items []importer.HearthItem, files map[string][]byte, stored map[string]bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte, method uint16) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	add("labels.json", []byte("[]"), zip.Deflate)
	si, _ := json.Marshal(items)
	add("saved_items.json", si, zip.Deflate)
	for _, n := range keysOf(files) {
		m := zip.Deflate
		if stored[n] {
			m = zip.Store
		}
		add(n, files[n], m)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// An export's bad images are skipped, each listed with the reason, and
// cost the import nothing else: its items are all imported with the good
// images. Not an image by its bytes (whatever its name), larger than the
// site takes an image, a zip bomb, more than an item keeps, under an id no
// item has, a name that is no image's, a file the list names but the zip
// lacks. A name climbing out of the archive refuses the file, as any zip's.
func TestHearthImportSkipsBadImagesAndImportsTheItems(t *testing.T) {
	p, j, _ := testImages(t)
	item := func(id, u string, imgs ...importer.HearthImage) importer.HearthItem {
		html := "<p>Text</p>"
		for _, im := range imgs {
			html += `<img src="` + im.URL + `">`
		}
		return importer.HearthItem{ID: id, Type: library.TypeArticle, Status: library.StatusActive, Title: id, URL: u,
			ContentHTML: html, ContentText: "Text", Labels: []string{}, Highlights: []importer.HearthHighlight{}, Images: imgs}
	}
	img := func(id string, n int, ext string) importer.HearthImage {
		return importer.HearthImage{URL: fmt.Sprintf("https://cdn.example/%s/%d.%s", id, n, ext), File: fmt.Sprintf("images/%s/%d.%s", id, n, ext)}
	}
	files := map[string][]byte{
		"images/11/0.png":   p,
		"images/11/1.png":   []byte("<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"),
		"images/11/2.png":   append(append([]byte{}, p...), make([]byte, 5<<20)...), // past the fetcher's 5 MiB
		"images/11/3.jpg":   append(append([]byte{}, j...), make([]byte, 4<<20)...), // 4 MiB of zeros, deflated
		"images/404/0.png":  p,
		"images/11/x.png":   p,
		"images/11/9/0.png": p,
	}
	// One image more than an item keeps, and a list that goes on (the
	// images past the limit are read no further, and counted).
	many := []importer.HearthImage{}
	for n := range library.MaxItemImages + 101 {
		im := img("12", n, "jpg")
		many = append(many, im)
		if n <= library.MaxItemImages {
			files[im.File] = append(append([]byte{}, j...), byte(n)) // each its own
		}
	}
	items := []importer.HearthItem{
		item("11", "https://example.org/bad", img("11", 0, "png"), img("11", 1, "png"), img("11", 2, "png"), img("11", 3, "jpg"), img("11", 4, "png")),
		item("12", "https://example.org/many", many...),
		item("13", "https://example.org/none"),
	}
	e := newEnv(t, options{NoImportFetch: true})
	job := importInto(t, e, hearthZip(t, items, files, map[string]bool{"images/11/2.png": true}))
	if job.State != library.ImportDone || job.Created != 3 || job.Failed != 0 || job.Images != 1+library.MaxItemImages || job.ImagesSkipped != 108 {
		t.Fatalf("job: %+v", job)
	}
	reasons := map[string]string{}
	for _, f := range job.Failures {
		reasons[f.Ref] = f.Reason
	}
	for ref, want := range map[string]string{
		"images/11/1.png":   "not a PNG, JPEG, GIF, WebP or AVIF image",
		"images/11/2.png":   "larger than 5242880 bytes",
		"images/11/3.jpg":   "expands more than 100 times",
		"images/11/4.png":   "not in the zip",
		"images/12/40.jpg":  "the 100 images listed after it for the item are past the 40 an item keeps",
		"images/404/0.png":  "no item of the export has the id 404",
		"images/11/x.png":   "not named as an export's image",
		"images/11/9/0.png": "not named as an export's image",
	} {
		if !strings.Contains(reasons[ref], want) {
			t.Errorf("%s: %q, want %q", ref, reasons[ref], want)
		}
	}
	// What a client sees: the good image, nothing of the others.
	bad := itemByURL(t, e, "https://example.org/bad")
	if resp, b := e.get(export.ImageAPIPath + bad + "/0"); resp.StatusCode != http.StatusOK || !bytes.Equal(b, p) {
		t.Errorf("the good image: HTTP %d", resp.StatusCode)
	}
	if resp, _ := e.get(export.ImageAPIPath + bad + "/1"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a second image of the bad item: HTTP %d", resp.StatusCode)
	}
	if n, _ := library.Of(e.store).ImageBytes(t.Context(), e.member.ID); n != int64(len(p)+library.MaxItemImages*(len(j)+1)) {
		t.Errorf("the member's image bytes: %d", n)
	}
	var got struct {
		ImportJobs []struct {
			Created, Images, ImagesSkipped int
			Failures                       []struct{ Entry, Reason string }
		}
	}
	e.do(`query { importJobs { created images imagesSkipped failures { entry reason } } }`, nil, &got)
	if len(got.ImportJobs) != 1 || got.ImportJobs[0].Created != 3 || got.ImportJobs[0].Images != 41 || got.ImportJobs[0].ImagesSkipped != 108 ||
		len(got.ImportJobs[0].Failures) != 8 || !strings.HasPrefix(got.ImportJobs[0].Failures[0].Entry, "images/") {
		t.Errorf("importJobs: %+v", got)
	}
	srv, browser := site(t, e)
	if status, body := page(t, browser, http.MethodGet, srv.URL+importer.PagePath, nil); status != http.StatusOK ||
		!strings.Contains(body, "41 images of the file stored with their items, 108 skipped") || !strings.Contains(body, "images/404/0.png") {
		t.Errorf("the Import page (HTTP %d):\n%s", status, body)
	}

	// images/../x names a file outside images/: the zip is refused.
	climbing := hearthZip(t, items[2:], map[string][]byte{"images/../x": p}, nil)
	status, out := upload(t, e.srv.URL, e.token, "hearth-export.zip", climbing, "")
	if status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["message"]), "outside the archive") {
		t.Errorf("images/../x: HTTP %d %v", status, out)
	}
}

// A job stopped after a batch was written but before its images were
// stored (a crash, kill -9) stores them when it resumes: the batch's
// entries are not written again, their images are.
func TestHearthImportResumedStoresTheImagesOfItsLastBatch(t *testing.T) {
	from := newEnv(t, options{NoImportFetch: true})
	it, data := saveWithImages(t, from)
	file := exportOf(t, from)

	e := newEnv(t, options{NoImportFetch: true})
	lib := library.Of(e.store)
	// Another node's job whose file is not there yet: no runner here
	// takes it until it is.
	staged := filepath.Join(t.TempDir(), "upload-resumed")
	j, err := lib.CreateImportJob(t.Context(), &library.ImportJob{MemberID: e.member.ID, Format: string(importer.Hearth),
		FileName: "hearth-export.zip", Staged: staged, Total: 1, Node: "another-node"})
	if err != nil {
		t.Fatal(err)
	}
	// Its one batch as the runner writes it, and then the process dies.
	in := &library.ImportItem{URL: it.OriginalURL, Title: it.Title, HTML: "<p>Pictures</p>", Text: "Pictures", Images: 3}
	if _, err := lib.ImportItems(t.Context(), e.member.ID, j.ID, []library.ImportEntry{{Pos: 1, Ref: "saved_items.json[0]", Item: in}}, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staged, file, 0o600); err != nil {
		t.Fatal(err)
	}
	e.api.Importer().Kick()
	job := waitImport(t, e.store, e.member.ID, j.ID)
	if job.State != library.ImportDone || job.Created != 1 || job.Images != 3 || job.ImagesFrom != 0 || len(job.Failures) != 0 {
		t.Fatalf("job: %+v", job)
	}
	id := itemByURL(t, e, it.OriginalURL)
	for n := range 3 {
		if resp, b := e.get(fmt.Sprintf("%s%s/%d", export.ImageAPIPath, id, n)); resp.StatusCode != http.StatusOK || !bytes.Equal(b, data[n]) {
			t.Errorf("image %d: HTTP %d", n, resp.StatusCode)
		}
	}
}

// The benchmark's Hearth file imports as it says: every item with its two
// images stored.
func TestGeneratedHearthZipImportsWithItsImages(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	data, err := os.ReadFile(hearthExportZip(t, 30, 2))
	if err != nil {
		t.Fatal(err)
	}
	job := importInto(t, e, data)
	if job.State != library.ImportDone || job.Created != 30 || job.Images != 60 || job.ImagesSkipped != 0 {
		t.Fatalf("job: %+v", job)
	}
	if n, _ := library.Of(e.store).ImageBytes(t.Context(), e.member.ID); n != 60*benchImageBytes {
		t.Errorf("the member's image bytes: %d", n)
	}
}

// A job run again after it counted the export's stray images (a stop
// before its end: the file is read again from its start) counts them
// once.
func TestHearthImportRunAgainCountsItsStrayImagesOnce(t *testing.T) {
	p, _, _ := testImages(t)
	items := []importer.HearthItem{{ID: "1", Type: library.TypeArticle, Status: library.StatusActive, Title: "a", URL: "https://example.org/a",
		ContentHTML: "<p>x</p>", ContentText: "x", Labels: []string{}, Highlights: []importer.HearthHighlight{}}}
	file := hearthZip(t, items, map[string][]byte{"images/404/0.png": p}, nil)
	e := newEnv(t, options{NoImportFetch: true})
	job := importInto(t, e, file)
	if job.State != library.ImportDone || job.ImagesSkipped != 1 {
		t.Fatalf("first run: %+v", job)
	}
	// The job as a stop just before its end leaves it: running, its file
	// staged.
	if err := os.WriteFile(job.Staged, file, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).UpdateImportJob(t.Context(), e.member.ID, job.ID, func(x *library.ImportJob) {
		x.State, x.FinishedAt = library.ImportRunning, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.api.Importer().Kick()
	waitImport(t, e.store, e.member.ID, job.ID)
	var got struct {
		ImportJobs []struct {
			State         string
			ImagesSkipped int
			Failures      []struct{ Entry, Reason string }
		}
	}
	e.do(`query { importJobs { state imagesSkipped failures { entry reason } } }`, nil, &got)
	if len(got.ImportJobs) != 1 || got.ImportJobs[0].State != "DONE" || got.ImportJobs[0].ImagesSkipped != 1 || len(got.ImportJobs[0].Failures) != 1 {
		t.Errorf("importJobs: %+v", got)
	}
}

// A job resumed after a batch of items without an address was written,
// their images not yet stored, finds them again by what the export says
// of them, also when it gives no date or one later than now (saved at
// the time of the import): their images are stored.
func TestHearthImportResumedStoresTheImagesOfUndatedItemsWithoutAddress(t *testing.T) {
	p, jpg, _ := testImages(t)
	future := time.Now().AddDate(10, 0, 0).UTC().Truncate(time.Second)
	letter := func(id, title string, created time.Time, data []byte) importer.HearthItem {
		return importer.HearthItem{ID: id, Type: library.TypeNewsletter, Status: library.StatusActive, Title: title, CreatedAt: created,
			ContentHTML: `<p>News</p><img src="https://cdn.example/` + id + `.png">`, ContentText: "News", Labels: []string{},
			Highlights: []importer.HearthHighlight{}, Images: []importer.HearthImage{{URL: "https://cdn.example/" + id + ".png", File: "images/" + id + "/0.png"}}}
	}
	items := []importer.HearthItem{letter("1", "Undated", time.Time{}, p), letter("2", "Ahead", future, jpg)}
	file := hearthZip(t, items, map[string][]byte{"images/1/0.png": p, "images/2/0.png": jpg}, nil)

	e := newEnv(t, options{NoImportFetch: true})
	lib := library.Of(e.store)
	staged := filepath.Join(t.TempDir(), "upload-resumed")
	j, err := lib.CreateImportJob(t.Context(), &library.ImportJob{MemberID: e.member.ID, Format: string(importer.Hearth),
		FileName: "hearth-export.zip", Staged: staged, Total: 2, Node: "another-node"})
	if err != nil {
		t.Fatal(err)
	}
	// Its batch as the runner writes it, a while before it resumes.
	var entries []library.ImportEntry
	for i, it := range items {
		entries = append(entries, library.ImportEntry{Pos: i + 1, Ref: fmt.Sprintf("saved_items.json[%d]", i), Item: &library.ImportItem{
			Type: it.Type, Title: it.Title, CreatedAt: it.CreatedAt, HTML: it.ContentHTML, Text: it.ContentText, Images: 1}})
	}
	if _, err := lib.ImportItems(t.Context(), e.member.ID, j.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the clock moves on: the items' saved date is not the resumed job's now
	if err := os.WriteFile(staged, file, 0o600); err != nil {
		t.Fatal(err)
	}
	e.api.Importer().Kick()
	job := waitImport(t, e.store, e.member.ID, j.ID)
	if job.State != library.ImportDone || job.Created != 2 || job.Images != 2 || job.ImagesSkipped != 0 {
		t.Fatalf("job: %+v", job)
	}
	byTitle := map[string]string{}
	err = lib.ForEachSavedItem(t.Context(), e.member.ID, func(it *library.SavedItem, _ *library.ItemContent) error {
		byTitle[it.Title] = it.ID
		return nil
	})
	if err != nil || len(byTitle) != 2 {
		t.Fatalf("items %v: %v", byTitle, err)
	}
	for title, data := range map[string][]byte{"Undated": p, "Ahead": jpg} {
		if resp, b := e.get(export.ImageAPIPath + byTitle[title] + "/0"); resp.StatusCode != http.StatusOK || !bytes.Equal(b, data) {
			t.Errorf("the image of %s: HTTP %d", title, resp.StatusCode)
		}
	}
}
