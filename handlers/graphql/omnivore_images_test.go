package graphql_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/omnivore"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// omnivoreContents is the item's content as Omnivore's clients get it
// with the member's API key, in HTML and Markdown: from the search
// (@omnivore-app/api's, includeContent) and from the download links of
// POST /api/content (the note-taking plugins'), fetched without the key.
// It returns them by where they came from, and the download links.
func omnivoreContents(t *testing.T, e *env, itemID string) (map[string]string, []string) {
	t.Helper()
	out := map[string]string{}
	var links []string
	for _, format := range []string{omnivore.FormatHTML, omnivore.FormatMarkdown} {
		_, b := e.postBare("/api/graphql", e.token, map[string]any{"query": omnivoreSearch,
			"variables": map[string]any{"query": "in:all", "first": 10, "includeContent": true, "format": format}})
		var res struct {
			Data omnivoreSearchResult `json:"data"`
		}
		if err := json.Unmarshal(b, &res); err != nil || len(res.Data.Search.Edges) != 1 || res.Data.Search.Edges[0].Node.Content == nil {
			t.Fatalf("search as %s: %s", format, b)
		}
		out["search "+format] = *res.Data.Search.Edges[0].Node.Content
		_, b = e.postBare(omnivore.ContentPath, e.token, map[string]any{"libraryItemIds": []string{itemID}, "format": format})
		var made struct {
			Data []struct {
				DownloadURL string `json:"downloadUrl"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &made); err != nil || len(made.Data) != 1 {
			t.Fatalf("content as %s: %s", format, b)
		}
		status, _, body := fetch(t, made.Data[0].DownloadURL)
		if status != http.StatusOK {
			t.Fatalf("download as %s: HTTP %d %s", format, status, body)
		}
		out["download "+format] = string(body)
		links = append(links, made.Data[0].DownloadURL)
	}
	return out, links
}

// Omnivore's content (search and downloads, HTML and Markdown) shows an
// item's stored images at addresses on the site, each signed for one
// image with the API key the content was made for, which the note-taking
// plugins' notes load without credentials: the key is never in the
// content (it would read the whole library wherever the notes are synced),
// nor the stored images' origins or a tracking pixel; an image not stored
// keeps its address. An address answers only its own image, and stops
// when the key is deleted, as the download links do.
func TestOmnivoreContentShowsStoredImagesAtSignedAddresses(t *testing.T) {
	e := newEnv(t, options{})
	it, data := saveWithImages(t, e)
	other, theirs := anotherMembersImage(t, e)
	site := e.srv.URL
	addr := regexp.MustCompile(regexp.QuoteMeta(site) + `/api/feed/i/[^"\s)]+`)
	contents, links := omnivoreContents(t, e, it.ID)
	var srcs []string
	for where, content := range contents {
		got := addr.FindAllString(content, -1)
		if len(got) != len(data) || !strings.Contains(content, "https://cdn.example/missing.png") {
			t.Fatalf("%s: the images %q\n%s", where, got, content)
		}
		if strings.Contains(content, e.token) || strings.Contains(content, "cdn.example/a.png") || strings.Contains(content, "cdn.example/c.webp") ||
			strings.Contains(content, "photos.example/b.jpg") || strings.Contains(content, "t.example/p.gif") {
			t.Errorf("%s names the API key, a stored image's origin or a tracking pixel:\n%s", where, content)
		}
		if srcs == nil {
			srcs = got
		} else if strings.Join(got, " ") != strings.Join(srcs, " ") {
			t.Errorf("%s: the images %q, elsewhere %q", where, got, srcs)
		}
	}
	if !strings.Contains(contents["download markdown"], "![A square]("+srcs[0]+")") {
		t.Errorf("Markdown: %s", contents["download markdown"])
	}
	types := []string{"image/png", "image/jpeg", "image/webp"}
	for n, u := range srcs {
		resp, body := send(t, mustRequest(t, u))
		h := resp.Header
		if resp.StatusCode != http.StatusOK || string(body) != string(data[n]) || h.Get("Content-Type") != types[n] ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cross-Origin-Resource-Policy") != "cross-origin" {
			t.Fatalf("image %d: HTTP %d %v", n, resp.StatusCode, h)
		}
	}
	// Another image, item or member under a signature made for one image
	// of one item is none of them; so is a signature changed, or one of
	// an image the item does not have.
	parts := strings.Split(strings.TrimPrefix(srcs[0], site+"/api/feed/i/"), "/")
	if len(parts) != 5 {
		t.Fatalf("address %s", srcs[0])
	}
	mine, tokenID, sig := parts[0], parts[3], parts[4]
	key := apitokens.ImageKey{TokenID: tokenID, Digest: storage.Digest(e.token)}
	base := site + "/api/feed/i/"
	for _, u := range []string{
		base + mine + "/" + it.ID + "/1/" + tokenID + "/" + sig,
		base + other.ID + "/" + theirs.ID + "/0/" + tokenID + "/" + sig,
		base + other.ID + "/" + theirs.ID + "/0/" + tokenID + "/" + apitokens.ImageSignature(key, other.ID, theirs.ID, "0"),
		base + mine + "/" + theirs.ID + "/0/" + tokenID + "/" + apitokens.ImageSignature(key, mine, theirs.ID, "0"),
		base + mine + "/" + it.ID + "/0/" + tokenID + "/" + strings.ToUpper(sig),
		base + mine + "/" + it.ID + "/0/" + sig,
		base + mine + "/" + it.ID + "/0//" + sig,
		base + mine + "/" + it.ID + "/3/" + tokenID + "/" + apitokens.ImageSignature(key, mine, it.ID, "3"),
	} {
		if resp, body := send(t, mustRequest(t, u)); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: HTTP %d %s", u, resp.StatusCode, body)
		}
	}
	// The member deletes the key: its addresses and links end.
	err := apitokens.Of(e.store).Delete(t.Context(), e.member.ID, tokenID)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range append(srcs, links...) {
		if resp, _ := send(t, mustRequest(t, u)); resp.StatusCode != http.StatusNotFound {
			t.Errorf("after deleting the key, %s: HTTP %d", u, resp.StatusCode)
		}
	}
	// Revoking the member's access ends their keys, and so the addresses.
	if _, e.token, err = apitokens.Of(e.store).Create(t.Context(), e.member.ID, "another", 0); err != nil {
		t.Fatal(err)
	}
	contents, _ = omnivoreContents(t, e, it.ID)
	u := addr.FindString(contents["search markdown"])
	if resp, _ := send(t, mustRequest(t, u)); u == "" || resp.StatusCode != http.StatusOK {
		t.Fatalf("with another key, %q: HTTP %d", u, resp.StatusCode)
	}
	if _, _, err := members.Of(e.store).RevokeMemberAccess(t.Context(), e.member.ID); err != nil {
		t.Fatal(err)
	}
	if resp, _ := send(t, mustRequest(t, u)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after revoking the member's access: HTTP %d", resp.StatusCode)
	}
}

// A session (as an OAuth token) gets Omnivore's content with the stored
// images at the image route that takes its own credentials, which the
// content does not carry.
func TestOmnivoreContentForASessionShowsImagesAtTheImageRoute(t *testing.T) {
	e := newEnv(t, options{})
	it, data := saveWithImages(t, e)
	session := e.signIn(e.member)
	var res omnivoreSearchResult
	e.doAs(session, omnivoreSearch, map[string]any{"query": "in:all", "first": 10, "includeContent": true, "format": "markdown"}, &res)
	if len(res.Search.Edges) != 1 || res.Search.Edges[0].Node.Content == nil {
		t.Fatalf("search: %+v", res)
	}
	content := *res.Search.Edges[0].Node.Content
	for n := range data {
		if !strings.Contains(content, "("+e.srv.URL+"/api/images/"+it.ID+"/"+strconv.Itoa(n)+")") {
			t.Errorf("image %d: %s", n, content)
		}
	}
	if strings.Contains(content, "/api/feed/") || strings.Contains(content, "cdn.example/a.png") {
		t.Errorf("content: %s", content)
	}
}

// A signed image address's signature is its only credential, as a feed
// URL's secret is: an error it gets (here the answer to a POST) names the
// path without it, as a feed's errors name theirs without the secret.
func TestSignedImageAddressErrorsDoNotShowTheSignature(t *testing.T) {
	e := newEnv(t, options{})
	it, _ := saveWithImages(t, e)
	contents, _ := omnivoreContents(t, e, it.ID)
	u := regexp.MustCompile(regexp.QuoteMeta(e.srv.URL) + `/api/feed/i/[^"\s)]+`).FindString(contents["search html"])
	sig := u[strings.LastIndex(u, "/")+1:]
	if u == "" || len(sig) < 20 {
		t.Fatalf("no signed address in %s", contents["search html"])
	}
	req, err := http.NewRequest(http.MethodPost, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := send(t, req)
	if resp.StatusCode != http.StatusMethodNotAllowed || strings.Contains(string(body), sig) {
		t.Errorf("POST %s: HTTP %d %s", u, resp.StatusCode, body)
	}
}

// omnivoreArticle asks Omnivore's article for the item's content (its
// slug is the item's id).
const omnivoreArticle = `query($slug: String!) { article(username: "me", slug: $slug) {
  ... on ArticleSuccess { article { contentHtml contentText } }
  ... on ArticleError { errorCodes } } }`

// Omnivore's article answers the content its search does, the item's
// readableContent for both (Article.content and SearchItem.content in
// packages/api/src/resolvers/function_resolvers.ts,
// omnivore-app/omnivore@322ce62), so Hearth's article shows it as its
// search and savedItem do: without the tracking pixel, the stored images
// at addresses signed with the API key it is asked with (sent alone, as
// Omnivore's clients send it), which answer without credentials, or, for
// a session, at the image route's path, which takes the session's cookie.
func TestOmnivoreArticleShowsStoredImagesWithoutPixels(t *testing.T) {
	e := newEnv(t, options{})
	it, data := saveWithImages(t, e)
	vars := map[string]any{"slug": it.ID}
	_, b := e.postBare(graphql.OmnivorePath, e.token, map[string]any{"query": omnivoreArticle, "variables": vars})
	var res struct {
		Data struct {
			Article struct {
				Article *struct{ ContentHTML, ContentText string }
			}
		}
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Data.Article.Article == nil {
		t.Fatalf("article with the API key: %s", b)
	}
	c := res.Data.Article.Article.ContentHTML
	srcs := regexp.MustCompile(regexp.QuoteMeta(e.srv.URL)+`/api/feed/i/[^"\s]+`).FindAllString(c, -1)
	if len(srcs) != len(data) || strings.Contains(c, "t.example/p.gif") || strings.Contains(c, "cdn.example/a.png") ||
		strings.Contains(c, e.token) || !strings.Contains(c, "https://cdn.example/missing.png") {
		t.Fatalf("contentHtml for the API key: want %d signed image addresses, no pixel, no stored image's origin:\n%s", len(data), c)
	}
	for n, u := range srcs {
		resp, body := send(t, mustRequest(t, u))
		if resp.StatusCode != http.StatusOK || string(body) != string(data[n]) {
			t.Errorf("GET %s without credentials: HTTP %d", u, resp.StatusCode)
		}
	}
	var one struct {
		Article struct {
			Article struct{ ContentHTML string }
		}
	}
	e.doAs(e.signIn(e.member), omnivoreArticle, vars, &one)
	c = one.Article.Article.ContentHTML
	for n := range data {
		if !strings.Contains(c, `src="/api/images/`+it.ID+"/"+strconv.Itoa(n)+`"`) {
			t.Errorf("image %d for a session: %s", n, c)
		}
	}
	if strings.Contains(c, "/api/feed/") || strings.Contains(c, "t.example/p.gif") || strings.Contains(c, "cdn.example/a.png") {
		t.Errorf("contentHtml for a session: %s", c)
	}
}
