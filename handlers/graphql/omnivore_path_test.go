package graphql_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// The operations of the browser extension's label list and "Add note",
// copied as it sends them (web-extensions/extension-v3/src/scripts/
// omnivore-api.ts, omnivore-app/omnivore@322ce62: updateLabelsCache,
// addNoteToLibraryItem), with Omnivore's shapes (packages/api/src/
// schema.ts there: labels, article, createHighlight, updateHighlight).
// Their root fields labels and createHighlight are Inboxt's at
// /api/graphql; the extension sends them to <API URL>/api/graphql.
const (
	extGetLabels = `query GetLabels {
      labels {
        ... on LabelsSuccess {
          labels {
            ...LabelFields
          }
        }
        ... on LabelsError {
          errorCodes
        }
      }
    }
    fragment LabelFields on Label {
      id
      name
      color
      description
      createdAt
    }
    `
	extGetArticle = `query GetArticle(
      $username: String!
      $slug: String!
      $includeFriendsHighlights: Boolean
    ) {
      article(username: $username, slug: $slug) {
        ... on ArticleSuccess {
          article {
            highlights(input: { includeFriends: $includeFriendsHighlights }) {
              ...HighlightFields
            }
          }
        }
        ... on ArticleError {
          errorCodes
        }
      }
    }
    fragment HighlightFields on Highlight {
      id
      type
      annotation
    }
    `
	extCreateHighlight = `
      mutation CreateHighlight($input: CreateHighlightInput!) {
        createHighlight(input: $input) {
          ... on CreateHighlightSuccess {
            highlight {
              id
            }
          }
          ... on CreateHighlightError {
            errorCodes
          }
        }
      }
    `
	extUpdateHighlight = `
      mutation UpdateHighlight($input: UpdateHighlightInput!) {
        updateHighlight(input: $input) {
          ... on UpdateHighlightSuccess {
            highlight {
              id
            }
          }
          ... on UpdateHighlightError {
            errorCodes
          }
        }
      }
    `
)

// omnivorePathAnswer is an answer at graphql.OmnivorePath, as the
// extension reads it: each root field's errorCodes, labels, highlight and
// article.
type omnivorePathAnswer struct {
	Status int
	Data   map[string]*struct {
		ErrorCodes      []string `json:"errorCodes"`
		ClientRequestID string   `json:"clientRequestId"`
		Labels          []struct {
			ID, Name, Color, CreatedAt string
			Description                *string
		} `json:"labels"`
		Highlight *struct{ ID string } `json:"highlight"`
		Article   *struct {
			Highlights []struct {
				ID, Type   string
				Annotation *string
			} `json:"highlights"`
		} `json:"article"`
	} `json:"data"`
	Errors []gqlError `json:"errors"`
}

// omnivore sends query and vars to graphql.OmnivorePath as the extension
// does (the key alone as Authorization, none for ""), and decodes the
// answer.
func (e *env) omnivore(auth, query string, vars map[string]any) omnivorePathAnswer {
	e.t.Helper()
	resp, body := e.postBare(graphql.OmnivorePath, auth, map[string]any{"query": query, "variables": vars})
	var a omnivorePathAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		e.t.Fatalf("answer: %d %s", resp.StatusCode, body)
	}
	a.Status = resp.StatusCode
	return a
}

// omnivoreOK is omnivore, failing unless the answer has data and no error
// (the extension reads data only).
func (e *env) omnivoreOK(auth, query string, vars map[string]any) omnivorePathAnswer {
	e.t.Helper()
	a := e.omnivore(auth, query, vars)
	if a.Status != http.StatusOK || a.Data == nil || len(a.Errors) > 0 {
		e.t.Fatalf("%.60q: status %d, errors %+v", query, a.Status, a.Errors)
	}
	return a
}

