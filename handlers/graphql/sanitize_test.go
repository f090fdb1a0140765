package graphql_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// hostileHTML mixes what a reader needs (formatting, a link, an image, a
// table) with what must never reach a client that renders the content.
const hostileHTML = `<h2>Inside</h2>
<p onclick="alert('click')" style="position:fixed;top:0">Some <b>bold</b> and <em>slanted</em> words,
<a href="https://ok.example/more">a link</a>, <a href="javascript:alert('href')">a bad link</a>,
<a href="JaVaScRiPt:alert('mixed')">another</a>.</p>
<img src="https://img.example/photo.png" alt="A photo" onerror="alert('img')">
<table><tr><th>Flour</th><td>500 g</td></tr></table>
<script>alert('script')</script>
<iframe src="https://www.youtube.com/embed/abc"></iframe>
<iframe src="https://evil.example/frame"></iframe>
<form action="https://evil.example/steal"><input name="password"><button>Send</button></form>
<svg onload="alert('svg')"><circle r="1"></circle></svg>
<object data="https://evil.example/x.swf"></object>
<style>p { display: none }</style>`

// checkSanitized fails unless html kept the reader's content and lost
// every active or embedding part of hostileHTML.
func checkSanitized(t *testing.T, what, html string) {
	t.Helper()
	for _, want := range []string{"<b>bold</b>", "<em>slanted</em>", `<a href="https://ok.example/more" rel="nofollow">`,
		`src="https://img.example/photo.png"`, "<table>", "<td>500 g</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("%s lost %s:\n%s", what, want, html)
		}
	}
	lower := strings.ToLower(html)
	for _, bad := range []string{"<script", "alert(", "onclick", "onerror", "onload", "javascript:", "<iframe",
		"<form", "<input", "<button", "<svg", "<object", "<style", "style="} {
		if strings.Contains(lower, bad) {
			t.Errorf("%s kept %s:\n%s", what, bad, html)
		}
	}
}

func contentHTML(t *testing.T, e *env, id string) string {
	t.Helper()
	var one struct {
		SavedItem struct {
			Article    *struct{ ContentHTML string }
			Newsletter *struct{ ContentHTML string }
		}
	}
	e.do(savedItemQuery, map[string]any{"query": map[string]any{"id": id}}, &one)
	switch {
	case one.SavedItem.Article != nil:
		return one.SavedItem.Article.ContentHTML
	case one.SavedItem.Newsletter != nil:
		return one.SavedItem.Newsletter.ContentHTML
	}
	t.Fatalf("item %s has no content", id)
	return ""
}

func TestNewsletterHTMLIsSanitized(t *testing.T) {
	e := newEnv(t, options{})
	msg := "From: Tech Weekly <editor@techweekly.example>\r\nSubject: Hostile issue\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
		"<html><head><title>Hostile</title><style>body { color: red }</style></head><body>" + hostileHTML + "</body></html>\r\n"
	if status, body := postInbound(t, e, inboundURL(t, e), msg); status != http.StatusCreated {
		t.Fatalf("status %d: %s", status, body)
	}
	items := e.allEntries(map[string]any{"first": 10, "q": "type:newsletter"})
	if len(items) != 1 {
		t.Fatalf("%d newsletters", len(items))
	}
	checkSanitized(t, "newsletter", contentHTML(t, e, items[0].ID))
}

func TestNewsletterWhoseHTMLIsOnlyScriptFallsBackToItsText(t *testing.T) {
	e := newEnv(t, options{})
	msg := "From: a@news.example\r\nSubject: s\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/alternative; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nPlain words.\r\n" +
		"--b\r\nContent-Type: text/html\r\n\r\n<script>alert(1)</script>\r\n--b--\r\n"
	if status, body := postInbound(t, e, inboundURL(t, e), msg); status != http.StatusCreated {
		t.Fatalf("status %d: %s", status, body)
	}
	items := e.allEntries(map[string]any{"first": 10})
	if html := contentHTML(t, e, items[0].ID); html != "<p>Plain words.</p>\n" {
		t.Fatalf("contentHtml = %q", html)
	}
}

// articlePage is a page readability extracts hostileHTML from.
func articlePage() string {
	para := strings.Repeat("Rye bread needs a sour starter, patience and a hot oven with plenty of steam. ", 10)
	return fmt.Sprintf(`<!doctype html><html><head><title>Rye</title></head><body><article><h1>Rye</h1>
<p>%s</p>%s<p>%s</p></article></body></html>`, para, hostileHTML, para)
}

func TestArticleHTMLIsSanitized(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, articlePage())
	}))
	defer site.Close()

	t.Run("addArticleFromUrl", func(t *testing.T) {
		e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": site.URL + "/rye"}}, nil)
		e.waitFetched() // addArticleFromUrl fetches in the background
		items := e.allEntries(map[string]any{"first": 10, "q": "site:127.0.0.1"})
		if len(items) != 1 {
			t.Fatalf("%d items", len(items))
		}
		checkSanitized(t, "article from URL", contentHTML(t, e, items[0].ID))
	})
	t.Run("addArticleFromHtmlSnapshot", func(t *testing.T) {
		var out struct{ AddArticleFromHtmlSnapshot string }
		e.do(`mutation($data: AddArticleFromHtmlSnapshotInput!) { addArticleFromHtmlSnapshot(data: $data) }`,
			map[string]any{"data": map[string]any{"url": "https://bakery.example/rye", "html": articlePage()}}, &out)
		checkSanitized(t, "article from a snapshot", contentHTML(t, e, out.AddArticleFromHtmlSnapshot))
	})
}
