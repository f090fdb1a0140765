package graphql_test

import (
	"encoding/json"
	"encoding/xml"
	"html"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// feedsCall sends method to FeedsAPIPath with the env's API token.
func feedsCall(t *testing.T, e *env, method string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+export.FeedsAPIPath, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, b := send(t, req)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: HTTP %d %v %v", method, export.FeedsAPIPath, resp.StatusCode, out, err)
	}
	return out
}

// fetch GETs u without credentials, as a feed reader does.
func fetch(t *testing.T, u string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	resp, b := send(t, req)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// feedparse runs Debian's python3-feedparser on a feed and returns what it
// read: bozo (a malformed feed), the feed's title and links, and each
// entry's title, link and content.
func feedparse(t *testing.T, feed []byte) map[string]any {
	t.Helper()
	// Debian's interpreter, whatever python3 comes first on PATH.
	const script = `import feedparser, json, sys
d = feedparser.parse(sys.stdin.buffer.read())
print(json.dumps({"bozo": d.bozo, "bozo_exception": str(d.get("bozo_exception", "")), "version": d.version,
  "title": d.feed.get("title"),
  "links": [{"rel": l.get("rel"), "type": l.get("type"), "href": l.get("href")} for l in d.feed.get("links", [])],
  "entries": [{"title": e.get("title"), "link": e.get("link"), "id": e.get("id"),
    "content": [c.value for c in e.get("content", [])],
    "links": [{"rel": l.get("rel"), "type": l.get("type"), "href": l.get("href")} for l in e.get("links", [])]} for e in d.entries]}))`
	cmd := exec.Command("/usr/bin/python3", "-c", script)
	cmd.Stdin = strings.NewReader(string(feed))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("feedparser (apt-get install python3-feedparser; .ci/run installs it): %v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return got
}

// A member makes a feed secret; the Atom feed of their inbox and of a
// label, fetched without credentials, is read by feedparser without
// error, with each item's title, link and full content. Renewing the
// secret stops the old URL, revoking stops the new one, and GET tells
// only when it was made.
func TestAtomFeedReadByFeedparserAndRevocable(t *testing.T) {
	e := newEnv(t, options{})
	ctx := t.Context()
	e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title = "Bread & <Butter> — ünïcode"
		in.HTML = `<p>Knead the dough <em>well</em> &amp; rest it.</p>`
	})
	tagged := e.saveArticle(e.member.ID, 2, nil)
	lb, err := library.Of(e.store).CreateLabel(ctx, e.member.ID, "Baking", "#112233")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).SetItemLabels(ctx, e.member.ID, []string{tagged.ID}, library.LabelChange{Add: []string{lb.ID}}); err != nil {
		t.Fatal(err)
	}

	if got := feedsCall(t, e, http.MethodGet); got["created_at"] != nil || got["atom"] != nil {
		t.Fatalf("before any secret: %v", got)
	}
	made := feedsCall(t, e, http.MethodPost)
	atom, _ := made["atom"].(string)
	if !strings.HasPrefix(atom, e.srv.URL+export.FeedPath+"fd_") || !strings.HasSuffix(atom, "/atom") {
		t.Fatalf("POST: %v", made)
	}
	if got := feedsCall(t, e, http.MethodGet); got["created_at"] == nil || got["atom"] != nil || got["secret"] != nil {
		t.Fatalf("GET shows the secret again or not its date: %v", got)
	}

	status, ct, b := fetch(t, atom)
	if status != http.StatusOK || ct != "application/atom+xml; charset=utf-8" {
		t.Fatalf("HTTP %d %s %.300s", status, ct, b)
	}
	got := feedparse(t, b)
	if got["bozo"] != false && got["bozo"] != float64(0) {
		t.Fatalf("feedparser: bozo: %v", got["bozo_exception"])
	}
	if got["version"] != "atom10" {
		t.Errorf("version %v", got["version"])
	}
	entries, _ := got["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("%d entries, want 2: %v", len(entries), got)
	}
	first, _ := entries[1].(map[string]any) // newest first
	if first["title"] != "Bread & <Butter> — ünïcode" || first["link"] != "https://example.com/a/1" {
		t.Errorf("entry: %v", first)
	}
	if c, _ := first["content"].([]any); len(c) != 1 || !strings.Contains(c[0].(string), "Knead the dough <em>well</em> &amp; rest it.") {
		t.Errorf("content: %v", first["content"])
	}

	status, _, b = fetch(t, atom+"?q="+url.QueryEscape("label:Baking"))
	got = feedparse(t, b)
	if entries, _ := got["entries"].([]any); status != http.StatusOK || len(entries) != 1 || entries[0].(map[string]any)["title"] != "Article 2" {
		t.Fatalf("label feed: HTTP %d %v", status, got)
	}
	if status, _, b := fetch(t, atom+"?q="+url.QueryEscape("type:highlights")); status != http.StatusBadRequest {
		t.Errorf("a highlights search: HTTP %d %s", status, b)
	}

	renewed, _ := feedsCall(t, e, http.MethodPost)["atom"].(string)
	if status, _, b := fetch(t, atom); status != http.StatusNotFound || strings.Contains(string(b), "fd_") {
		t.Errorf("old URL after renewal: HTTP %d %s", status, b)
	}
	if status, _, _ := fetch(t, renewed); status != http.StatusOK {
		t.Errorf("renewed URL: HTTP %d", status)
	}
	feedsCall(t, e, http.MethodDelete)
	if status, _, _ := fetch(t, renewed); status != http.StatusNotFound {
		t.Errorf("revoked URL: HTTP %d", status)
	}
	if got := feedsCall(t, e, http.MethodGet); got["created_at"] != nil {
		t.Errorf("after revoking: %v", got)
	}
}