func TestOmnivorePathListsLabelsAsOmnivore(t *testing.T) {
	e := newEnv(t, options{})
	lib := library.Of(e.store)
	for _, n := range []string{"Later", "Bread"} {
		if _, err := lib.CreateLabel(t.Context(), e.member.ID, n, "#aa0000"); err != nil {
			t.Fatal(err)
		}
	}
	a := e.omnivoreOK(e.token, extGetLabels, nil).Data["labels"]
	if a == nil || a.ErrorCodes != nil || len(a.Labels) != 2 || a.Labels[0].Name != "Later" || a.Labels[1].Name != "Bread" ||
		a.Labels[0].ID == "" || a.Labels[0].Color != "#aa0000" || a.Labels[0].CreatedAt == "" || a.Labels[0].Description != nil {
		t.Fatalf("labels = %+v", a)
	}
	// Without a key, or with one the site does not know: LabelsError.
	for _, auth := range []string{"", e.token[:len(e.token)-4] + "zzzz"} {
		if a := e.omnivoreOK(auth, extGetLabels, nil).Data["labels"]; a == nil || len(a.ErrorCodes) != 1 || a.ErrorCodes[0] != "UNAUTHORIZED" {
			t.Errorf("labels with %q = %+v", auth, a)
		}
	}
	// Inboxt's labels keeps its name and answer at /api/graphql, where
	// Omnivore's query is refused as before; at the Omnivore path it is
	// Inboxt's query that is refused.
	var inboxt struct{ Labels []struct{ Name string } }
	e.do(`{ labels { name } }`, nil, &inboxt)
	if len(inboxt.Labels) != 2 || inboxt.Labels[0].Name != "Later" {
		t.Fatalf("Inboxt's labels at /api/graphql = %+v", inboxt)
	}
	if r := e.post(e.token, extGetLabels, nil); r.Status != http.StatusBadRequest || len(r.Errors) == 0 || r.Errors[0].Code() != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("Omnivore's labels at /api/graphql: %d %+v", r.Status, r.Errors)
	}
	if a := e.omnivore(e.token, `{ labels { name } }`, nil); a.Status != http.StatusBadRequest || len(a.Errors) == 0 || a.Errors[0].Code() != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("Inboxt's labels at the Omnivore path: %d %+v", a.Status, a.Errors)
	}
}

// The names a query writes are renamed wherever they name the root
// field: aliased, in a fragment on Query, in an inline fragment, behind
// comments; nested fields of the same name are not.
func TestOmnivorePathRenamesTheRootFieldsOnly(t *testing.T) {
	e := newEnv(t, options{})
	if _, err := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Bread", "#aa0000"); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{
		"aliased":          `{ mine: labels { ... on LabelsSuccess { labels { name } } } }`,
		"fragment":         `query { ...L } fragment L on Query { mine: labels { ... on LabelsSuccess { labels { name } } } }`,
		"inline fragment":  `{ ... on Query { mine : labels { ... on LabelsSuccess { labels { name } } } } }`,
		"comments, commas": "{ mine # the member's\n , : # labels\n labels { ... on LabelsSuccess { labels { name } } } }",
		"twice":            `{ mine: labels { ... on LabelsSuccess { labels { name } } } again: labels { __typename } }`,
	} {
		resp, body := e.postBare(graphql.OmnivorePath, e.token, map[string]any{"query": q})
		var a struct {
			Data struct {
				Mine struct{ Labels []struct{ Name string } }
			}
			Errors []gqlError
		}
		if err := json.Unmarshal(body, &a); err != nil || resp.StatusCode != http.StatusOK || len(a.Errors) > 0 ||
			len(a.Data.Mine.Labels) != 1 || a.Data.Mine.Labels[0].Name != "Bread" {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	// The client's key: labels.
	resp, body := e.postBare(graphql.OmnivorePath, e.token, map[string]any{"query": `{ labels { __typename } }`})
	if resp.StatusCode != http.StatusOK || string(body) != `{"data":{"labels":{"__typename":"LabelsSuccess"}}}` {
		t.Fatalf("labels: %d %s", resp.StatusCode, body)
	}
	// An error names the client's lines, and its path the client's key.
	resp, body = e.postBare(graphql.OmnivorePath, e.token, map[string]any{"query": "{\n  labels { nope }\n}"})
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(`"line":2`)) {
		t.Fatalf("an invalid query: %d %s", resp.StatusCode, body)
	}
}

