package graphql_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

func TestExportZipHasItemsHighlightsLabelsAndMarkdown(t *testing.T) {
	e := newEnv(t, options{})
	lbl, err := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Kitchen", "#ff0000")
	if err != nil {
		t.Fatal(err)
	}
	bread := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title, in.Text, in.HTML = "Baking Bread", "Knead the dough.", "<p>Knead the dough.</p>"
		in.LabelIDs = []string{lbl.ID}
	})
	e.saveArticle(e.member.ID, 2, nil)
	if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, bread.ID, []library.HighlightSegment{{
		XPath: "/p[1]", StartOffset: 0, EndOffset: 5, Text: "Knead"}}, "the key step"); err != nil {
		t.Fatal(err)
	}
	other, _ := e.newMember("bob")
	e.saveArticle(other.ID, 3, func(in *library.NewItem) { in.Title = "Bob's secret" })

	srv, browser := site(t, e)
	status, body := page(t, browser, http.MethodGet, srv.URL+export.PagePath, nil)
	if status != http.StatusOK || !strings.Contains(body, `href="`+export.FilePath+`"`) {
		t.Fatalf("export page: HTTP %d: %s", status, body)
	}
	// The page also leads to the library as a book, which the session
	// downloads, and to the feeds.
	if !strings.Contains(body, `href="`+export.EPUBPath+`"`) || !strings.Contains(body, `href="/settings/api_tokens#feeds"`) {
		t.Errorf("the export page does not lead to the EPUB and the feeds:\n%s", body)
	}
	if resp, err := browser.Get(srv.URL + export.EPUBPath); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/epub+zip" {
		t.Errorf("the page's EPUB link: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	resp, err := browser.Get(srv.URL + export.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/zip" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "hearth-export-alice-") {
		t.Fatalf("download: HTTP %d %v", resp.StatusCode, resp.Header)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[f.Name] = string(b)
	}
	var items []struct {
		Title       string   `json:"title"`
		Labels      []string `json:"labels"`
		ContentText string   `json:"content_text"`
		Highlights  []struct {
			Text, Note string
		} `json:"highlights"`
	}
	if err := json.Unmarshal([]byte(files["saved_items.json"]), &items); err != nil {
		t.Fatalf("saved_items.json: %v\n%s", err, files["saved_items.json"])
	}
	if len(items) != 2 {
		t.Fatalf("%d items exported, want alice's 2: %+v", len(items), items)
	}
	var got bool
	for _, it := range items {
		if it.Title == "Baking Bread" {
			got = len(it.Labels) == 1 && it.Labels[0] == "Kitchen" && it.ContentText == "Knead the dough." &&
				len(it.Highlights) == 1 && it.Highlights[0].Text == "Knead" && it.Highlights[0].Note == "the key step"
		}
	}
	if !got {
		t.Fatalf("Baking Bread exported as %+v", items)
	}
	var labels []struct{ Name string }
	if json.Unmarshal([]byte(files["labels.json"]), &labels) != nil || len(labels) != 1 || labels[0].Name != "Kitchen" {
		t.Fatalf("labels.json: %s", files["labels.json"])
	}
	var md string
	n := 0
	for name, content := range files {
		if strings.HasPrefix(name, "markdown/") {
			n++
			if strings.Contains(name, "baking-bread") {
				md = content
			}
		}
	}
	if n != 2 || !strings.Contains(md, `title: "Baking Bread"`) || !strings.Contains(md, "> Knead\n") ||
		!strings.Contains(md, "Note: the key step") || !strings.Contains(md, "labels: [\"Kitchen\"]") {
		t.Fatalf("%d Markdown files; baking-bread:\n%s", n, md)
	}
	for name, content := range files {
		if strings.Contains(content, "Bob's secret") {
			t.Fatalf("another member's item is in %s", name)
		}
	}
}

func TestExportNeedsSignIn(t *testing.T) {
	e := newEnv(t, options{})
	srv, _ := site(t, e)
	wantSignInFirst(t, srv.URL+export.FilePath)
}
