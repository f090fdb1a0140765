package graphql_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
)

const addArticleMutation = `mutation AddArticleFromUrl($data: AddArticleFromUrlInput!) {
  addArticleFromUrl(data: $data) { success }
}`

const savedItemQuery = `query SavedItem($query: GetSavedItemInput!) {
  savedItem(query: $query) {
    id createdAt title originalUrl sourceDomain description leadImage wordCount author type status
    readingProgress readAt isReadManual
    labels { id createdAt name color order }
    article { contentHtml contentText }
    newsletter { contentHtml contentText subscription { id name } }
    highlights { id createdAt savedItemTitle savedItemOriginalUrl savedItem { id createdAt }
      segments { id xpath beforeText startOffset endOffset afterText text } }
  }
}`

// articleSite is a local web site serving one article page.
func articleSite(t *testing.T, title string) *httptest.Server {
	t.Helper()
	para := strings.Repeat("Sourdough needs patience, warm water and a lively starter that doubles in size. ", 12)
	page := fmt.Sprintf(`<!doctype html><html><head><meta charset="utf-8"><title>%s</title>
<meta name="author" content="Ada Baker">
<meta name="description" content="How to bake bread at home.">
<meta property="og:image" content="/img/loaf.jpg">
</head><body><nav>Home | About</nav><article><h1>%s</h1>
<p>%s</p><p>%s</p><p>%s</p></article><footer>© site</footer><script>alert(1)</script></body></html>`, title, title, para, para, para)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bread":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, page)
		case "/data.json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"a":1}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func localFetcher() *safefetch.Fetcher {
	return safefetch.New(safefetch.Options{AllowPrivate: true, FollowRedirects: true})
}

func TestAddArticleFromUrlFetchesAndExtractsTheArticle(t *testing.T) {
	e := newEnv(t, graphql.Options{Fetcher: localFetcher()})
	site := articleSite(t, "Baking Bread")
	e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": site.URL + "/bread"}}, nil)
	items := e.allEntries(map[string]any{"first": 10})
	if len(items) != 1 {
		t.Fatalf("%d items saved", len(items))
	}
	it := items[0]
	if it.Title != "Baking Bread" || *it.OriginalURL != site.URL+"/bread" || it.Type != "ARTICLE" || it.Status != "ACTIVE" {
		t.Fatalf("item = %+v", it)
	}
	if it.Author == nil || *it.Author != "Ada Baker" || it.Description == nil || *it.Description != "How to bake bread at home." {
		t.Fatalf("author %v description %v", it.Author, it.Description)
	}
	if it.LeadImage == nil || *it.LeadImage != site.URL+"/img/loaf.jpg" {
		t.Fatalf("leadImage = %v", it.LeadImage)
	}
	if it.WordCount < 300 {
		t.Fatalf("wordCount = %v", it.WordCount)
	}
	var one struct {
		SavedItem struct {
			Article    struct{ ContentHTML, ContentText string }
			Newsletter *struct{}
		}
	}
	e.do(savedItemQuery, map[string]any{"query": map[string]any{"id": it.ID}}, &one)
	a := one.SavedItem.Article
	if !strings.Contains(a.ContentText, "Sourdough needs patience") || strings.Contains(a.ContentHTML, "<script") ||
		strings.Contains(a.ContentText, "Home | About") || one.SavedItem.Newsletter != nil {
		t.Fatalf("article = %+v", one.SavedItem)
	}
}

func TestSavingTheSameUrlTwiceUpdatesTheItem(t *testing.T) {
	e := newEnv(t, graphql.Options{Fetcher: localFetcher()})
	site := articleSite(t, "Baking Bread")
	for i := 0; i < 2; i++ {
		e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": site.URL + "/bread"}}, nil)
	}
	// Also through a snapshot of the same page.
	var out struct {
		AddArticleFromHtmlSnapshot string `json:"addArticleFromHtmlSnapshot"`
	}
	e.do(`mutation AddArticleFromHtmlSnapshot($data: AddArticleFromHtmlSnapshotInput!) { addArticleFromHtmlSnapshot(data: $data) }`,
		map[string]any{"data": map[string]any{"url": site.URL + "/bread#section", "html": "<html><head><title>Snapshot title</title></head><body><article><p>" + strings.Repeat("word ", 200) + "</p></article></body></html>"}}, &out)
	items := e.allEntries(map[string]any{"first": 10})
	if len(items) != 1 || items[0].ID != out.AddArticleFromHtmlSnapshot || items[0].Title != "Snapshot title" {
		t.Fatalf("items = %+v, snapshot id %s", items, out.AddArticleFromHtmlSnapshot)
	}
}

func TestAddArticleFromUrlRefusesPrivateAddresses(t *testing.T) {
	e := newEnv(t, graphql.Options{}) // the default fetcher: public addresses only
	site := articleSite(t, "Internal")
	r := e.wantError(e.token, addArticleMutation, map[string]any{"data": map[string]any{"url": site.URL + "/bread"}}, 200, "BAD_USER_INPUT")
	if !strings.Contains(r.Errors[0].Detail(), "private") {
		t.Fatalf("error = %+v", r.Errors[0])
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatal("something was stored")
	}
}

func TestAddArticleFromUrlErrors(t *testing.T) {
	e := newEnv(t, graphql.Options{Fetcher: localFetcher()})
	site := articleSite(t, "x")
	for _, c := range []struct{ url, code string }{
		{"ftp://example.com/x", "BAD_USER_INPUT"},
		{"not a url", "BAD_USER_INPUT"},
		{site.URL + "/missing", "FETCH_FAILED"},
		{site.URL + "/data.json", "BAD_USER_INPUT"},
	} {
		t.Run(c.url, func(t *testing.T) {
			e.wantError(e.token, addArticleMutation, map[string]any{"data": map[string]any{"url": c.url}}, 200, c.code)
		})
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatal("something was stored")
	}
}