func TestOmnivorePathAddsNotes(t *testing.T) {
	e := newEnv(t, options{})
	// The page saved by the extension, at the Omnivore path.
	in := map[string]any{"source": "extension", "clientRequestId": "c1", "url": "https://example.com/bread", "title": "Slow bread", "originalContent": extPage}
	id := e.omnivoreOK(e.token, extSavePage, map[string]any{"input": in}).Data["savePage"].ClientRequestID
	if id == "" {
		t.Fatal("savePage answered no id")
	}
	article := func() []struct {
		ID, Type   string
		Annotation *string
	} {
		t.Helper()
		a := e.omnivoreOK(e.token, extGetArticle, map[string]any{"username": "me", "slug": id, "includeFriendsHighlights": false}).Data["article"]
		if a == nil || a.ErrorCodes != nil || a.Article == nil || a.Article.Highlights == nil {
			t.Fatalf("article = %+v", a)
		}
		return a.Article.Highlights
	}
	if hs := article(); len(hs) != 0 {
		t.Fatalf("highlights before the note: %+v", hs)
	}

	// "Add note" with no note yet: createHighlight of type NOTE, with the
	// extension's own ids.
	note := map[string]any{"id": "0b7ec3c4-9bde-4f33-9f0f-0a4d5c8c3e7a", "shortId": "x1Y2z3W4", "type": "NOTE", "articleId": id, "annotation": "Feed the starter at eight."}
	c := e.omnivoreOK(e.token, extCreateHighlight, map[string]any{"input": note}).Data["createHighlight"]
	if c == nil || c.ErrorCodes != nil || c.Highlight == nil || c.Highlight.ID == "" {
		t.Fatalf("createHighlight = %+v", c)
	}
	hs := article()
	if len(hs) != 1 || hs[0].ID != c.Highlight.ID || hs[0].Type != "NOTE" || hs[0].Annotation == nil || *hs[0].Annotation != "Feed the starter at eight." {
		t.Fatalf("highlights after the note: %+v", hs)
	}
	// The plugins' search at /api/graphql lists it as Omnivore did: a NOTE
	// with its annotation and no quote.
	var found struct {
		Search struct {
			Edges []struct {
				Node struct {
					HighlightsCount int
					Highlights      []struct {
						ID, Type          string
						Quote, Annotation *string
					}
				}
			}
		}
	}
	e.do(`{ search(query: "has:highlights") { ... on SearchSuccess { edges { node { highlightsCount highlights { id type quote annotation } } } } } }`, nil, &found)
	if len(found.Search.Edges) != 1 || found.Search.Edges[0].Node.HighlightsCount != 1 {
		t.Fatalf("search = %+v", found)
	}
	if h := found.Search.Edges[0].Node.Highlights; len(h) != 1 || h[0].Type != "NOTE" || h[0].Quote != nil || *h[0].Annotation != "Feed the starter at eight." {
		t.Fatalf("search's highlights = %+v", h)
	}

	// "Add note" again: added to the item's note.
	note["id"], note["annotation"] = "5e0d8f3a-0c1b-4d2e-8f3a-6b7c8d9e0f1a", "Shape at nine."
	if again := e.omnivoreOK(e.token, extCreateHighlight, map[string]any{"input": note}).Data["createHighlight"]; again == nil || again.Highlight == nil || again.Highlight.ID != c.Highlight.ID {
		t.Fatalf("createHighlight again = %+v", again)
	}
	if hs := article(); len(hs) != 1 || *hs[0].Annotation != "Feed the starter at eight.\n\nShape at nine." {
		t.Fatalf("after a second note: %+v", hs)
	}

	// updateHighlight, as the extension sends it for a NOTE it finds.
	u := e.omnivoreOK(e.token, extUpdateHighlight, map[string]any{"input": map[string]any{"highlightId": c.Highlight.ID, "annotation": "Feed the starter at eight.\n\nAnd at six."}}).Data["updateHighlight"]
	if u == nil || u.ErrorCodes != nil || u.Highlight == nil || u.Highlight.ID != c.Highlight.ID {
		t.Fatalf("updateHighlight = %+v", u)
	}
	if hs := article(); len(hs) != 1 || *hs[0].Annotation != "Feed the starter at eight.\n\nAnd at six." {
		t.Fatalf("after updateHighlight: %+v", hs)
	}

	// Refusals, each an error type the extension reads: an item or a
	// highlight the member has not, an empty note, no key.
	bob, _ := e.newMember("bob")
	bobs := e.saveArticle(bob.ID, 1, nil)
	for name, q := range map[string]struct {
		auth, query, field string
		vars               map[string]any
		want               string
	}{
		"article of no item":          {e.token, extGetArticle, "article", map[string]any{"username": "me", "slug": "nope"}, "NOT_FOUND"},
		"article without a key":       {"", extGetArticle, "article", map[string]any{"username": "me", "slug": id}, "UNAUTHORIZED"},
		"note on no item":             {e.token, extCreateHighlight, "createHighlight", map[string]any{"input": map[string]any{"id": "a", "shortId": "b", "type": "NOTE", "articleId": "nope", "annotation": "x"}}, "NOT_FOUND"},
		"note on another's item":      {e.token, extCreateHighlight, "createHighlight", map[string]any{"input": map[string]any{"id": "a", "shortId": "b", "type": "NOTE", "articleId": bobs.ID, "annotation": "x"}}, "NOT_FOUND"},
		"another's item":              {e.token, extGetArticle, "article", map[string]any{"username": "me", "slug": bobs.ID}, "NOT_FOUND"},
		"empty note":                  {e.token, extCreateHighlight, "createHighlight", map[string]any{"input": map[string]any{"id": "a", "shortId": "b", "type": "NOTE", "articleId": id, "annotation": "  "}}, "BAD_DATA"},
		"a redaction":                 {e.token, extCreateHighlight, "createHighlight", map[string]any{"input": map[string]any{"id": "a", "shortId": "b", "type": "REDACTION", "articleId": id, "quote": "x"}}, "BAD_DATA"},
		"note without a key":          {"", extCreateHighlight, "createHighlight", map[string]any{"input": note}, "UNAUTHORIZED"},
		"update of no highlight":      {e.token, extUpdateHighlight, "updateHighlight", map[string]any{"input": map[string]any{"highlightId": "nope", "annotation": "x"}}, "NOT_FOUND"},
		"update without a key":        {"", extUpdateHighlight, "updateHighlight", map[string]any{"input": map[string]any{"highlightId": c.Highlight.ID, "annotation": "x"}}, "UNAUTHORIZED"},
		"update with too long a note": {e.token, extUpdateHighlight, "updateHighlight", map[string]any{"input": map[string]any{"highlightId": c.Highlight.ID, "annotation": strings.Repeat("x", library.MaxNoteLen+1)}}, "BAD_DATA"},
	} {
		a := e.omnivoreOK(q.auth, q.query, q.vars).Data[q.field]
		if a == nil || len(a.ErrorCodes) != 1 || a.ErrorCodes[0] != q.want {
			t.Errorf("%s: %+v, want %s", name, a, q.want)
		}
	}
	if hs := article(); len(hs) != 1 || *hs[0].Annotation != "Feed the starter at eight.\n\nAnd at six." {
		t.Fatalf("after the refusals: %+v", hs)
	}
}

