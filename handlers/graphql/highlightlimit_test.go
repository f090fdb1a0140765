package graphql_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// limitedEnv is an env whose store's items hold at most count highlights
// (and the default bytes), set before the store opens.
func limitedEnv(t *testing.T, count int) *env {
	t.Helper()
	noSync := false
	st := storage.Prepare(t.TempDir(), storage.Options{SyncWrites: &noSync, GCInterval: -1})
	library.SetMaxItemHighlights(st, count, library.MaxItemHighlightBytes)
	if err := st.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	api := newAPI(st, options{NoImportFetch: true, Pages: account.New(st, account.Options{})})
	t.Cleanup(func() { api.Close() })
	srv := httptest.NewServer(served(api))
	t.Cleanup(srv.Close)
	e := &env{t: t, store: st, api: api, srv: srv}
	e.member, e.token = e.newMember("alice")
	return e
}

// A highlight past an item's limit is refused in each API's own way:
// Inboxt's createHighlight answers BAD_USER_INPUT with the limit in its
// details, Omnivore's a CreateHighlightError with BAD_DATA, for a
// highlight and for a new note alike; the item keeps the highlights it
// had.
func TestAHighlightPastTheItemsLimitIsRefusedInEachAPI(t *testing.T) {
	e := limitedEnv(t, 2)
	it := e.saveArticle(e.member.ID, 1, nil)
	seg := map[string]any{"xpath": "/p[1]", "startOffset": 0, "endOffset": 4, "text": "Body", "beforeText": "", "afterText": ""}
	for range 2 {
		e.do(createHighlightMutation, map[string]any{"data": map[string]any{"savedItemId": it.ID, "segments": []any{seg}}}, nil)
	}
	r := e.wantError(e.token, createHighlightMutation, map[string]any{"data": map[string]any{"savedItemId": it.ID, "segments": []any{seg}}}, 200, "BAD_USER_INPUT")
	if details := fmt.Sprint(r.Errors[0].Extensions["response"]); !strings.Contains(details, "an item holds at most 2 highlights") {
		t.Errorf("Inboxt's answer: %+v, want the limit in its details", r.Errors)
	}
	for name, input := range map[string]map[string]any{
		"highlight": {"id": "a", "shortId": "b", "type": "HIGHLIGHT", "articleId": it.ID, "quote": "Body"},
		"note":      {"id": "c", "shortId": "d", "type": "NOTE", "articleId": it.ID, "annotation": "a note"},
	} {
		c := e.omnivoreOK(e.token, extCreateHighlight, map[string]any{"input": input}).Data["createHighlight"]
		if c == nil || c.Highlight != nil || len(c.ErrorCodes) != 1 || c.ErrorCodes[0] != "BAD_DATA" {
			t.Errorf("Omnivore's createHighlight of a %s: %+v, want errorCodes [BAD_DATA]", name, c)
		}
	}
	hs, err := library.Of(e.store).ItemHighlights(t.Context(), e.member.ID, it.ID)
	if err != nil || len(hs) != 2 {
		t.Fatalf("the item's highlights: %d, %v; want 2", len(hs), err)
	}
}

// An import of a file with more highlights for an item than it holds
// imports the item with those that fit, and says so where the member
// looks: importJobs lists the entry with how many it did not keep and
// why, and the Import page counts it.
func TestAnImportReportsTheHighlightsPastTheItemsLimit(t *testing.T) {
	e := limitedEnv(t, 2)
	csv := "title,url,time_added,cursor,tags,status\r\nBook,https://example.com/book,1600000000,a,,unread\r\n"
	ann := `[{"url":"https://example.com/book","title":"Book","highlights":[{"quote":"one","created_at":1600000500},` +
		`{"quote":"two","created_at":1600000600},{"quote":"three","created_at":1600000700}]}]`
	status, out := upload(t, e.srv.URL, e.token, "pocket.zip", pocketZip(t, csv, ann), "")
	if status != http.StatusCreated || out["format"] != "POCKET" {
		t.Fatalf("HTTP %d %v", status, out)
	}
	job := waitImport(t, e.store, e.member.ID, out["jobId"].(string))
	if job.State != library.ImportDone || job.Created != 1 || job.Failed != 0 || job.HighlightsCut != 1 {
		t.Fatalf("job: %+v", job)
	}
	var got struct {
		ImportJobs []struct {
			Created, Failed int
			Failures        []struct{ Entry, Reason string }
		}
	}
	e.do(`query { importJobs { created failed failures { entry reason } } }`, nil, &got)
	if len(got.ImportJobs) != 1 || got.ImportJobs[0].Created != 1 || got.ImportJobs[0].Failed != 0 || len(got.ImportJobs[0].Failures) != 1 ||
		!strings.Contains(got.ImportJobs[0].Failures[0].Reason, "1 of its highlights were not imported: an item holds at most 2 highlights") {
		t.Errorf("importJobs: %+v", got)
	}
	srv, browser := site(t, e)
	if status, body := page(t, browser, http.MethodGet, srv.URL+importer.PagePath, nil); status != http.StatusOK ||
		!strings.Contains(body, "1 imported short of highlights their item had no room for") {
		t.Errorf("the Import page (HTTP %d):\n%s", status, body)
	}
	var n int
	library.Of(e.store).ForEachSavedItem(t.Context(), e.member.ID, func(it *library.SavedItem, _ *library.ItemContent) error {
		n = it.HighlightCount
		return nil
	})
	if n != 2 {
		t.Errorf("the item has %d highlights, want 2", n)
	}
}