// The OPDS catalog lists the member's views, labels and saved searches;
// each leads to an acquisition feed whose links (the whole search, each
// item) are books that pass epubcheck. feedparser reads both feeds
// without error.
func TestOPDSCatalogLeadsToBooksThatPassEpubcheck(t *testing.T) {
	e := newEnv(t, options{})
	ctx := t.Context()
	a := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) { in.Title = "Ferns & mosses" })
	e.saveArticle(e.member.ID, 2, nil)
	lb, err := library.Of(e.store).CreateLabel(ctx, e.member.ID, "Green things", "#112233")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).SetItemLabels(ctx, e.member.ID, []string{a.ID}, library.LabelChange{Add: []string{lb.ID}}); err != nil {
		t.Fatal(err)
	}
	opds, _ := feedsCall(t, e, http.MethodPost)["opds"].(string)
	status, ct, b := fetch(t, opds)
	if status != http.StatusOK || ct != "application/atom+xml;profile=opds-catalog;kind=navigation" {
		t.Fatalf("HTTP %d %s %.300s", status, ct, b)
	}
	nav := feedparse(t, b)
	if nav["bozo"] != false {
		t.Fatalf("navigation feed: bozo: %v", nav["bozo_exception"])
	}
	var labelFeed string
	for _, x := range nav["entries"].([]any) {
		en := x.(map[string]any)
		if en["title"] == "Label: Green things" {
			l := en["links"].([]any)[0].(map[string]any)
			if l["rel"] != "subsection" || l["type"] != "application/atom+xml;profile=opds-catalog;kind=acquisition" {
				t.Errorf("link %v", l)
			}
			labelFeed, _ = l["href"].(string)
		}
	}
	if labelFeed == "" {
		t.Fatalf("no entry for the label: %v", nav["entries"])
	}
	status, ct, b = fetch(t, labelFeed)
	if status != http.StatusOK || ct != "application/atom+xml;profile=opds-catalog;kind=acquisition" {
		t.Fatalf("HTTP %d %s %.300s", status, ct, b)
	}
	acq := feedparse(t, b)
	entries, _ := acq["entries"].([]any)
	if acq["bozo"] != false || len(entries) != 2 {
		t.Fatalf("acquisition feed (the search, then its one item): %v", acq)
	}
	for i, x := range entries {
		en := x.(map[string]any)
		l := en["links"].([]any)[0].(map[string]any)
		if l["rel"] != "http://opds-spec.org/acquisition" || l["type"] != "application/epub+zip" {
			t.Fatalf("entry %d: link %v", i, l)
		}
		status, ct, book := fetch(t, l["href"].(string))
		if status != http.StatusOK || ct != "application/epub+zip" {
			t.Fatalf("entry %d: HTTP %d %s %.300s", i, status, ct, book)
		}
		epubcheck(t, book)
		if !strings.Contains(strings.Join(mapValues(epubFiles(t, book)), ""), "Ferns &amp; mosses") {
			t.Errorf("entry %d: the book lacks the item", i)
		}
	}
	if entries[1].(map[string]any)["title"] != "Ferns & mosses" {
		t.Errorf("item entry: %v", entries[1])
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// The settings page makes the feed URLs and shows them once (the Atom URL
// then serves the inbox), tells when they were made afterwards without
// them, and turns them off.
func TestSettingsPageMakesShowsOnceAndRevokesFeedURLs(t *testing.T) {
	e := newEnv(t, options{})
	e.saveArticle(e.member.ID, 1, nil)
	srv, browser := site(t, e)
	pageURL := srv.URL + account.APITokensPath
	_, body := page(t, browser, http.MethodPost, pageURL, url.Values{"action": {"renew_feeds"}})
	m := regexp.MustCompile(`id="atom-url"[^>]*>([^<]+)<`).FindStringSubmatch(body)
	if m == nil || !strings.Contains(body, `id="opds-url"`) {
		t.Fatalf("no feed URLs shown: %s", body)
	}
	atom := html.UnescapeString(m[1])
	if status, _, b := fetch(t, atom); status != http.StatusOK || !strings.Contains(string(b), "Article 1") {
		t.Fatalf("%s: HTTP %d %.300s", atom, status, b)
	}
	secret := strings.TrimSuffix(strings.TrimPrefix(atom, srv.URL+export.FeedPath), "/atom")
	_, body = page(t, browser, http.MethodGet, pageURL, nil)
	if strings.Contains(body, secret) || !strings.Contains(body, "Your feed URLs were created") {
		t.Fatalf("the page again: %s", body)
	}
	_, body = page(t, browser, http.MethodPost, pageURL, url.Values{"action": {"revoke_feeds"}})
	if !strings.Contains(body, "no longer work") || !strings.Contains(body, "You have no feed URLs yet.") {
		t.Fatalf("after turning off: %s", body)
	}
	if status, _, _ := fetch(t, atom); status != http.StatusNotFound {
		t.Errorf("revoked URL: HTTP %d", status)
	}
}

// feedLink is the href of the feed-level link rel that feedparser read.
func feedLink(got map[string]any, rel string) string {
	links, _ := got["links"].([]any)
	for _, x := range links {
		if l := x.(map[string]any); l["rel"] == rel {
			h, _ := l["href"].(string)
			return h
		}
	}
	return ""
}

// notBozo fails unless feedparser read the feed without error.
func notBozo(t *testing.T, got map[string]any, what string) {
	t.Helper()
	if got["bozo"] != false && got["bozo"] != float64(0) {
		t.Fatalf("%s: feedparser: bozo: %v", what, got["bozo_exception"])
	}
}

// A feed longer than a page is read to its end by following the next
// links (RFC 5005 section 3) as feedparser gives them: every item once,
// pages of at most 50, the last without a next link. A cursor that is
// not one is a 400.
func TestAtomFeedPagesByNextLinks(t *testing.T) {
	e := newEnv(t, options{})
	const n = 120
	for i := 1; i <= n; i++ {
		e.saveArticle(e.member.ID, i, nil)
	}
	atom, _ := feedsCall(t, e, http.MethodPost)["atom"].(string)
	seen := map[string]bool{}
	pages := 0
	for u := atom; u != ""; pages++ {
		if pages > 5 {
			t.Fatalf("more pages than %d items make", n)
		}
		status, _, b := fetch(t, u)
		if status != http.StatusOK {
			t.Fatalf("page %d: HTTP %d %s", pages+1, status, b)
		}
		got := feedparse(t, b)
		notBozo(t, got, "page")
		entries, _ := got["entries"].([]any)
		if len(entries) == 0 || len(entries) > 50 {
			t.Fatalf("page %d: %d entries", pages+1, len(entries))
		}
		for _, x := range entries {
			id, _ := x.(map[string]any)["id"].(string)
			if seen[id] {
				t.Fatalf("page %d repeats %s", pages+1, id)
			}
			seen[id] = true
		}
		if feedLink(got, "first") != atom || feedLink(got, "self") != u {
			t.Errorf("page %d: links %v", pages+1, got["links"])
		}
		u = feedLink(got, "next")
	}
	if len(seen) != n || pages != 3 {
		t.Fatalf("%d items in %d pages, want %d in 3", len(seen), pages, n)
	}
	if status, _, b := fetch(t, atom+"?after=not-a-cursor"); status != http.StatusBadRequest || strings.Contains(string(b), "/fd_") {
		t.Errorf("a bad cursor: HTTP %d %s", status, b)
	}
}

// Labels whose names the search syntax cannot spell (a comma, a quote,
// markup) have their own entries in the OPDS catalog, which stays a feed
// feedparser and encoding/xml read; each leads to the books of that label
// only, in one book that passes epubcheck; the Atom feed takes ?label= too.
func TestOPDSLabelsWithCommasAndQuotes(t *testing.T) {
	e := newEnv(t, options{})
	ctx := t.Context()
	names := []string{"Salt, pepper", `Say "cheese" & <smile>`, "Plain"}
	for i, name := range names {
		it := e.saveArticle(e.member.ID, i+1, func(in *library.NewItem) { in.Title = "Item of " + name })
		lb, err := library.Of(e.store).CreateLabel(ctx, e.member.ID, name, "#112233")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := library.Of(e.store).SetItemLabels(ctx, e.member.ID, []string{it.ID}, library.LabelChange{Add: []string{lb.ID}}); err != nil {
			t.Fatal(err)
		}
	}
	made := feedsCall(t, e, http.MethodPost)
	opds, _ := made["opds"].(string)
	_, _, b := fetch(t, opds)
	if err := xml.Unmarshal(b, new(struct{ XMLName xml.Name })); err != nil {
		t.Fatalf("navigation feed is not XML: %v\n%s", err, b)
	}
	nav := feedparse(t, b)
	notBozo(t, nav, "navigation feed")
	links := map[string]string{}
	for _, x := range nav["entries"].([]any) {
		en := x.(map[string]any)
		title, _ := en["title"].(string)
		links[title], _ = en["links"].([]any)[0].(map[string]any)["href"].(string)
	}
	for _, name := range names {
		href := links["Label: "+name]
		if href == "" {
			t.Fatalf("no entry for %q: %v", name, links)
		}
		_, _, b := fetch(t, href)
		if err := xml.Unmarshal(b, new(struct{ XMLName xml.Name })); err != nil {
			t.Fatalf("%q: acquisition feed is not XML: %v", name, err)
		}
		acq := feedparse(t, b)
		notBozo(t, acq, name)
		entries, _ := acq["entries"].([]any)
		if len(entries) != 2 || entries[1].(map[string]any)["title"] != "Item of "+name {
			t.Fatalf("%q: want the whole search then its one item: %v", name, entries)
		}
		if name == names[0] {
			book := entries[0].(map[string]any)["links"].([]any)[0].(map[string]any)["href"].(string)
			status, _, epub := fetch(t, book)
			if status != http.StatusOK {
				t.Fatalf("%q: book: HTTP %d %s", name, status, epub)
			}
			epubcheck(t, epub)
			text := strings.Join(mapValues(epubFiles(t, epub)), "")
			if !strings.Contains(text, "Item of Salt, pepper") || strings.Contains(text, "Item of Plain") {
				t.Errorf("%q: the book has other labels' items", name)
			}
		}
	}
	atom, _ := made["atom"].(string)
	_, _, b = fetch(t, atom+"?label="+url.QueryEscape(names[1]))
	got := feedparse(t, b)
	notBozo(t, got, "label feed")
	if entries, _ := got["entries"].([]any); len(entries) != 1 || entries[0].(map[string]any)["title"] != "Item of "+names[1] {
		t.Fatalf("label feed: %v", got)
	}
	// A name of the longest a label's can be, asked for decomposed (NFD:
	// three times as many characters), is the label's.
	long := strings.Repeat("한", library.MaxLabelNameLen)
	it := e.saveArticle(e.member.ID, 9, func(in *library.NewItem) { in.Title = "Item of the long name" })
	lb, err := library.Of(e.store).CreateLabel(ctx, e.member.ID, long, "#112233")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(e.store).SetItemLabels(ctx, e.member.ID, []string{it.ID}, library.LabelChange{Add: []string{lb.ID}}); err != nil {
		t.Fatal(err)
	}
	status, _, b := fetch(t, atom+"?label="+url.QueryEscape(norm.NFD.String(long)))
	got = feedparse(t, b)
	if entries, _ := got["entries"].([]any); status != http.StatusOK || len(entries) != 1 || entries[0].(map[string]any)["title"] != "Item of the long name" {
		t.Fatalf("label feed of a long name spelled decomposed: HTTP %d %v", status, got)
	}
}

// No error under a feed URL names its secret, the URL's only credential:
// not a bad search, an unknown item, an unknown feed, a bad cursor, nor a
// refused method.
func TestFeedErrorsNeverShowTheSecret(t *testing.T) {
	e := newEnv(t, options{})
	atom, _ := feedsCall(t, e, http.MethodPost)["atom"].(string)
	base := strings.TrimSuffix(atom, "/atom")
	secret := base[strings.LastIndex(base, "/")+1:]
	for _, c := range []struct {
		method, u string
		status    int
	}{
		{http.MethodGet, base + "/epub?id=999999", http.StatusNotFound},
		{http.MethodGet, base + "/epub?id=1&q=x", http.StatusBadRequest},
		{http.MethodGet, base + "/epub?q=" + url.QueryEscape("type:highlights"), http.StatusBadRequest},
		{http.MethodGet, base + "/opds?q=" + url.QueryEscape("saved:nonsense"), http.StatusBadRequest},
		{http.MethodGet, base + "/atom?after=zzz", http.StatusBadRequest},
		// No label's name is that long: refused, not echoed in a feed
		// whose title, id and links each repeat it.
		{http.MethodGet, base + "/atom?label=" + strings.Repeat("%25", 100000), http.StatusBadRequest},
		{http.MethodGet, base + "/opds?label=" + strings.Repeat("%25", 100000), http.StatusBadRequest},
		{http.MethodGet, base + "/epub?label=" + strings.Repeat("%25", 100000), http.StatusBadRequest},
		{http.MethodGet, base + "/atom?label=%FF", http.StatusBadRequest},
		{http.MethodGet, base + "/nothing", http.StatusNotFound},
		{http.MethodPost, base + "/epub", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(c.method, c.u, nil)
		resp, b := send(t, req)
		var body map[string]any
		if resp.StatusCode != c.status || json.Unmarshal(b, &body) != nil || strings.Contains(string(b), secret) {
			t.Errorf("%s %s: HTTP %d %s", c.method, strings.ReplaceAll(c.u, secret, "SECRET"), resp.StatusCode, b)
		}
		if p, _ := body["path"].(string); !strings.HasPrefix(p, export.FeedPath+"SECRET/") {
			t.Errorf("path %q", p)
		}
	}
}

// Feed URLs are called without credentials (the secret in the path is
// one), so every request counts against its client address's tokenless
// budget (token_rate_limit), a guessed secret as a real one: past it the
// answer is 429 in Inboxt's REST shape with Retry-After, the secret not
// shown, and another address still reads the feed.
func TestFeedURLsCountAgainstTheClientAddress(t *testing.T) {
	var addr atomic.Value
	addr.Store("203.0.113.7")
	e := newEnv(t, options{TokenRateLimit: 3, MemberRateLimit: -1, ClientIP: func(*http.Request) string { return addr.Load().(string) }})
	atom, _ := feedsCall(t, e, http.MethodPost)["atom"].(string)
	secret := strings.TrimSuffix(atom[strings.LastIndex(atom, export.FeedPath)+len(export.FeedPath):], "/atom")
	guess := e.srv.URL + export.FeedPath + "fd_" + strings.Repeat("A", 43) + "/atom"
	for i, u := range []string{atom, guess, atom} {
		if status, _, b := fetch(t, u); status != []int{200, 404, 200}[i] {
			t.Fatalf("request %d: HTTP %d %s", i, status, b)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, atom, nil)
	resp, b := send(t, req)
	var out map[string]any
	if resp.StatusCode != http.StatusTooManyRequests || json.Unmarshal(b, &out) != nil || out["code"] != "TOO_MANY_REQUESTS" ||
		resp.Header.Get("Retry-After") == "" || strings.Contains(string(b), secret) {
		t.Fatalf("past the budget: HTTP %d %v %s", resp.StatusCode, resp.Header, b)
	}
	addr.Store("198.51.100.1")
	if status, _, b := fetch(t, atom); status != 200 {
		t.Fatalf("another address: HTTP %d %s", status, b)
	}
}

// A page of the Atom feed holds up to 50 items' full content (each up to
// library.MaxContentLen): it is written an entry at a time, each content
// read just before, so a request holds one item's content, not the
// page's. The client reads the start of a 50 MB page and stops: the
// server is then in the middle of it, and what it keeps alive is counted
// (the heap after a collection), not timed.
func TestAtomFeedHoldsOneContentAtATime(t *testing.T) {
	e := newEnv(t, options{})
	html := "<p>" + strings.Repeat("word ", 200_000) + "</p>" // 1 MB
	for i := 1; i <= 50; i++ {
		e.saveArticle(e.member.ID, i, func(in *library.NewItem) { in.HTML = html })
	}
	atom, _ := feedsCall(t, e, http.MethodPost)["atom"].(string)
	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err := http.Get(atom)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.CopyN(io.Discard, resp.Body, 4<<20); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d: %v", resp.StatusCode, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&during)
	if grown := int64(during.HeapAlloc) - int64(before.HeapAlloc); grown > 20<<20 {
		t.Fatalf("the heap grew by %d MiB in the middle of the feed: it holds the page's contents", grown>>20)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n < 40<<20 {
		t.Fatalf("the rest of the feed: %d bytes, %v", n, err)
	}
}