// A HIGHLIGHT created with Omnivore's quote is placed in the item's text
// where the quote is, as Inboxt's clients and the reader read highlights.
func TestOmnivorePathCreatesAHighlightFromAQuote(t *testing.T) {
	e := newEnv(t, options{})
	in := map[string]any{"source": "extension", "clientRequestId": "c1", "url": "https://example.com/bread", "title": "Slow bread", "originalContent": extPage}
	id := e.omnivoreOK(e.token, extSavePage, map[string]any{"input": in}).Data["savePage"].ClientRequestID
	hl := map[string]any{"id": "a", "shortId": "b", "type": "HIGHLIGHT", "articleId": id, "quote": "the dough rises overnight", "prefix": "The starter wakes slowly and ", "annotation": "cold proof"}
	c := e.omnivoreOK(e.token, extCreateHighlight, map[string]any{"input": hl}).Data["createHighlight"]
	if c == nil || c.Highlight == nil {
		t.Fatalf("createHighlight = %+v", c)
	}
	var got struct {
		SavedItem struct {
			Highlights []struct {
				ID, Note string
				Type     string
				Quote    string
				Segments []struct {
					Xpath string
					Text  string
				}
			}
		}
	}
	e.do(`query($id: String!) { savedItem(query: {id: $id}) { highlights { id note type quote segments { xpath text } } } }`, map[string]any{"id": id}, &got)
	h := got.SavedItem.Highlights
	if len(h) != 1 || h[0].ID != c.Highlight.ID || h[0].Type != "HIGHLIGHT" || h[0].Quote != "the dough rises overnight" || h[0].Note != "cold proof" ||
		len(h[0].Segments) != 1 || h[0].Segments[0].Xpath == "/" || h[0].Segments[0].Text != "the dough rises overnight" {
		t.Fatalf("the highlight = %+v", h)
	}
	// Without a quote, a HIGHLIGHT (the default type) is refused.
	delete(hl, "type")
	delete(hl, "quote")
	if a := e.omnivoreOK(e.token, extCreateHighlight, map[string]any{"input": hl}).Data["createHighlight"]; a == nil || len(a.ErrorCodes) != 1 || a.ErrorCodes[0] != "BAD_DATA" {
		t.Fatalf("a highlight without a quote = %+v", a)
	}
}

