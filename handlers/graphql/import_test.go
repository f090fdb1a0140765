package graphql_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// upload posts a file to /api/import as Inboxt's web app does (multipart:
// file, type, labelIds repeated), with token (or "session:<id>").
func upload(t *testing.T, base, token, name string, file []byte, typ string, labelIDs ...string) (int, map[string]any) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(file)
	if typ != "" {
		mw.WriteField("type", typ)
	}
	for _, id := range labelIDs {
		mw.WriteField("labelIds", id)
	}
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, base+importer.UploadPath, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	authorize(req, token)
	resp, b := send(t, req)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("answer is not JSON (HTTP %d): %s", resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

// waitImport polls until the member's job id has ended.
func waitImport(t *testing.T, st *storage.Store, memberID, id string) *library.ImportJob {
	t.Helper()
	for i := 0; ; i++ {
		j, err := library.Of(st).ImportJob(t.Context(), memberID, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Finished() {
			return j
		}
		if i > 6000 {
			t.Fatalf("import still running: %+v", j)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// snapshot is what a client sees of a member's library: items by URL or
// title, with their labels, highlights and content.
type snapItem struct {
	Type, Status, Title, URL, Description, Author string
	Progress                                      float64
	ReadAt                                        string
	Created, Updated                              string
	Labels                                        []string
	Highlights                                    []string
	HTML, Text                                    string
}

func snapshot(t *testing.T, st *storage.Store, memberID string) map[string]snapItem {
	t.Helper()
	labels, _ := library.Of(st).Labels(t.Context(), memberID)
	names := map[string]string{}
	for _, l := range labels {
		names[l.ID] = l.Name + " " + l.Color
	}
	out := map[string]snapItem{}
	err := library.Of(st).ForEachSavedItem(t.Context(), memberID, func(it *library.SavedItem, c *library.ItemContent) error {
		s := snapItem{Type: it.Type, Status: it.Status, Title: it.Title, URL: it.OriginalURL, Description: it.Description,
			Author: it.Author, Progress: it.ReadingProgress, Created: it.CreatedAt.UTC().Format(time.RFC3339Nano),
			Updated: it.UpdatedAt.UTC().Format(time.RFC3339Nano), HTML: c.HTML, Text: c.Text}
		if it.ReadAt != nil {
			s.ReadAt = it.ReadAt.UTC().Format(time.RFC3339Nano)
		}
		for _, id := range it.LabelIDs {
			s.Labels = append(s.Labels, names[id])
		}
		sort.Strings(s.Labels)
		hs, err := library.Of(st).ItemHighlights(t.Context(), memberID, it.ID)
		if err != nil {
			return err
		}
		for _, h := range hs {
			b, _ := json.Marshal(struct {
				Note     string
				Segments []library.HighlightSegment
				C, U     time.Time
			}{h.Note, stripIDs(h.Segments), h.CreatedAt.UTC(), h.UpdatedAt.UTC()})
			s.Highlights = append(s.Highlights, string(b))
		}
		sort.Strings(s.Highlights)
		key := it.OriginalURL
		if key == "" {
			key = it.Title
		}
		out[key] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func stripIDs(segs []library.HighlightSegment) []library.HighlightSegment {
	out := append([]library.HighlightSegment(nil), segs...)
	for i := range out {
		out[i].ID = ""
	}
	return out
}

func TestHearthExportImportedIntoAnEmptyMemberGivesTheSameLibrary(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	kitchen, _ := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Kitchen", "#ff0000")
	library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Unused", "#0000ff")
	later, _ := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Read later", "#00aa00")
	bread := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title, in.Text, in.HTML, in.Author = "Baking Bread", "Knead the dough.", "<p>Knead the dough.</p>", "A. Baker"
		in.LabelIDs = []string{kitchen.ID, later.ID}
	})
	if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, bread.ID, []library.HighlightSegment{{XPath: "/p[1]", EndOffset: 5, Text: "Knead"}}, "the key step"); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).UpdateReadingProgress(t.Context(), e.member.ID, bread.ID, 60); err != nil {
		t.Fatal(err)
	}
	archived := e.saveArticle(e.member.ID, 2, nil)
	library.Of(e.store).SetItemsRead(t.Context(), e.member.ID, []string{archived.ID}, true)
	library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{archived.ID}, library.StatusArchived)
	trashed := e.saveArticle(e.member.ID, 3, nil)
	library.Of(e.store).SetItemsStatus(t.Context(), e.member.ID, []string{trashed.ID}, library.StatusDeleted)
	if _, _, err := library.Of(e.store).SaveItem(t.Context(), e.member.ID, library.NewItem{Type: library.TypeNewsletter, Title: "Weekly digest",
		HTML: "<p>News</p>", Text: "News", FromName: "Digest", MessageID: "<1@digest.example>"}); err != nil {
		t.Fatal(err)
	}

	srv, browser := site(t, e)
	resp, err := browser.Get(srv.URL + export.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	bob, bobToken := e.newMember("bob")
	status, out := upload(t, e.srv.URL, bobToken, "hearth-export-alice.zip", export, "")
	if status != http.StatusCreated || out["success"] != true || out["format"] != "HEARTH" || out["total"] != float64(4) {
		t.Fatalf("upload: HTTP %d %v", status, out)
	}
	job := waitImport(t, e.store, bob.ID, out["jobId"].(string))
	if job.State != library.ImportDone || job.Created != 4 || job.Failed != 0 {
		t.Fatalf("job: %+v", job)
	}
	want, got := snapshot(t, e.store, e.member.ID), snapshot(t, e.store, bob.ID)
	if len(want) != 4 || len(got) != len(want) {
		t.Fatalf("bob has %d items, alice %d", len(got), len(want))
	}
	for k, w := range want {
		if g := got[k]; !equalJSON(g, w) {
			t.Errorf("item %s:\n got %+v\nwant %+v", k, g, w)
		}
	}
	// Every label, in its order with its color, also one no item carries.
	labelList := func(id string) string {
		ls, _ := library.Of(e.store).Labels(t.Context(), id)
		var out []string
		for _, l := range ls {
			out = append(out, l.Name+" "+l.Color)
		}
		return strings.Join(out, ", ")
	}
	if g, w := labelList(bob.ID), labelList(e.member.ID); g != w || !strings.Contains(w, "Unused") {
		t.Errorf("labels: got %s, want %s", g, w)
	}

	// The same file again changes nothing.
	status, out = upload(t, e.srv.URL, bobToken, "hearth-export-alice.zip", export, "HEARTH")
	if status != http.StatusCreated {
		t.Fatalf("second upload: HTTP %d %v", status, out)
	}
	job = waitImport(t, e.store, bob.ID, out["jobId"].(string))
	if job.Created != 0 || job.Existing != 4 {
		t.Fatalf("repeat job: %+v", job)
	}
	if again := snapshot(t, e.store, bob.ID); !equalJSON(again, got) {
		t.Fatalf("the repeat changed the library:\n%+v\n%+v", again, got)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestImportKeepsExistingItemsAndAddsOnlyMissingLabels(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	mine := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.URL, in.Title, in.HTML, in.Text = "https://example.org/bread", "My own title", "<p>mine</p>", "mine"
	})
	imported, _ := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Imported", "#123456")
	csv := "name,url,description,date,labels\nBaking Bread,https://EXAMPLE.org/bread#top,How to bake bread,2025-03-01T10:00:00.000Z,\"Kitchen,weekend\"\n"
	status, out := upload(t, e.srv.URL, e.token, "saved-items.csv", []byte(csv), "CSV", imported.ID)
	if status != http.StatusCreated {
		t.Fatalf("HTTP %d %v", status, out)
	}
	job := waitImport(t, e.store, e.member.ID, out["jobId"].(string))
	if job.Existing != 1 || job.Created != 0 {
		t.Fatalf("job: %+v", job)
	}
	it, _ := library.Of(e.store).SavedItem(t.Context(), e.member.ID, mine.ID)
	c, _ := library.Of(e.store).ItemContent(t.Context(), e.member.ID, mine.ID)
	if it.Title != "My own title" || !it.CreatedAt.Equal(mine.CreatedAt) || c.HTML != "<p>mine</p>" || len(it.LabelIDs) != 3 {
		t.Fatalf("existing item changed beyond its labels: %+v %+v", it, c)
	}
}

func TestImportRefusesNonExportsOversizeAndStrangersBeforeAnyWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "staged")
	e := newEnv(t, options{ImportLimits: importer.Limits{MaxUploadBytes: 2048}, ImportDir: dir})
	cases := []struct {
		name, token string
		file        []byte
		typ         string
		status      int
		says        string
	}{
		{"an image", e.token, []byte("\x89PNG\r\n\x1a\n...."), "", 400, "not an export"},
		{"too large", e.token, bytes.Repeat([]byte("x"), 5000), "", 413, "larger than 2048 bytes"},
		{"unknown type", e.token, []byte("url\nhttps://e.com/\n"), "DELICIOUS", 400, "unknown import type"},
		{"csv said, zip sent", e.token, []byte("PK\x03\x04rest"), "CSV", 400, "zip"},
		{"no token", "", []byte("url\nhttps://e.com/\n"), "", 401, "sign in"},
		{"bad token", "app_nope", []byte("url\nhttps://e.com/\n"), "", 401, "unknown"},
	}
	for _, c := range cases {
		status, out := upload(t, e.srv.URL, c.token, "f", c.file, c.typ)
		msg, _ := out["message"].(string)
		if status != c.status || out["status"] != float64(c.status) || !strings.Contains(msg, c.says) || out["path"] != "/api/import" {
			t.Errorf("%s: HTTP %d %v", c.name, status, out)
		}
	}
	if jobs, _ := library.Of(e.store).ImportJobs(t.Context(), e.member.ID); len(jobs) != 0 {
		t.Fatalf("jobs recorded: %+v", jobs)
	}
	if items := e.allEntries(map[string]any{"first": 10}); len(items) != 0 {
		t.Fatalf("items written: %+v", items)
	}
	if staged, _ := os.ReadDir(dir); len(staged) != 0 {
		t.Fatalf("staged files left: %v", staged)
	}
}

// The Import page works without script: its form posts to /api/import
// with from=settings, which redirects back to the page (303) or shows the
// page again with the error; the page lists the import with its progress
// and failures and asks to be refreshed while it runs.
func TestImportPageUploadsWithoutScriptAndShowsProgress(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	srv, browser := site(t, e)
	status, body := page(t, browser, http.MethodGet, srv.URL+importer.PagePath, nil)
	if status != http.StatusOK || !strings.Contains(body, `action="/api/import"`) || !strings.Contains(body, `enctype="multipart/form-data"`) ||
		!strings.Contains(body, `<option value="OMNIVORE">`) || !strings.Contains(body, "You have not imported anything yet.") {
		t.Fatalf("page: HTTP %d\n%s", status, body)
	}
	send := func(file []byte) *http.Response { return sendImportForm(t, browser, srv.URL, "ril_export.html", file) }
	pocket, err := os.ReadFile("../importer/testdata/ril_export.html")
	if err != nil {
		t.Fatal(err)
	}
	resp := send(pocket)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != importer.PagePath {
		t.Fatalf("form upload: HTTP %d %v", resp.StatusCode, resp.Header)
	}
	jobs, _ := library.Of(e.store).ImportJobs(t.Context(), e.member.ID)
	if len(jobs) != 1 {
		t.Fatalf("jobs: %+v", jobs)
	}
	waitImport(t, e.store, e.member.ID, jobs[0].ID)
	status, body = page(t, browser, http.MethodGet, srv.URL+importer.PagePath, nil)
	if status != http.StatusOK || !strings.Contains(body, "ril_export.html") || !strings.Contains(body, `<progress max="3" value="3">`) ||
		!strings.Contains(body, "3 new items") || !strings.Contains(body, "finished") {
		t.Fatalf("page after the import: HTTP %d\n%s", status, body)
	}
	resp = send([]byte("not an export at all"))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "not an export Hearth can read") || !strings.Contains(string(b), "<form") {
		t.Fatalf("refused upload from the page: HTTP %d\n%s", resp.StatusCode, b)
	}
}

// sendImportForm uploads file as the Import page's form does, from the
// member's browser.
func sendImportForm(t *testing.T, browser *http.Client, siteURL, name string, file []byte) *http.Response {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("from", "settings")
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(file)
	mw.WriteField("type", "")
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, siteURL+importer.UploadPath, &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A first import is often of one item: the page counts it, and the one
// label it brought, in the singular.
func TestImportPageSaysOneItemAndOneLabel(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	srv, browser := site(t, e)
	resp := sendImportForm(t, browser, srv.URL, "part_000000.csv",
		[]byte("title,url,time_added,cursor,tags,status\nBread,https://bakery.example/bread,1700000000,,baking,unread\n"))
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("form upload: HTTP %d", resp.StatusCode)
	}
	jobs, _ := library.Of(e.store).ImportJobs(t.Context(), e.member.ID)
	if len(jobs) != 1 {
		t.Fatalf("jobs: %+v", jobs)
	}
	waitImport(t, e.store, e.member.ID, jobs[0].ID)
	status, body := page(t, browser, http.MethodGet, srv.URL+importer.PagePath, nil)
	if status != http.StatusOK || !strings.Contains(body, "<li>1 new item</li>") || !strings.Contains(body, "(optional, 1 label)") ||
		strings.Contains(body, "1 new items") || strings.Contains(body, "1 labels") {
		t.Fatalf("page after a one-item import: HTTP %d\n%s", status, body)
	}
}

// Clients that poll see an import's progress with the Hearth-only
// importJobs query.
func TestImportJobsQueryShowsProgressAndFailures(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	file, _ := os.ReadFile("../importer/testdata/inboxt.csv")
	status, out := upload(t, e.srv.URL, e.token, "saved-items.csv", file, "CSV")
	if status != http.StatusCreated {
		t.Fatalf("HTTP %d %v", status, out)
	}
	waitImport(t, e.store, e.member.ID, out["jobId"].(string))
	var got struct {
		ImportJobs []struct {
			ID, Format, FileName, State            string
			Total, Done, Created, Existing, Failed int
			Failures                               []struct{ Entry, Reason string }
			FinishedAt                             *string
		}
	}
	e.do(`query { importJobs { id format fileName state total done created existing failed failures { entry reason } finishedAt } }`, nil, &got)
	if len(got.ImportJobs) != 1 {
		t.Fatalf("%+v", got)
	}
	j := got.ImportJobs[0]
	if j.ID != out["jobId"] || j.Format != "INBOXT_CSV" || j.FileName != "saved-items.csv" || j.State != "DONE" || j.Total != 3 ||
		j.Done != 3 || j.Created != 2 || j.Failed != 1 || len(j.Failures) != 1 || j.Failures[0].Entry != "row 3" ||
		!strings.Contains(j.Failures[0].Reason, "not a date") || j.FinishedAt == nil {
		t.Fatalf("%+v", j)
	}
	other, otherToken := e.newMember("bob")
	_ = other
	var none struct{ ImportJobs []struct{ ID string } }
	e.doAs(otherToken, `query { importJobs { id } }`, nil, &none)
	if len(none.ImportJobs) != 0 {
		t.Fatalf("bob sees alice's imports: %+v", none)
	}
}

// Items an export has no content for (Pocket's) are fetched through the
// safe fetcher, one at a time per host, and keep the title the export gave
// them when the fetch fails, with the reason as description.
func TestImportedItemsAreFetchedPolitelyAndFailuresKeepTheirTitle(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	para := strings.Repeat("Sourdough needs patience, warm water and a lively starter that doubles in size. ", 12)
	var mu sync.Mutex
	inFlight, most := 0, 0
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		time.Sleep(50 * time.Millisecond)
		if r.URL.Path == "/gone" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<html><head><title>Page %s</title></head><body><article><h1>Page %s</h1><p>%s</p><p>%s</p></article></body></html>`, r.URL.Path, r.URL.Path, para, para)
	}))
	t.Cleanup(site.Close)
	csv := "title,url,time_added,cursor,tags,status\n" +
		"First,%[1]s/one,1600000000,a,,unread\nSecond,%[1]s/two,1600000001,b,,unread\nThird,%[1]s/three,1600000002,c,,archive\nGone,%[1]s/gone,1600000003,d,,unread\n"
	status, out := upload(t, e.srv.URL, e.token, "part_000000.csv", []byte(fmt.Sprintf(csv, site.URL)), "POCKET")
	if status != http.StatusCreated {
		t.Fatalf("HTTP %d %v", status, out)
	}
	job := waitImport(t, e.store, e.member.ID, out["jobId"].(string))
	if job.Created != 4 || job.Fetching != 4 {
		t.Fatalf("job: %+v", job)
	}
	items := e.waitFetched()
	byURL := map[string]entry{}
	for _, it := range items {
		byURL[*it.OriginalURL] = it
	}
	if it := byURL[site.URL+"/three"]; it.Title != "Page /three" || it.Status != "ARCHIVED" || it.WordCount < 100 {
		t.Fatalf("fetched item: %+v", it)
	}
	if it := byURL[site.URL+"/gone"]; it.Title != "Gone" || !strings.Contains(*it.Description, "HTTP 404") {
		t.Fatalf("failed item: %+v", it)
	}
	// The import counts its fetches, and lists the one that failed.
	job, _ = library.Of(e.store).ImportJob(t.Context(), e.member.ID, job.ID)
	if job.Fetched != 3 || job.FetchFailed != 1 || len(job.Failures) != 1 || job.Failures[0].Ref != site.URL+"/gone" ||
		!strings.Contains(job.Failures[0].Reason, "HTTP 404") {
		t.Fatalf("job after the fetches: %+v", job)
	}
	var got struct {
		ImportJobs []struct{ Fetching, Fetched, FetchFailed int }
	}
	e.do(`query { importJobs { fetching fetched fetchFailed } }`, nil, &got)
	if len(got.ImportJobs) != 1 || got.ImportJobs[0].Fetching != 4 || got.ImportJobs[0].Fetched != 3 || got.ImportJobs[0].FetchFailed != 1 {
		t.Fatalf("importJobs: %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Fatalf("%d fetches of one host ran at once", most)
	}
}

// zipFixture zips a directory of ../importer/testdata.
func zipFixture(t *testing.T, dir string) []byte {
	t.Helper()
	root := filepath.Join("..", "importer", "testdata", dir)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		w, err := zw.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		w.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// Every fixture, uploaded as its service's export: what each keeps reaches
// the member's library, and malformed entries are reported, not fatal.
// (Readwise's highlights, which name their documents by title only, go to
// items already there: TestReadwiseHighlightsJoinTheArticlesOfReadersExport.)
func TestEveryFixtureImportsThroughTheAPI(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "importer", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name, format            string
		file                    []byte
		created, failed         int
		url, title, status, has string // one item to look at, and a label, highlight note or item note it has
	}{
		{"pocket.zip", "POCKET", zipFixture(t, "pocket"), 5, 1, "https://go.dev/doc/go1.26", "Go 1.26 Release Notes", "ACTIVE", "label:release notes"},
		{"pocket_2020.csv", "POCKET", read("pocket_2020.csv"), 3, 0, "https://www.reddit.com/r/DataHoarder/comments/ioupbk/archivebox_question_how_do_i_import_links_from_a/", "", "ARCHIVED", ""},
		{"ril_export.html", "POCKET_HTML", read("ril_export.html"), 3, 0, "https://www.lemonde.fr/pixels/article/2016/09/08/apple-iphone-7.html", "iPhone 7 : ce qu’il faut retenir", "ARCHIVED", "label:tech"},
		{"omnivore.zip", "OMNIVORE", zipFixture(t, "omnivore"), 3, 0, "https://www.lemonde.fr/economie/article/2024/10/29/malgre-la-crise-du-marche-des-montres-breitling-etend-son-reseau-commercial-et-devoile-ses-ambitions_6365425_3234.html", "", "ARCHIVED", "note:Worth following up"},
		{"wallabag.json", "WALLABAG", read("wallabag.json"), 2, 1, "https://www.mediapart.fr/", "", "ACTIVE", "note:to discuss"},
		{"instapaper.csv", "INSTAPAPER", read("instapaper.csv"), 4, 0, "https://redditblog.com/2016/09/20/amp-and-reactredux/", "AMP and React+Redux: Why Not?", "ARCHIVED", "label:javascript"},
		{"bookmarks.html", "BOOKMARKS", read("bookmarks.html"), 3, 1, "https://blog.golang.org/pipelines", "Go Concurrency Patterns: Pipelines and cancellation", "ACTIVE", "label:concurrency"},
		{"saved-items.csv", "INBOXT_CSV", read("inboxt.csv"), 2, 1, "https://example.org/bread", "Baking Bread", "ACTIVE", "label:weekend"},
		{"inboxt.zip", "INBOXT_ZIP", zipFixture(t, "inboxt"), 3, 2, "https://example.org/sourdough", "Sourdough starter basics", "ARCHIVED", "label:cooking"},
		{"raindrop.csv", "RAINDROP", read("raindrop.csv"), 4, 1, "https://example.org/levain", "Le pain au levain, pas à pas", "ACTIVE", "itemnote:Relire avant dimanche"},
		{"raindrop-highlight.csv", "RAINDROP", read("raindrop.csv"), 4, 1, "https://example.org/levain", "", "ACTIVE", "note:à vérifier"},
		{"raindrop-folder.csv", "RAINDROP", read("raindrop.csv"), 4, 1, "https://example.org/levain", "", "ACTIVE", "label:Cuisine/Pain"},
		{"readwise_reader.csv", "READWISE_READER", read("readwise_reader.csv"), 3, 1, "https://paulgraham.com/greatwork.html", "How to Do Great Work", "ACTIVE", "label:career"},
		{"readwise_reader-archive.csv", "READWISE_READER", read("readwise_reader.csv"), 3, 1, "https://example.org/quoted", `Quoted, with a "comma"`, "ARCHIVED", ""},
		{"matter.csv", "MATTER", read("matter.csv"), 2, 0, "https://jackcheng.com/the-slow-web", "The Slow Web", "ARCHIVED", "label:Starred"},
		{"goodlinks.json", "GOODLINKS", read("goodlinks.json"), 3, 1, "https://daringfireball.net/2024/01/vision_pro", "Vision Pro", "ARCHIVED", "label:Starred"},
		{"karakeep.json", "KARAKEEP", read("karakeep.json"), 2, 1, "https://antonz.org/sqlite-is-not-a-toy-database/", "SQLite is not a toy database", "ACTIVE", "itemnote:Read the WAL part again"},
		{"linkwarden.json", "LINKWARDEN", read("linkwarden.json"), 2, 1, "https://arxiv.org/abs/1706.03762", "Attention Is All You Need", "ACTIVE", "label:Research"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, options{NoImportFetch: true})
			status, out := upload(t, e.srv.URL, e.token, c.name, c.file, "")
			if status != http.StatusCreated || out["format"] != c.format {
				t.Fatalf("HTTP %d %v", status, out)
			}
			job := waitImport(t, e.store, e.member.ID, out["jobId"].(string))
			if job.State != library.ImportDone || job.Created != c.created || job.Failed != c.failed || len(job.Failures) != c.failed {
				t.Fatalf("job: %+v", job)
			}
			labels, _ := library.Of(e.store).Labels(t.Context(), e.member.ID)
			var found bool
			library.Of(e.store).ForEachSavedItem(t.Context(), e.member.ID, func(it *library.SavedItem, _ *library.ItemContent) error {
				if it.OriginalURL != c.url {
					return nil
				}
				found = true
				if c.title != "" && it.Title != c.title || it.Status != c.status || it.CreatedAt.After(time.Now().Add(-time.Hour)) {
					t.Errorf("item: %+v", it)
				}
				kind, want, _ := strings.Cut(c.has, ":")
				switch kind {
				case "label":
					ok := false
					for _, l := range labels {
						ok = ok || strings.EqualFold(l.Name, want) && slices.Contains(it.LabelIDs, l.ID)
					}
					if !ok {
						t.Errorf("no label %q on %+v (labels %+v)", want, it, labels)
					}
				case "note", "itemnote":
					// An item note is the item's one highlight without
					// segments; a highlight's note, one with.
					hs, _ := library.Of(e.store).ItemHighlights(t.Context(), e.member.ID, it.ID)
					ok, notes := false, 0
					for _, h := range hs {
						ok = ok || h.Note == want && h.IsNote() == (kind == "itemnote")
						if h.IsNote() {
							notes++
						}
					}
					if !ok || notes > 1 {
						t.Errorf("no %s %q (or %d item notes): %+v", kind, want, notes, hs)
					}
				}
				return nil
			})
			if !found {
				t.Fatalf("no item %s", c.url)
			}
			// The same file again changes nothing.
			before := snapshot(t, e.store, e.member.ID)
			status, out = upload(t, e.srv.URL, e.token, c.name, c.file, "")
			if status != http.StatusCreated {
				t.Fatalf("second upload: HTTP %d %v", status, out)
			}
			if job := waitImport(t, e.store, e.member.ID, out["jobId"].(string)); job.Created != 0 || job.Existing != c.created {
				t.Fatalf("second import: %+v", job)
			}
			if after := snapshot(t, e.store, e.member.ID); fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("a second import changed the library:\n%v\n%v", before, after)
			}
		})
	}
}

// While one upload of a member is being received, another is refused (a
// file is staged on disk before it is checked).
func TestOneUploadAtATimePerMember(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	pr, pw := io.Pipe()
	// A failure below must not leave the first upload's body open: the
	// server's shutdown would wait for it until the test binary times out.
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	mw := multipart.NewWriter(pw)
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+importer.UploadPath, pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+e.token)
	first := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	fw, _ := mw.CreateFormFile("file", "part_000000.csv")
	fw.Write([]byte("title,url,time_added,cursor,tags,status\n"))
	// The server is reading the first upload's file now.
	var status int
	var out map[string]any
	for deadline := time.Now().Add(time.Minute); ; {
		status, out = upload(t, e.srv.URL, e.token, "other.csv", []byte("url\nhttps://e.com/\n"), "")
		if status == http.StatusConflict || time.Now().After(deadline) {
			break
		}
		// The first request may not have reached the handler yet: that
		// upload then succeeded, and is tried again (five times a second
		// at most: a minute of tries stays under the token's rate limit).
		time.Sleep(200 * time.Millisecond)
	}
	if status != http.StatusConflict || !strings.Contains(fmt.Sprint(out["message"]), "another upload") {
		select {
		case got := <-first:
			t.Fatalf("second upload: HTTP %d %v (the first upload had already answered HTTP %d)", status, out, got)
		default:
		}
		t.Fatalf("second upload: HTTP %d %v", status, out)
	}
	fw.Write([]byte("A,https://example.com/a,1600000000,c,,unread\n"))
	mw.Close()
	pw.Close()
	if got := <-first; got != http.StatusCreated {
		t.Fatalf("first upload: HTTP %d", got)
	}
}

// A browser form refused before its body is read (here by its
// Content-Length) gets the Import page with the error, not JSON.
func TestImportPageShowsRefusalsBeforeTheBodyIsRead(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true, ImportLimits: importer.Limits{MaxUploadBytes: 1024}})
	srv, browser := site(t, e)
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("file", "big.csv")
	fw.Write(bytes.Repeat([]byte("x"), 3<<20))
	mw.WriteField("from", "settings")
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+importer.UploadPath, &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "larger than 1024 bytes") || !strings.Contains(string(body), `enctype="multipart/form-data"`) {
		t.Fatalf("HTTP %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
}

// Imports share the API's rate limits and answer 429 in Inboxt's REST
// shape, with Retry-After and the X-RateLimit headers GraphQL sends.
func TestImportIsRateLimitedInRESTShape(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: 1, MemberRateLimit: -1})
	post := func() (*http.Response, map[string]any) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		_ = mw.WriteField("type", "POCKET")
		mw.Close()
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+importer.UploadPath, &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, b := send(t, req)
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return resp, out
	}
	if resp, out := post(); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("first: %d %v %v", resp.StatusCode, resp.Header, out)
	}
	resp, out := post()
	if resp.StatusCode != http.StatusTooManyRequests || out["code"] != "TOO_MANY_REQUESTS" || out["status"] != float64(429) ||
		resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-RateLimit-Limit") != "1" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("second: %d %v %v", resp.StatusCode, resp.Header, out)
	}
	if msg, _ := out["message"].(string); msg != "too many requests; retry after "+resp.Header.Get("Retry-After")+" s" {
		t.Fatalf("message %q", msg)
	}
}

// An upload's form fields beside its file are few (type, labelIds up to
// library.MaxBatchIDs): a body of 100,000 fields is refused once it has
// more than that, not read to its end. Each field costs the multipart
// reader about 1.5 KB, so reading them all allocated 157 MiB (a body at
// the 256 MiB limit, ~3.5 GB). The allocations are counted, not timed.
func TestUploadWithTooManyFieldsIsRefusedBeforeItsEnd(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: -1, MemberRateLimit: -1})
	for _, c := range []struct{ field, want string }{
		{"labelIds", "too many labels"},
		{"note", "too many form fields"},
	} {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for range 100_000 {
			_ = mw.WriteField(c.field, "1")
		}
		fw, _ := mw.CreateFormFile("file", "pocket.csv")
		_, _ = fw.Write([]byte("url\nhttps://example.com/\n"))
		_ = mw.WriteField("type", "POCKET")
		mw.Close()
		req := httptest.NewRequest(http.MethodPost, importer.UploadPath, bytes.NewReader(body.Bytes()))
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+e.token)
		rec := httptest.NewRecorder()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		served(e.api).ServeHTTP(rec, req)
		runtime.ReadMemStats(&after)
		var out map[string]any
		if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out["message"] != c.want {
			t.Fatalf("%s: HTTP %d %s", c.field, rec.Code, rec.Body)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
			t.Errorf("%s: the refusal allocated %d bytes: it read every field", c.field, got)
		}
	}
	if jobs, err := library.Of(e.store).ImportJobs(t.Context(), e.member.ID); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after the refusals: %v %v", jobs, err)
	}
}

// A form another site makes a signed-in browser post to the import API is
// refused as the other settings pages' forms are (the API Tokens page's,
// here): the site's 403 page, not JSON, and nothing imported; with the
// page's multipart body or a plain urlencoded one. A script sending the
// member's cookie from another site (Accept */*) keeps the API's JSON
// refusal, and a token keeps working.
func TestCrossSiteImportFormGetsThePageRefusal(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	srv, browser := site(t, e)
	crossSite := func(path, contentType, accept string, body []byte) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", accept)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://elsewhere.example")
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	const pageAccept = "text/html,application/xhtml+xml,*/*;q=0.8"
	other, otherBody := crossSite(account.APITokensPath, "application/x-www-form-urlencoded", pageAccept, []byte("name=x"))
	const refusal = "This form was sent from another site, so it was refused."
	if other.StatusCode != http.StatusForbidden || !strings.Contains(otherBody, refusal) {
		t.Fatalf("the API Tokens page's refusal: HTTP %d\n%s", other.StatusCode, otherBody)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	mw.WriteField("from", "settings")
	fw, _ := mw.CreateFormFile("file", "part_000000.csv")
	fw.Write([]byte("title,url,time_added,cursor,tags,status\nBread,https://bakery.example/bread,1700000000,,baking,unread\n"))
	mw.Close()
	for name, c := range map[string]struct{ contentType, accept string }{
		"the page's form":       {mw.FormDataContentType(), pageAccept},
		"an urlencoded form":    {"application/x-www-form-urlencoded", "*/*"},
		"a form without Accept": {"text/plain", ""},
	} {
		resp, body := crossSite(importer.UploadPath, c.contentType, c.accept, form.Bytes())
		if resp.StatusCode != other.StatusCode || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(body, refusal) || !strings.Contains(body, "<title>Request refused") {
			t.Errorf("%s: HTTP %d %s\n%s", name, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	resp, body := crossSite(importer.UploadPath, mw.FormDataContentType(), "*/*", form.Bytes())
	var out map[string]any
	if resp.StatusCode != http.StatusForbidden || json.Unmarshal([]byte(body), &out) != nil || out["code"] != "FORBIDDEN" {
		t.Errorf("a script with the cookie: HTTP %d\n%s", resp.StatusCode, body)
	}
	if jobs, err := library.Of(e.store).ImportJobs(t.Context(), e.member.ID); err != nil || len(jobs) != 0 {
		t.Fatalf("cross-site posts started imports: %+v, %v", jobs, err)
	}
	if status, out := upload(t, e.srv.URL, e.token, "part_000000.csv", []byte("title,url,time_added,cursor,tags,status\nBread,https://bakery.example/bread,1700000000,,baking,unread\n"), ""); status != http.StatusCreated {
		t.Fatalf("with a token: HTTP %d %v", status, out)
	}
}
