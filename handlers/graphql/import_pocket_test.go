package graphql_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// pocketZip is Pocket's export zip: the list as part_000000.csv and the
// highlights as annotations/part_000000.json (the layout of
// annotationsExportService.ts and S3Bucket.zipFilesByPrefix,
// Pocket/pocket-monorepo@fff0f693).
func pocketZip(t *testing.T, csv, annotations string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string]string{"part_000000.csv": csv, "annotations/part_000000.json": annotations} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	zw.Close()
	return buf.Bytes()
}

// Pocket's highlights land on their items: an import has no content, so
// they are kept as text at first, and placed in the article once its fetch
// brings it; a quote the article lacks stays a text-only highlight. A
// second import of the same file changes nothing.
func TestPocketHighlightsArePlacedOnceTheFetchBringsTheContent(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<html><head><title>Page %s</title></head><body><article><h1>Page %s</h1>
<p>Sourdough needs patience, warm water and a lively starter that doubles in size within hours of feeding.</p>
<p>Knead the dough until it is smooth, then let it rest overnight in a cool place, covered with a damp cloth.</p>
<p>Bake it hot: a preheated pot keeps the steam in and gives the loaf its crust, its colour and its rise.</p>
</article></body></html>`, r.URL.Path, r.URL.Path)
	}))
	t.Cleanup(site.Close)
	csv := fmt.Sprintf("title,url,time_added,cursor,tags,status\r\nBread,%[1]s/bread,1600000000,a,baking,unread\r\nOther,%[1]s/other,1600000001,b,,archive\r\n", site.URL)
	ann := fmt.Sprintf(`[{"url":"%[1]s/bread","title":"Bread","highlights":[{"quote":"let it rest overnight","created_at":1600000500},{"quote":"not in the article at all","created_at":1600000600}]},`+
		`{"url":"%[1]s/other","title":"Other","highlights":[{"quote":"a preheated pot keeps the steam in","created_at":1600000700}]}]`, site.URL)
	file := pocketZip(t, csv, ann)
	status, out := upload(t, e.srv.URL, e.token, "pocket.zip", file, "")
	if status != http.StatusCreated || out["format"] != "POCKET" {
		t.Fatalf("HTTP %d %v", status, out)
	}
	job := waitImport(t, e.store, e.member.ID, out["jobId"].(string))
	if job.State != library.ImportDone || job.Created != 2 || job.Failed != 0 {
		t.Fatalf("job: %+v", job)
	}
	e.waitFetched()
	byURL := map[string]*library.SavedItem{}
	library.Of(e.store).ForEachSavedItem(t.Context(), e.member.ID, func(it *library.SavedItem, _ *library.ItemContent) error {
		byURL[it.OriginalURL] = it
		return nil
	})
	bread, other := byURL[site.URL+"/bread"], byURL[site.URL+"/other"]
	if bread == nil || other == nil || bread.HighlightCount != 2 || other.HighlightCount != 1 {
		t.Fatalf("items: %+v", byURL)
	}
	// The quotes are placed just after the fetch is saved, in the content as
	// stored (the extracted article wrapped in a div).
	// quotes waits until no more than wantUnplaced of the item's quotes are
	// left at the root, since placing follows the fetch asynchronously (a
	// minute at most: a backstop for a loaded machine).
	quotes := func(it *library.SavedItem, wantUnplaced int) map[string]library.HighlightSegment {
		for deadline := time.Now().Add(time.Minute); ; {
			hs, err := library.Of(e.store).ItemHighlights(t.Context(), e.member.ID, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]library.HighlightSegment{}
			unplaced := 0
			for _, h := range hs {
				if len(h.Segments) != 1 {
					t.Fatalf("segments: %+v", h.Segments)
				}
				out[h.Segments[0].Text] = h.Segments[0]
				if h.Segments[0].XPath == "/" {
					unplaced++
				}
				if h.CreatedAt.Unix() < 1600000500 || h.CreatedAt.Unix() > 1600000700 {
					t.Fatalf("created_at not kept: %v", h.CreatedAt)
				}
			}
			if unplaced <= wantUnplaced || time.Now().After(deadline) {
				return out
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	got := quotes(bread, 1)
	if s := got["let it rest overnight"]; s.XPath != "/div[1]/article[1]/p[2]" || s.StartOffset != 41 || s.EndOffset != 62 {
		t.Errorf("placed quote: %+v", s)
	}
	if s := got["not in the article at all"]; s.XPath != "/" || s.StartOffset != 0 || s.EndOffset != 0 {
		t.Errorf("a quote not in the article: %+v (want it kept as text at the root)", s)
	}
	if s := quotes(other, 0)["a preheated pot keeps the steam in"]; s.XPath != "/div[1]/article[1]/p[3]" || s.StartOffset != 13 || s.EndOffset != 47 {
		t.Errorf("placed quote of an archived item: %+v", s)
	}

	before := snapshot(t, e.store, e.member.ID)
	status, out = upload(t, e.srv.URL, e.token, "pocket.zip", file, "")
	if status != http.StatusCreated {
		t.Fatalf("HTTP %d %v", status, out)
	}
	job = waitImport(t, e.store, e.member.ID, out["jobId"].(string))
	if job.Created != 0 || job.Existing != 2 {
		t.Fatalf("second import: %+v", job)
	}
	after := snapshot(t, e.store, e.member.ID)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("a second import changed the library:\n%v\n%v", before, after)
	}
}

// An annotation whose address no row of the list has becomes an item of
// its own, saved on the day of its earliest highlight (Pocket gives it no
// saved date), not on the day of the import.
func TestAnnotationOnlyPocketItemIsSavedWhenFirstHighlighted(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	csv := "title,url,time_added,cursor,tags,status\r\nListed,https://example.org/listed,1600000000,a,,unread\r\n"
	ann := `[{"url":"https://example.org/listed","title":"Listed","highlights":[{"quote":"a quote of the listed item","created_at":1500000000}]},` +
		`{"url":"https://example.org/hidden","title":"Hidden","highlights":[{"quote":"the later one","created_at":1610000000},{"quote":"the first one","created_at":1605000000}]}]`
	status, out := upload(t, e.srv.URL, e.token, "pocket.zip", pocketZip(t, csv, ann), "")
	if status != http.StatusCreated {
		t.Fatalf("HTTP %d %v", status, out)
	}
	if job := waitImport(t, e.store, e.member.ID, out["jobId"].(string)); job.State != library.ImportDone || job.Created != 2 {
		t.Fatalf("job: %+v", job)
	}
	saved := map[string]string{}
	for _, it := range e.allEntries(map[string]any{"first": 10}) {
		saved[it.Title] = it.CreatedAt
	}
	for title, sec := range map[string]int64{"Listed": 1600000000, "Hidden": 1605000000} {
		if got, err := time.Parse(time.RFC3339Nano, saved[title]); err != nil || !got.Equal(time.Unix(sec, 0)) {
			t.Errorf("%s is saved at %q, want %s", title, saved[title], time.Unix(sec, 0).UTC())
		}
	}
}

// Readwise's highlights CSV after its Reader CSV: the articles are there
// already, found by their titles (the highlights export gives no address),
// and get the highlights they lack; importing either again adds nothing.
func TestReadwiseHighlightsJoinTheArticlesOfReadersExport(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "importer", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	importFile := func(name string) *library.ImportJob {
		status, out := upload(t, e.srv.URL, e.token, name, read(name), "")
		if status != http.StatusCreated {
			t.Fatalf("%s: HTTP %d %v", name, status, out)
		}
		return waitImport(t, e.store, e.member.ID, out["jobId"].(string))
	}
	// Alone, it has nowhere to go: each document is reported, nothing made.
	if j := importFile("readwise.csv"); j.Created != 0 || j.Failed != 2 || !strings.Contains(j.Failures[0].Reason, `no article titled "How to Do Great Work"`) {
		t.Fatalf("highlights alone: %+v", j)
	}
	importFile("readwise_reader.csv")
	if j := importFile("readwise.csv"); j.Created != 0 || j.Existing != 1 || j.Failed != 1 {
		t.Fatalf("highlights: %+v", j)
	}
	notes := func() []string {
		var out []string
		library.Of(e.store).ForEachSavedItem(t.Context(), e.member.ID, func(it *library.SavedItem, _ *library.ItemContent) error {
			if it.OriginalURL != "https://paulgraham.com/greatwork.html" {
				return nil
			}
			hs, _ := library.Of(e.store).ItemHighlights(t.Context(), e.member.ID, it.ID)
			for _, h := range hs {
				out = append(out, h.Segments[0].Text+"|"+h.Note)
			}
			if it.HighlightCount != len(hs) {
				t.Errorf("highlightCount %d, %d highlights", it.HighlightCount, len(hs))
			}
			return nil
		})
		sort.Strings(out)
		return out
	}
	want := []string{"Curiosity is the key.|", "The way to figure out what to work on is by working.|Start small.\nThen iterate."}
	if got := notes(); !slices.Equal(got, want) {
		t.Fatalf("highlights: %q", got)
	}
	before := snapshot(t, e.store, e.member.ID)
	importFile("readwise.csv")
	importFile("readwise_reader.csv")
	if after := snapshot(t, e.store, e.member.ID); fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("importing again changed the library:\n%v\n%v", before, after)
	}
}