// Every Omnivore operation /api/graphql serves is served at the Omnivore
// path with the same answer (the extension's and the plugins').
func TestOmnivorePathServesOmnivoresOtherOperations(t *testing.T) {
	e := newEnv(t, options{})
	item := e.saveArticle(e.member.ID, 1, nil)
	label, err := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Bread", "#aa0000")
	if err != nil {
		t.Fatal(err)
	}
	// Reads answer the same bytes at both paths.
	for _, q := range []struct {
		query string
		vars  map[string]any
	}{
		{omnivoreSearch, map[string]any{"query": "in:all", "first": 15, "includeContent": false, "format": "html"}},
		{`query($since: Date!) { updatesSince(since: $since) { ... on UpdatesSinceSuccess { edges { updateReason node { id title } } } } }`, map[string]any{"since": "2000-01-01"}},
	} {
		body := map[string]any{"query": q.query, "variables": q.vars}
		_, inboxt := e.postBare(graphql.Path, e.token, body)
		resp, omni := e.postBare(graphql.OmnivorePath, e.token, body)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(inboxt, omni) || !bytes.Contains(omni, []byte(item.ID)) {
			t.Errorf("%.40q: /api/graphql %s\nOmnivore path %d %s", q.query, inboxt, resp.StatusCode, omni)
		}
	}
	// Writes, each as its client sends it, in this order.
	for _, q := range []struct {
		query, field string
		input        map[string]any
	}{
		{extSetLabels, "setLabels", map[string]any{"pageId": item.ID, "labelIds": []string{label.ID}}},
		{extUpdatePage, "updatePage", map[string]any{"pageId": item.ID, "title": "Renamed"}},
		{extSetLinkArchived, "setLinkArchived", map[string]any{"linkId": item.ID, "archived": true}},
		{`mutation SaveUrl($input: SaveUrlInput!) { saveUrl(input: $input) { ... on SaveSuccess { url clientRequestId } ... on SaveError { errorCodes } } }`,
			"saveUrl", map[string]any{"url": "https://example.com/later", "source": "api", "clientRequestId": "c2", "state": "ARCHIVED"}},
		{`mutation SetBookmarkArticle($input: SetBookmarkArticleInput!) { setBookmarkArticle(input: $input) { ... on SetBookmarkArticleSuccess { bookmarkedArticle { id } } ... on SetBookmarkArticleError { errorCodes } } }`,
			"setBookmarkArticle", map[string]any{"articleID": item.ID, "bookmark": false}},
	} {
		a := e.omnivoreOK(e.token, q.query, map[string]any{"input": q.input}).Data[q.field]
		if a == nil || a.ErrorCodes != nil {
			t.Errorf("%s = %+v", q.field, a)
		}
	}
	it, err := library.Of(e.store).SavedItem(t.Context(), e.member.ID, item.ID)
	if err != nil || it.Title != "Renamed" || len(it.LabelIDs) != 1 || it.Status != library.StatusDeleted {
		t.Fatalf("the item after the writes: %+v, %v", it, err)
	}
	if got := e.omnivoreSaved("in:archive"); len(got) != 1 || got[0].ID == item.ID {
		t.Fatalf("saveUrl saved %+v", got)
	}
}

