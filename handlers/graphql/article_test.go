package graphql_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
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
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := articleSite(t, "Baking Bread")
	e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": site.URL + "/bread"}}, nil)
	items := e.waitFetched()
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
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := articleSite(t, "Baking Bread")
	for i := 0; i < 2; i++ {
		e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": site.URL + "/bread"}}, nil)
		e.waitFetched()
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
	e := newEnv(t, options{}) // the default fetcher: public addresses only
	site := articleSite(t, "Internal")
	// An IP literal, and localhost (always this machine): refused at once,
	// with the Caddyfile option that lifts it named.
	for _, u := range []string{site.URL + "/bread", strings.Replace(site.URL, "127.0.0.1", "localhost", 1) + "/bread", "http://app.localhost/"} {
		r := e.wantError(e.token, addArticleMutation, map[string]any{"data": map[string]any{"url": u}}, 200, "BAD_USER_INPUT")
		if d := r.Errors[0].Detail(); !strings.Contains(d, "private") || !strings.Contains(d, "allow_private_addresses") {
			t.Fatalf("%s: error = %+v", u, r.Errors[0])
		}
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatal("something was stored")
	}
}

func TestAddArticleFromUrlErrors(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	for _, u := range []string{"ftp://example.com/x", "not a url", "http://user:pw@example.com/"} {
		t.Run(u, func(t *testing.T) {
			e.wantError(e.token, addArticleMutation, map[string]any{"data": map[string]any{"url": u}}, 200, "BAD_USER_INPUT")
		})
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 0 {
		t.Fatal("something was stored")
	}
}

// A page that cannot be saved is known only after the answer: the item is
// marked failed as Inboxt marks it (saved-item-manager.service.ts
// createFailedItem, Inboxt/inboxt@45f4314), with the reason to show.
func TestAddArticleFromUrlMarksTheItemFailedWithAReason(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	site := articleSite(t, "x")
	for _, c := range []struct{ path, reason string }{
		{"/missing", "the site answered with HTTP 404"},
		{"/data.json", "the URL is not an HTML page (it is application/json)"},
	} {
		e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": site.URL + c.path}}, nil)
		items := e.waitFetched()
		var it *entry
		for i := range items {
			if *items[i].OriginalURL == site.URL+c.path {
				it = &items[i]
			}
		}
		if it == nil || it.Title != "Failed to process: "+site.URL+c.path || it.Description == nil ||
			!strings.HasPrefix(*it.Description, "We couldn’t fetch this page") || !strings.Contains(*it.Description, c.reason) {
			t.Fatalf("%s: item = %+v", c.path, it)
		}
		var one struct {
			SavedItem struct{ Article struct{ ContentText string } }
		}
		e.do(savedItemQuery, map[string]any{"query": map[string]any{"id": it.ID}}, &one)
		if !strings.Contains(one.SavedItem.Article.ContentText, c.reason) {
			t.Fatalf("%s: content = %q", c.path, one.SavedItem.Article.ContentText)
		}
	}
}

// Saving again a URL whose fetch now fails keeps the article saved before.
func TestAddArticleFromUrlFailingAgainKeepsTheSavedArticle(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	var broken atomic.Bool
	site := articleSite(t, "Baking Bread")
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, site.URL+"/bread", http.StatusFound)
	}))
	t.Cleanup(flaky.Close)
	e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": flaky.URL + "/bread"}}, nil)
	if items := e.waitFetched(); len(items) != 1 || items[0].Title != "Baking Bread" {
		t.Fatalf("items = %+v", items)
	}
	broken.Store(true)
	e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": flaky.URL + "/bread"}}, nil)
	if items := e.waitFetched(); len(items) != 1 || items[0].Title != "Baking Bread" || !strings.Contains(*items[0].Description, "bake bread") {
		t.Fatalf("items = %+v", items)
	}
}

