package graphql_test

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// The Markdown export of a corpus of articles (testdata/markdown/*.html,
// each saved at https://example.com/<name>) against the Markdown expected
// for each (*.md: the content section of its file). HEARTH_UPDATE_GOLDEN=1
// rewrites the expected files from what the export gives, to be read over.
func TestMarkdownExportOfACorpus(t *testing.T) {
	e := newEnv(t, options{})
	pages, _ := filepath.Glob(filepath.Join("testdata", "markdown", "*.html"))
	if len(pages) == 0 {
		t.Fatal("no corpus")
	}
	for i, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".html")
		e.saveArticle(e.member.ID, i, func(in *library.NewItem) {
			in.Title, in.URL, in.HTML = name, "https://example.com/"+name, string(b)
		})
	}
	resp, data := e.get(export.APIPath)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("HTTP %d, not a zip: %v", resp.StatusCode, err)
	}
	got := map[string]string{}
	for _, f := range zr.File {
		if !strings.HasPrefix(f.Name, "markdown/") {
			continue
		}
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		_, content, ok := strings.Cut(string(b), "## Content\n\n")
		if !ok {
			t.Fatalf("%s has no content section:\n%s", f.Name, b)
		}
		name := strings.TrimSuffix(f.Name[strings.Index(f.Name, "-")+1:], ".md")
		got[name] = content
	}
	for _, p := range pages {
		name := strings.TrimSuffix(filepath.Base(p), ".html")
		golden := strings.TrimSuffix(p, ".html") + ".md"
		if os.Getenv("HEARTH_UPDATE_GOLDEN") == "1" {
			os.WriteFile(golden, []byte(got[name]), 0o644)
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got[name] != string(want) {
			t.Errorf("%s: the export gives\n%s\nwant\n%s", name, got[name], want)
		}
	}
}
