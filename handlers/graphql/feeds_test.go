package graphql_test

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// feedsCall sends method to FeedsAPIPath with the env's API token.
func feedsCall(t *testing.T, e *env, method string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+graphql.FeedsAPIPath, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: HTTP %d %v %v", method, graphql.FeedsAPIPath, resp.StatusCode, out, err)
	}
	return out
}

// fetch GETs u without credentials, as a feed reader does.
func fetch(t *testing.T, u string) (int, string, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// feedparse runs Debian's python3-feedparser on a feed and returns what it
// read: bozo (a malformed feed), the feed's title and each entry's title,
// link and content.
func feedparse(t *testing.T, feed []byte) map[string]any {
	t.Helper()
	// Debian's interpreter, whatever python3 comes first on PATH.
	const script = `import feedparser, json, sys
d = feedparser.parse(sys.stdin.buffer.read())
print(json.dumps({"bozo": d.bozo, "bozo_exception": str(d.get("bozo_exception", "")), "version": d.version,
  "title": d.feed.get("title"),
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
	e := newEnv(t, graphql.Options{})
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
	if !strings.HasPrefix(atom, e.srv.URL+graphql.FeedPath+"fd_") || !strings.HasSuffix(atom, "/atom") {
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
	e := newEnv(t, graphql.Options{})
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
	e := newEnv(t, graphql.Options{})
	e.saveArticle(e.member.ID, 1, nil)
	srv, browser := site(t, e)
	pageURL := srv.URL + graphql.APITokensPath
	_, body := page(t, browser, http.MethodPost, pageURL, url.Values{"action": {"renew_feeds"}})
	m := regexp.MustCompile(`id="atom-url"[^>]*>([^<]+)<`).FindStringSubmatch(body)
	if m == nil || !strings.Contains(body, `id="opds-url"`) {
		t.Fatalf("no feed URLs shown: %s", body)
	}
	atom := html.UnescapeString(m[1])
	if status, _, b := fetch(t, atom); status != http.StatusOK || !strings.Contains(string(b), "Article 1") {
		t.Fatalf("%s: HTTP %d %.300s", atom, status, b)
	}
	secret := strings.TrimSuffix(strings.TrimPrefix(atom, srv.URL+graphql.FeedPath), "/atom")
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