// The answer does not wait for the site, and a fetch cut short by a stop
// (the handler closed, the store closed) is done by the next start.
func TestAddArticleFromUrlSurvivesARestartMidFetch(t *testing.T) {
	arrived := make(chan struct{}, 10)
	release := make(chan struct{})
	page := "<html><head><title>Slow Bread</title></head><body><article><p>" + strings.Repeat("Knead the dough gently. ", 80) + "</p></article></body></html>"
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(site.Close)
	dir := t.TempDir()
	noSync := false
	open := func() (*storage.Store, *testAPI, *httptest.Server) {
		store, err := storage.Open(dir, storage.Options{SyncWrites: &noSync, GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		api := newAPI(store, options{Fetcher: localFetcher()})
		return store, api, httptest.NewServer(served(api))
	}
	store, api, srv := open()
	m, token := graphql.MemberForTest(t, store, "alice")
	e := &env{t: t, store: store, api: api, srv: srv, member: m, token: token}
	e.do(addArticleMutation, map[string]any{"data": map[string]any{"url": site.URL + "/slow"}}, nil)
	<-arrived // the fetch is under way, and held by the site
	items := e.allEntries(map[string]any{"first": 10})
	if len(items) != 1 || items[0].Title != "Processing item from "+site.URL+"/slow..." ||
		!strings.HasPrefix(*items[0].Description, "Your article from 127.0.0.1 is being prepared") {
		t.Fatalf("before the fetch: %+v", items)
	}
	id := items[0].ID
	// Stop mid-fetch.
	srv.Close()
	if err := api.Close(); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	// Start again: the pending fetch is done.
	store, api, srv = open()
	t.Cleanup(func() { srv.Close(); api.Close(); store.Close() })
	e.store, e.api, e.srv = store, api, srv
	items = e.waitFetched()
	if len(items) != 1 || items[0].ID != id || items[0].Title != "Slow Bread" || items[0].WordCount < 200 {
		t.Fatalf("after the restart: %+v", items)
	}
}

// waitFetched polls until the store has no fetch pending, and returns the
// entries then. The API is asked only then (and when giving up): a request
// every poll would run into the token's rate limit (600 a minute) when the
// fetch takes a while, as on a loaded machine under the race detector.
func (e *env) waitFetched() []entry {
	e.t.Helper()
	for i := 0; ; i++ {
		pending, err := library.Of(e.store).PendingFetches(context.Background(), 1, false, true)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(pending) == 0 {
			items := e.allEntries(map[string]any{"first": 100})
			for _, it := range items {
				if strings.HasPrefix(it.Title, "Processing item from ") {
					e.t.Fatalf("no fetch pending, but %s is still processing", it.ID)
				}
			}
			return items
		}
		if i > 6000 {
			e.t.Fatalf("items still processing after a minute: %+v", e.allEntries(map[string]any{"first": 100}))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two sites on one store with different fetch policies: a page queued by
// the site that may fetch private addresses is never fetched (and failed)
// by the stricter one, which starts first here.
func TestAStricterSiteLeavesOthersFetchesAlone(t *testing.T) {
	e := newEnv(t, options{}) // the strict default fetcher
	site := articleSite(t, "Baking Bread")
	if _, err := library.Of(e.store).QueueFetch(t.Context(), e.member.ID, library.NewItem{URL: site.URL + "/bread", Title: "Processing item from " + site.URL + "/bread..."}, true); err != nil {
		t.Fatal(err)
	}
	strict := newAPI(e.store, options{})
	t.Cleanup(func() { strict.Close() })
	open := newAPI(e.store, options{Fetcher: localFetcher()})
	t.Cleanup(func() { open.Close() })
	if items := e.waitFetched(); len(items) != 1 || items[0].Title != "Baking Bread" {
		t.Fatalf("items = %+v", items)
	}
}

// In Caddy the library service and the API are prepared on a store that
// is opened later (when the app starts): preparing reads nothing, and the
// store's Open starts the fetches an earlier process left pending.
func TestPendingFetchesBeginWhenStarted(t *testing.T) {
	site := articleSite(t, "Baking Bread")
	dir := t.TempDir()
	noSync := false
	opts := storage.Options{SyncWrites: &noSync, GCInterval: -1}
	st, err := storage.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	it, err := library.Of(st).QueueFetch(t.Context(), m.ID, library.NewItem{URL: site.URL + "/bread", Title: "Processing item from " + site.URL + "/bread..."}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// As in Caddy: Provision prepares the store, the library service and
	// the API without touching the disk; then the app opens the store.
	st = storage.Prepare(dir, opts)
	api := newAPI(st, options{Fetcher: localFetcher()})
	t.Cleanup(func() { api.Close(); st.Close() })
	if err := st.Open(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		got, err := library.Of(st).SavedItem(t.Context(), m.ID, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Title == "Baking Bread" {
			break
		}
		if i > 3000 {
			t.Fatalf("not fetched: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
