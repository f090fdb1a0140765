package graphql_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/omnivore"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// pixelLetter is a newsletter's content with its sender's tracking pixels
// (1×1, 0×0, in px, in upper case) beside a picture it shows.
const pixelLetter = `<p>Hello<img src="https://tracker.example/open.gif" width="1" height="1"></p>` +
	`<p><IMG SRC="https://tracker.example/zero.gif" WIDTH="0" HEIGHT="0"/>` +
	`<img src="https://tracker.example/px.gif" width="1px" height="1px">` +
	`<img src="https://cdn.example/photo.jpg" alt="A photo" width="600" height="400"></p>`

// wantNoPixels fails unless got shows the photo and none of the pixels.
func wantNoPixels(t *testing.T, what, got string) {
	t.Helper()
	if strings.Contains(got, "tracker.example") || !strings.Contains(got, "https://cdn.example/photo.jpg") {
		t.Errorf("%s: want the photo and no tracking pixel:\n%s", what, got)
	}
}

// What a member's feed reader renders never fetches a newsletter's
// tracking pixels, as the reader page never does: the Atom feed's content
// leaves them out (feedparser still reads the feed) and keeps the rest.
func TestAtomFeedLeavesOutTrackingPixels(t *testing.T) {
	e := newEnv(t, options{})
	e.saveArticle(e.member.ID, 1, func(in *library.NewItem) { in.HTML = pixelLetter })
	atom, _ := feedsCall(t, e, http.MethodPost)["atom"].(string)
	status, _, b := fetch(t, atom)
	if status != http.StatusOK {
		t.Fatalf("HTTP %d %s", status, b)
	}
	got := feedparse(t, b)
	notBozo(t, got, "the feed")
	entries, _ := got["entries"].([]any)
	if len(entries) != 1 {
		t.Fatalf("%d entries: %v", len(entries), got)
	}
	c, _ := entries[0].(map[string]any)["content"].([]any)
	if len(c) != 1 {
		t.Fatalf("content: %v", entries[0])
	}
	wantNoPixels(t, "the feed's content", c[0].(string))
	if !strings.Contains(c[0].(string), "Hello") {
		t.Errorf("the feed's content lost its text: %s", c[0])
	}
}

// Omnivore's content, which the Obsidian and Logseq plugins write into
// notes that render it, leaves the tracking pixels out in every format:
// in search with includeContent and behind the content endpoint's links.
func TestOmnivoreContentLeavesOutTrackingPixels(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) { in.HTML = pixelLetter })
	for _, format := range []string{omnivore.FormatHTML, omnivore.FormatMarkdown, omnivore.FormatHighlightedMarkdown} {
		vars := map[string]any{"query": "in:all", "first": 10, "includeContent": true, "format": format}
		resp, body := e.postBare("/api/graphql", e.token, map[string]any{"query": omnivoreSearch, "variables": vars})
		var r struct {
			Data omnivoreSearchResult `json:"data"`
		}
		if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != http.StatusOK || len(r.Data.Search.Edges) != 1 ||
			r.Data.Search.Edges[0].Node.Content == nil {
			t.Fatalf("search as %s: HTTP %d %s", format, resp.StatusCode, body)
		}
		wantNoPixels(t, "search's "+format, *r.Data.Search.Edges[0].Node.Content)

		resp, b := e.postBare(omnivore.ContentPath, e.token, map[string]any{"libraryItemIds": []string{it.ID}, "format": format})
		var made struct {
			Data []struct {
				DownloadURL string `json:"downloadUrl"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &made); err != nil || resp.StatusCode != http.StatusOK || len(made.Data) != 1 {
			t.Fatalf("content as %s: HTTP %d %s", format, resp.StatusCode, b)
		}
		status, _, got := fetch(t, made.Data[0].DownloadURL)
		if status != http.StatusOK {
			t.Fatalf("download as %s: HTTP %d %s", format, status, got)
		}
		wantNoPixels(t, "the download as "+format, string(got))
	}
}
