package graphql_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// getEPUB downloads a book with the env's API token.
func getEPUB(t *testing.T, e *env, query string) []byte {
	t.Helper()
	resp, b := e.get(export.EPUBPath + "?" + query)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/epub+zip" {
		t.Fatalf("%s: HTTP %d %.300s", query, resp.StatusCode, b)
	}
	return b
}

// epubcheck runs Debian's epubcheck (the W3C's EPUB checker) on book.
// Under -short (CI's race stage) it checks nothing: it spends its time
// in Java, where the race detector sees nothing, and the run without
// -short checks every book.
func epubcheck(t *testing.T, book []byte) {
	t.Helper()
	if testing.Short() {
		return
	}
	bin, err := exec.LookPath("epubcheck")
	if err != nil {
		t.Fatal("epubcheck is not installed (apt-get install epubcheck; .ci/run installs it)")
	}
	p := filepath.Join(t.TempDir(), "book.epub")
	os.WriteFile(p, book, 0o600)
	// Debian's /usr/bin/epubcheck is the jar itself (run through
	// binfmt_misc where it is set up): java runs it anywhere.
	out, err := exec.Command("java", "-jar", bin, "-q", p).CombinedOutput()
	if err != nil {
		t.Fatalf("epubcheck: %v\n%s", err, out)
	}
}

func epubFiles(t *testing.T, book []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(book), int64(len(book)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[f.Name] = string(b)
	}
	return files
}

// An EPUB of one item passes epubcheck, with its content cleaned to XHTML,
// links absolute, the highlighted passage marked and the highlights with
// their notes at the end, and a table of contents.
func TestEPUBOfOneItemPassesEpubcheck(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title = "Bread & <Butter>"
		in.HTML = `<div><h2>Method</h2><p>Knead the dough <em>well</em>, see <a href="/recipe">the recipe</a>.<br>Rest it.</p>` +
			`<ul> <li>flour</li> <li>water<p>then salt</p></li></ul><img src="https://example.com/x.png"><table><tr><td>a</td></tr></table>` +
			`<p>Bake it hot &amp; long.<span>` + "\x01" + `</span></p><script>alert(1)</script><custom-tag>kept text</custom-tag></div>`
	})
	if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, it.ID, []library.HighlightSegment{{
		XPath: "/div[1]/p[1]", StartOffset: 0, EndOffset: 15, Text: "Knead the dough"}}, "the key step"); err != nil {
		t.Fatal(err)
	}
	book := getEPUB(t, e, "id="+it.ID)
	epubcheck(t, book)
	files := epubFiles(t, book)
	ch := files["OEBPS/c0001.xhtml"]
	for _, want := range []string{"<h1>Bread &amp; &lt;Butter&gt;</h1>", "<mark>Knead the dough</mark>", `<a href="https://example.com/recipe">`,
		"<li>flour</li>", "kept text", "<h2>Highlights</h2>", "<p>the key step</p>"} {
		if !strings.Contains(ch, want) {
			t.Errorf("the chapter lacks %q:\n%s", want, ch)
		}
	}
	if strings.Contains(ch, "alert") || strings.Contains(ch, "<img") {
		t.Errorf("a script or remote image is in the chapter:\n%s", ch)
	}
	if !strings.Contains(files["OEBPS/nav.xhtml"], `<a href="c0001.xhtml">Bread &amp; &lt;Butter&gt;</a>`) {
		t.Errorf("nav: %s", files["OEBPS/nav.xhtml"])
	}
}

// A search's EPUB holds every item it finds (500 here) as chapters in the
// search's order, and passes epubcheck; an unknown id is 404, a bad query 400.
func TestEPUBOfASearchOf500ItemsPassesEpubcheck(t *testing.T) {
	e := newEnv(t, options{})
	for i := 1; i <= 500; i++ {
		e.saveArticle(e.member.ID, i, func(in *library.NewItem) {
			in.HTML = fmt.Sprintf("<p>Paragraph %d of a long library, with <strong>words</strong>.</p><p>Another paragraph.</p>", i)
		})
	}
	book := getEPUB(t, e, "q="+url.QueryEscape("in:inbox sort:saved-asc"))
	files := epubFiles(t, book)
	if !strings.Contains(files["OEBPS/c0001.xhtml"], "Paragraph 1 of") || !strings.Contains(files["OEBPS/c0500.xhtml"], "Paragraph 500 of") ||
		strings.Count(files["OEBPS/nav.xhtml"], "<li>") != 500 {
		t.Fatalf("chapters: %d files; first %.200s", len(files), files["OEBPS/c0001.xhtml"])
	}
	epubcheck(t, book)

	for q, want := range map[string]int{"id=nope": http.StatusNotFound, "q=" + url.QueryEscape("type:highlights"): http.StatusBadRequest} {
		resp, _ := e.get(export.EPUBPath + "?" + q)
		if resp.StatusCode != want {
			t.Errorf("%s: HTTP %d, want %d", q, resp.StatusCode, want)
		}
	}
}