// The limits of /api/graphql hold at the Omnivore path: the body sizes,
// the complexity, and the scopes (TestOmnivorePathHoldsTheScopes).
func TestOmnivorePathHoldsTheLimits(t *testing.T) {
	e := newEnv(t, options{MaxBodyBytes: 64 << 10, MemberBodyBytes: 256 << 10})
	big := map[string]any{"query": extGetLabels, "variables": map[string]any{"pad": strings.Repeat("x", 128<<10)}}
	if resp, body := e.postBare(graphql.OmnivorePath, "", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("128 KiB without a key: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.postBare(graphql.OmnivorePath, e.token, big); resp.StatusCode != http.StatusOK {
		t.Fatalf("128 KiB with a key: %d %s", resp.StatusCode, body)
	}
	big["variables"] = map[string]any{"pad": strings.Repeat("x", 300<<10)}
	if resp, body := e.postBare(graphql.OmnivorePath, e.token, big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("300 KiB with a key: %d %s", resp.StatusCode, body)
	}
	// Omnivore's labels are priced as Inboxt's (their storage limit,
	// library.MaxLabels), so that aliases of them multiply: the
	// extension's list fits the default limit (5000), six of them do not.
	q := "{" + strings.Repeat(" labels { ... on LabelsSuccess { labels { id name } } }", 1)
	for _, alias := range []string{"b", "c", "d", "e", "f"} {
		q += " " + alias + ": labels { ... on LabelsSuccess { labels { id name } } }"
	}
	a := e.omnivore(e.token, q+" }", nil)
	if a.Status != http.StatusBadRequest || len(a.Errors) != 1 || a.Errors[0].Code() != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Fatalf("six label lists: %d %+v", a.Status, a.Errors)
	}
}

// The two paths share one rate-limit budget: a key's requests at either
// count against it, and past it the Omnivore path answers as /api/graphql
// does (TOO_MANY_REQUESTS, extensions.status 429, Retry-After).
func TestOmnivorePathSharesTheRateLimit(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: 3})
	for i, path := range []string{graphql.Path, graphql.OmnivorePath, graphql.Path} {
		resp, body := e.postBare(path, e.token, map[string]any{"query": `{ search(query: "in:all") { __typename } }`})
		if got := resp.Header.Get("X-RateLimit-Remaining"); resp.StatusCode != http.StatusOK || got != strconv.Itoa(2-i) {
			t.Fatalf("request %d at %s: %d, remaining %q: %s", i, path, resp.StatusCode, got, body)
		}
	}
	a := e.omnivore(e.token, extGetLabels, nil)
	if a.Status != http.StatusOK || a.Data != nil || len(a.Errors) != 1 || a.Errors[0].Code() != "TOO_MANY_REQUESTS" || a.Errors[0].Extensions["status"] != float64(429) {
		t.Fatalf("past the budget: %d %+v %+v", a.Status, a.Data, a.Errors)
	}
}

