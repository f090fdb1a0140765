package reader_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Past an item's limits the reader answers the script's highlight with
// HTTP 400 and the limit as its error, and a longer note's form with the
// message page, also 400; the item keeps what it had.
func TestTheReaderRefusesAHighlightPastTheItemsLimits(t *testing.T) {
	noSync := false
	st := storage.Prepare(t.TempDir(), storage.Options{SyncWrites: &noSync, GCInterval: -1})
	library.SetMaxItemHighlights(st, 2, 200)
	if err := st.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newFixtureOn(t, st)
	it := f.save("Article", "site.example", 400, library.NewItem{})
	create := func(text string) (int, string, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"segments": []map[string]any{{"xpath": "/p[1]", "startOffset": 0, "endOffset": len(text), "text": text}}})
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/library/item/"+it.ID+"/highlights", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct{ ID, Error string }
		_ = json.NewDecoder(resp.Body).Decode(&got)
		return resp.StatusCode, got.ID, got.Error
	}
	count := func() int {
		t.Helper()
		hls, err := library.Of(f.store).ItemHighlights(t.Context(), f.member.ID, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := f.item(it.ID).HighlightCount; n != len(hls) {
			t.Fatalf("the item counts %d highlights and lists %d", n, len(hls))
		}
		return len(hls)
	}
	code, first, _ := create("First")
	if code != http.StatusOK {
		t.Fatalf("a first highlight: %d", code)
	}
	if code, _, msg := create(strings.Repeat("long ", 50)); code != http.StatusBadRequest || !strings.Contains(msg, "at most 200 bytes") {
		t.Fatalf("a highlight past the bytes: %d %q, want 400 and the limit", code, msg)
	}
	if code, _, _ := create("Second"); code != http.StatusOK {
		t.Fatalf("a second highlight: %d", code)
	}
	if code, _, msg := create("Third"); code != http.StatusBadRequest || !strings.Contains(msg, "at most 2 highlights") {
		t.Fatalf("a third highlight: %d %q, want 400 and the limit", code, msg)
	}
	if n := count(); n != 2 {
		t.Fatalf("the item has %d highlights, want 2", n)
	}
	resp := f.post("/library/highlight/"+first, url.Values{"action": {"note"}, "note": {strings.Repeat("n", 300)}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a note past the bytes: %d, want 400", resp.StatusCode)
	}
	if h, err := library.Of(f.store).Highlight(t.Context(), f.member.ID, first); err != nil || h.Note != "" {
		t.Fatalf("the highlight after a note past the bytes: %v %+v", err, h)
	}
}