// Each credential gets at the Omnivore path what it gets at /api/graphql:
// Omnivore's labels as Omnivore's search (a query: read), its
// createHighlight as its setLabels (a mutation whose answer shows
// something of the library: write and read); no answer to a credential
// without read shows the library.
func TestOmnivorePathHoldsTheScopes(t *testing.T) {
	w := newScopeWorld(t)
	label, err := library.Of(w.store).CreateLabel(t.Context(), w.member.ID, "Rye", "#123456")
	if err != nil {
		t.Fatal(err)
	}
	outcome := func(cred, path, query, field string, vars map[string]any) (string, []byte) {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		status, _, b := w.send(cred, http.MethodPost, path, "application/json", body)
		var a omnivorePathAnswer
		if err := json.Unmarshal(b, &a); err != nil {
			return "not JSON", b
		}
		switch {
		case len(a.Errors) > 0:
			return http.StatusText(status) + " " + a.Errors[0].Code(), b
		case a.Data[field] == nil:
			return "no data", b
		case a.Data[field].ErrorCodes != nil:
			return strings.Join(a.Data[field].ErrorCodes, ","), b
		}
		return allowed, b
	}
	for _, cred := range scopeCredentials {
		search, _ := outcome(cred, graphql.Path, `{ search(query: "in:all") { ... on SearchSuccess { edges { node { id } } } ... on SearchError { errorCodes } } }`, "search", nil)
		labels, body := outcome(cred, graphql.OmnivorePath, extGetLabels, "labels", nil)
		if labels != search {
			t.Errorf("%s: labels %s, search %s (%.300s)", cred, labels, search, body)
		}
		if withoutRead[cred] && bytes.Contains(body, []byte(libraryMarker)) {
			t.Errorf("%s: labels show the library: %.300s", cred, body)
		}
		setLabels, _ := outcome(cred, graphql.Path, extSetLabels, "setLabels", map[string]any{"input": map[string]any{"pageId": w.item.ID, "labelIds": []string{label.ID}}})
		note := map[string]any{"id": "a", "shortId": "b", "type": "NOTE", "articleId": w.item.ID, "annotation": "by " + cred}
		create, body := outcome(cred, graphql.OmnivorePath, extCreateHighlight, "createHighlight", map[string]any{"input": note})
		if create != setLabels {
			t.Errorf("%s: createHighlight %s, setLabels %s (%.300s)", cred, create, setLabels, body)
		}
	}
	// Only the credentials that may write added to the item's note.
	hs, err := library.Of(w.store).ItemHighlights(t.Context(), w.member.ID, w.item.ID)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, h := range hs {
		if h.IsNote() {
			notes = append(notes, h.Note)
		}
	}
	if strings.Join(notes, "|") != "by session\n\nby API token\n\nby read write" {
		t.Fatalf("notes %q", notes)
	}
}

// What the Omnivore path answers besides a POST is what /api/graphql
// answers: a CORS preflight gets no CORS headers (the extension's
// requests come from its service worker, which its host permissions let
// reach the site, as at /api/graphql), another method 405 with Allow: POST.
func TestOmnivorePathAnswersOtherRequestsAsAPIGraphQL(t *testing.T) {
	e := newEnv(t, options{})
	for _, method := range []string{http.MethodOptions, http.MethodGet, http.MethodPut} {
		var answers []string
		for _, path := range []string{graphql.Path, graphql.OmnivorePath} {
			req, _ := http.NewRequest(method, e.srv.URL+path, nil)
			req.Header.Set("Origin", "chrome-extension://abcdefghijklmnopabcdefghijklmnop")
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
			resp, body := send(t, req)
			answers = append(answers, fmt.Sprintf("%d allow=%q acao=%q %s", resp.StatusCode, resp.Header.Get("Allow"),
				resp.Header.Get("Access-Control-Allow-Origin"), body))
		}
		if answers[0] != answers[1] || !strings.HasPrefix(answers[1], "405 allow=\"POST\" acao=\"\"") {
			t.Errorf("%s: /api/graphql %s\nOmnivore path %s", method, answers[0], answers[1])
		}
	}
}
