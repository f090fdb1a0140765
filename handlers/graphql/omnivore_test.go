package graphql_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/omnivore"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Omnivore's operations as @omnivore-app/api 1.0.4 sends them
// (src/graphql.ts, omnivore-app/omnivore-api@ce99d23), with the client's
// fragments trimmed to the fields these tests read.
const (
	omnivoreSearch = `query Search($after: String, $first: Int, $format: String, $includeContent: Boolean, $query: String) {
  search(after: $after, first: $first, format: $format, includeContent: $includeContent, query: $query) {
    __typename
    ... on SearchSuccess {
      edges { node { id title slug url pageType isArchived savedAt updatedAt wordsCount readingProgressPercent
        labels { name color id description internal source createdAt }
        highlights { id quote annotation patch prefix suffix type color labels { name } highlightPositionPercent highlightPositionAnchorIndex createdAt updatedAt }
        content } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor totalCount }
    }
    ... on SearchError { errorCodes }
  }
}`
	omnivoreUpdates = `query UpdatesSince($after: String, $first: Int, $since: Date!) {
  updatesSince(after: $after, first: $first, since: $since) {
    __typename
    ... on UpdatesSinceSuccess {
      edges { itemID updateReason node { id title slug savedAt } }
      pageInfo { hasNextPage endCursor }
    }
    ... on UpdatesSinceError { errorCodes }
  }
}`
	omnivoreDelete = `mutation Delete($input: SetBookmarkArticleInput!) {
  setBookmarkArticle(input: $input) {
    __typename
    ... on SetBookmarkArticleSuccess { bookmarkedArticle { id } }
    ... on SetBookmarkArticleError { errorCodes }
  }
}`
)

type omnivoreItem struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	Slug       string `json:"slug"`
	IsArchived bool   `json:"isArchived"`
	Labels     []struct {
		Name        string  `json:"name"`
		Internal    *bool   `json:"internal"`
		Description *string `json:"description"`
	} `json:"labels"`
	Highlights []struct {
		ID         string  `json:"id"`
		Quote      *string `json:"quote"`
		Annotation *string `json:"annotation"`
		Type       string  `json:"type"`
	} `json:"highlights"`
	Content *string `json:"content"`
}

type omnivoreSearchResult struct {
	Search struct {
		Typename string `json:"__typename"`
		Edges    []struct {
			Node omnivoreItem `json:"node"`
		} `json:"edges"`
		PageInfo struct {
			HasNextPage bool   `json:"hasNextPage"`
			EndCursor   string `json:"endCursor"`
			TotalCount  *int   `json:"totalCount"`
		} `json:"pageInfo"`
		ErrorCodes []string `json:"errorCodes"`
	} `json:"search"`
}

// postBare sends a GraphQL request with Omnivore's Authorization header:
// the key alone.
func (e *env) postBare(path, auth string, body any) (*http.Response, []byte) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return send(e.t, req)
}

func (e *env) omnivoreSearch(q string, after, first int, format string) omnivoreSearchResult {
	e.t.Helper()
	vars := map[string]any{"query": q, "first": first, "includeContent": format != "html", "format": format}
	if after > 0 {
		vars["after"] = strconv.Itoa(after)
	}
	resp, body := e.postBare("/api/graphql", e.token, map[string]any{"query": omnivoreSearch, "variables": vars})
	var r struct {
		Data   omnivoreSearchResult `json:"data"`
		Errors []gqlError           `json:"errors"`
	}
	if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 || len(r.Errors) > 0 {
		e.t.Fatalf("search %q: status %d, %s", q, resp.StatusCode, body)
	}
	return r.Data
}

// searchIDs pages through a search as the plugins do (first 15, after
// "0", "15", …) and returns the ids in order.
func (e *env) searchIDs(q string) []string {
	e.t.Helper()
	var ids []string
	for after := 0; ; after += 3 {
		r := e.omnivoreSearch(q, after, 3, "html")
		if r.Search.Typename != "SearchSuccess" {
			e.t.Fatalf("search %q: %+v", q, r.Search)
		}
		for _, ed := range r.Search.Edges {
			ids = append(ids, ed.Node.ID)
		}
		if r.Search.PageInfo.TotalCount == nil {
			e.t.Fatalf("search %q: no totalCount", q)
		}
		if !r.Search.PageInfo.HasNextPage {
			if *r.Search.PageInfo.TotalCount != len(ids) {
				e.t.Fatalf("search %q: totalCount %d, walked %d", q, *r.Search.PageInfo.TotalCount, len(ids))
			}
			return ids
		}
		if r.Search.PageInfo.EndCursor != strconv.Itoa(after+3) {
			e.t.Fatalf("search %q: endCursor %q after %d", q, r.Search.PageInfo.EndCursor, after)
		}
	}
}

func TestOmnivoreSearchSyntaxAsThePluginsSendIt(t *testing.T) {
	e := newEnv(t, options{})
	lib := library.Of(e.store)
	blue, err := lib.CreateLabel(t.Context(), e.member.ID, "Blue", "#0000ff")
	if err != nil {
		t.Fatal(err)
	}
	var all []*library.SavedItem
	for i := 1; i <= 8; i++ {
		all = append(all, e.saveArticle(e.member.ID, i, func(in *library.NewItem) {
			if i == 2 {
				in.LabelIDs = []string{blue.ID}
				in.Title = "Sourdough starter"
			}
		}))
	}
	archived, trashed, highlighted := all[3], all[4], all[5]
	if _, err := lib.SetItemsStatus(t.Context(), e.member.ID, []string{archived.ID}, library.StatusArchived); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.SetItemsStatus(t.Context(), e.member.ID, []string{trashed.ID}, library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateHighlight(t.Context(), e.member.ID, highlighted.ID, []library.HighlightSegment{{XPath: "/p[1]", EndOffset: 4, Text: "Body"}}, "a note"); err != nil {
		t.Fatal(err)
	}
	var savedAsc []string
	for _, it := range all {
		if it != trashed {
			savedAsc = append(savedAsc, it.ID)
		}
	}
	newestFirst := slices.Clone(savedAsc)
	slices.Reverse(newestFirst)
	inbox := slices.DeleteFunc(slices.Clone(savedAsc), func(id string) bool { return id == archived.ID })
	since := time.Now().Add(-time.Hour).Format("2006-01-02T15:04:05.000-07:00")
	cases := []struct {
		q    string
		want []string
	}{
		// The Obsidian plugin's first sync with its default (empty) custom
		// query: src/api.ts getItems @ 619013b.
		{" sort:saved-asc ", savedAsc},
		// The Logseq plugin's filters (src/settings/index.ts @ 0174149).
		{" sort:saved-asc in:all", savedAsc},
		{" sort:saved-asc has:highlights in:all", []string{highlighted.ID}},
		// An incremental sync: updated:<luxon toISO> is "since".
		{"updated:" + since + " sort:saved-asc in:all", savedAsc},
		{"updated:" + time.Now().Add(time.Hour).Format(time.RFC3339) + " sort:saved-asc in:all", nil},
		{"in:inbox sort:saved-asc", inbox},
		{"in:archive", []string{archived.ID}},
		{"in:trash", []string{trashed.ID}},
		{"label:Blue", []string{all[1].ID}},
		{"sourdough", []string{all[1].ID}},
		{"", newestFirst},
	}
	for _, c := range cases {
		if got := e.searchIDs(c.q); !slices.Equal(got, c.want) {
			t.Errorf("search %q = %v, want %v", c.q, got, c.want)
		}
	}

	// The fields the plugins' templates read.
	r := e.omnivoreSearch("has:highlights in:all", 0, 15, "highlightedMarkdown")
	n := r.Search.Edges[0].Node
	if n.Slug == "" || len(n.Highlights) != 1 || n.Highlights[0].Quote == nil || *n.Highlights[0].Quote != "Body" ||
		n.Highlights[0].Annotation == nil || *n.Highlights[0].Annotation != "a note" || n.Highlights[0].Type != "HIGHLIGHT" {
		t.Errorf("item = %+v", n)
	}
	if n.Content == nil || *n.Content != "==Body== 6\n" {
		t.Errorf("highlightedMarkdown content = %q", deref(n.Content))
	}
	// Omnivore's server answered internal with a boolean, never null
	// (the column is boolean, default false: omnivore-app/omnivore@322ce62,
	// packages/api/src/entity/label.ts).
	r = e.omnivoreSearch("label:Blue", 0, 15, "html")
	if len(r.Search.Edges) != 1 || len(r.Search.Edges[0].Node.Labels) != 1 {
		t.Fatalf("label:Blue = %+v", r.Search)
	}
	if l := r.Search.Edges[0].Node.Labels[0]; l.Name != "Blue" || l.Internal == nil || *l.Internal || l.Description != nil {
		t.Errorf("label = %+v (internal %v)", l, l.Internal)
	}
	if r := e.omnivoreSearch(strings.Repeat("x", 256), 0, 15, "html"); r.Search.Typename != "SearchError" || r.Search.ErrorCodes[0] != "QUERY_TOO_LONG" {
		t.Errorf("long query: %+v", r.Search)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestOmnivoreUpdatesSinceReportsCreatedUpdatedAndDeleted(t *testing.T) {
	e := newEnv(t, options{})
	lib := library.Of(e.store)
	old := e.saveArticle(e.member.ID, 1, nil)
	gone := e.saveArticle(e.member.ID, 2, nil)
	trashed := e.saveArticle(e.member.ID, 3, nil)
	time.Sleep(5 * time.Millisecond) // the times below must differ from the saves
	since := time.Now().UTC()
	time.Sleep(5 * time.Millisecond)
	fresh := e.saveArticle(e.member.ID, 4, nil)
	if _, err := lib.UpdateReadingProgress(t.Context(), e.member.ID, old.ID, 40); err != nil {
		t.Fatal(err)
	}
	// Deleted as the Obsidian plugin deletes (src/api.ts deleteItem): to the trash.
	var del struct {
		SetBookmarkArticle struct {
			Typename          string `json:"__typename"`
			BookmarkedArticle struct {
				ID string `json:"id"`
			} `json:"bookmarkedArticle"`
		} `json:"setBookmarkArticle"`
	}
	e.do(omnivoreDelete, map[string]any{"input": map[string]any{"articleID": trashed.ID, "bookmark": false}}, &del)
	if del.SetBookmarkArticle.BookmarkedArticle.ID != trashed.ID {
		t.Fatalf("setBookmarkArticle = %+v", del)
	}
	e.do(omnivoreDelete, map[string]any{"input": map[string]any{"articleID": "nope", "bookmark": false}}, &del)
	if del.SetBookmarkArticle.Typename != "SetBookmarkArticleError" {
		t.Errorf("unknown id: %+v", del)
	}
	// And one deleted for good.
	if _, err := lib.SetItemsStatus(t.Context(), e.member.ID, []string{gone.ID}, library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := lib.PermanentlyDeleteItems(t.Context(), e.member.ID, []string{gone.ID}); err != nil {
		t.Fatal(err)
	}

	type edge struct {
		ItemID       string `json:"itemID"`
		UpdateReason string `json:"updateReason"`
		Node         *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"node"`
	}
	walk := func(since string) map[string]edge {
		got := map[string]edge{}
		for after := 0; ; after += 2 {
			var r struct {
				UpdatesSince struct {
					Edges    []edge `json:"edges"`
					PageInfo struct {
						HasNextPage bool `json:"hasNextPage"`
					} `json:"pageInfo"`
				} `json:"updatesSince"`
			}
			vars := map[string]any{"first": 2, "since": since}
			if after > 0 {
				vars["after"] = strconv.Itoa(after)
			}
			e.do(omnivoreUpdates, vars, &r)
			for _, ed := range r.UpdatesSince.Edges {
				if _, dup := got[ed.ItemID]; dup {
					t.Fatalf("item %s twice", ed.ItemID)
				}
				got[ed.ItemID] = ed
			}
			if !r.UpdatesSince.PageInfo.HasNextPage {
				return got
			}
		}
	}
	got := walk(since.Format(time.RFC3339Nano))
	want := map[string]string{fresh.ID: "CREATED", old.ID: "UPDATED", trashed.ID: "DELETED", gone.ID: "DELETED"}
	if len(got) != len(want) {
		t.Errorf("updatesSince = %+v, want %v", got, want)
	}
	for id, reason := range want {
		// The Logseq plugin keeps only deletions with a node
		// (src/api.ts getDeletedOmnivoreItems @ 0174149).
		if got[id].UpdateReason != reason || got[id].Node == nil || got[id].Node.ID != id {
			t.Errorf("%s: %+v, want %s with its node", id, got[id], reason)
		}
	}
	if got[gone.ID].Node.Title != gone.Title {
		t.Errorf("deleted item's title = %q", got[gone.ID].Node.Title)
	}
	// Logseq's first sync sends 2021-01-01: everything.
	if all := walk("2021-01-01"); len(all) != 4 {
		t.Errorf("since 2021-01-01: %d items, want 4", len(all))
	}
}

func TestOmnivoreBareKeyOnlyWhereOmnivoreSendsIt(t *testing.T) {
	e := newEnv(t, options{})
	q := map[string]any{"query": `{ me { id } }`}
	for _, auth := range []string{e.token, "Bearer " + e.token} {
		resp, body := e.postBare("/api/graphql", auth, q)
		if resp.StatusCode != 200 || !strings.Contains(string(body), e.member.ID) {
			t.Errorf("Authorization %.8s…: %d %s", auth, resp.StatusCode, body)
		}
	}
	// Not a token's shape: still the Bearer form's error.
	resp, body := e.postBare("/api/graphql", "Basic abc", q)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "UNAUTHORIZED") {
		t.Errorf("Basic: %d %s", resp.StatusCode, body)
	}
	// The import endpoint keeps RFC 6750's form.
	resp, _ = e.postBare(importer.UploadPath, e.token, nil)
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted {
		t.Errorf("import with a bare key: %d", resp.StatusCode)
	}
}

func TestOmnivoreContentEndpoint(t *testing.T) {
	e := newEnv(t, options{})
	lib := library.Of(e.store)
	it := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.HTML = `<h1>Bread</h1><p>A starter, <a href="https://flour.example/">flour</a> and water.</p><p>Feed it nightly.</p>`
	})
	// A highlight made the Inboxt way (createHighlight with segments).
	var made struct {
		CreateHighlight struct {
			ID string `json:"id"`
		} `json:"createHighlight"`
	}
	e.do(`mutation($data: CreateHighlightInput!) { createHighlight(data: $data) { id } }`, map[string]any{"data": map[string]any{
		"savedItemId": it.ID, "note": "daily",
		"segments": []map[string]any{{"xpath": "/p[2]", "startOffset": 0, "endOffset": 8, "beforeText": "water. ", "afterText": " nightly.", "text": "Feed it"}},
	}}, &made)

	post := func(auth string, body any) (int, map[string]any) {
		resp, b := e.postBare(omnivore.ContentPath, auth, body)
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out
	}
	// As the plugins send it (src/api.ts getContent, both plugins).
	status, out := post(e.token, map[string]any{"libraryItemIds": []string{it.ID, "unknown"}, "format": "highlightedMarkdown"})
	data, _ := out["data"].([]any)
	if status != 200 || len(data) != 1 {
		t.Fatalf("content: %d %v", status, out)
	}
	entry := data[0].(map[string]any)
	url, _ := entry["downloadUrl"].(string)
	if entry["libraryItemId"] != it.ID || !strings.HasPrefix(url, e.srv.URL+omnivore.ContentDownloadPath) {
		t.Fatalf("entry = %v", entry)
	}
	// Without the key, as the plugins download it.
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "# Bread\n\nA starter, [flour](https://flour.example/) and water.\n\n==Feed it== nightly.\n"
	if resp.StatusCode != 200 || string(b) != want || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/markdown") {
		t.Errorf("download: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	// Highlights come in the page's order whatever the order they were
	// made in (the plugins keep it when sorting "by location").
	e.do(`mutation($data: CreateHighlightInput!) { createHighlight(data: $data) { id } }`, map[string]any{"data": map[string]any{
		"savedItemId": it.ID,
		"segments":    []map[string]any{{"xpath": "/p[1]", "startOffset": 2, "endOffset": 9, "beforeText": "A ", "afterText": ",", "text": "starter"}},
	}}, nil)
	var page struct {
		Search struct {
			Edges []struct {
				Node struct {
					Highlights []struct {
						Quote  string `json:"quote"`
						Anchor int    `json:"highlightPositionAnchorIndex"`
					} `json:"highlights"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"search"`
	}
	e.do(`{ search(query: "has:highlights") { ... on SearchSuccess { edges { node { highlights { quote highlightPositionAnchorIndex } } } } } }`, nil, &page)
	if hs := page.Search.Edges[0].Node.Highlights; len(hs) != 2 || hs[0].Quote != "starter" || hs[0].Anchor != 0 || hs[1].Quote != "Feed it" || hs[1].Anchor != 1 {
		t.Errorf("highlights = %+v, want starter then Feed it", hs)
	}
	// Deleted for good since: 410; a made-up link: 404.
	if _, err := lib.SetItemsStatus(t.Context(), e.member.ID, []string{it.ID}, library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := lib.PermanentlyDeleteItems(t.Context(), e.member.ID, []string{it.ID}); err != nil {
		t.Fatal(err)
	}
	for link, code := range map[string]int{url: http.StatusGone, e.srv.URL + omnivore.ContentDownloadPath + "cl_madeupmadeupmadeupmadeup": http.StatusNotFound} {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("GET %s: %d, want %d", link, resp.StatusCode, code)
		}
	}
	// Bounded, and refused without a key.
	many := make([]string, omnivore.MaxContentIDs+1)
	for i := range many {
		many[i] = strconv.Itoa(i)
	}
	for _, c := range []struct {
		auth string
		body any
		want int
	}{
		{e.token, map[string]any{"libraryItemIds": many, "format": "html"}, 400},
		{e.token, map[string]any{"libraryItemIds": []string{"x"}, "format": "pdf"}, 400},
		{e.token, map[string]any{"libraryItemIds": []string{}, "format": "html"}, 400},
		{e.token, map[string]any{"libraryItemIds": []string{"x"}, "format": "html"}, 404},
		{"", map[string]any{"libraryItemIds": []string{"x"}, "format": "html"}, 401},
		{"nope", map[string]any{"libraryItemIds": []string{"x"}, "format": "html"}, 401},
	} {
		if status, out := post(c.auth, c.body); status != c.want {
			t.Errorf("%v: %d %v, want %d", c.body, status, out, c.want)
		}
	}
}

func TestOmnivoreSearchContentCountsAgainstTheContentBudget(t *testing.T) {
	e := newEnv(t, options{MaxContentBytes: 30})
	for i := 1; i <= 3; i++ {
		e.saveArticle(e.member.ID, i, func(in *library.NewItem) { in.HTML = "<p>" + strings.Repeat("dough ", 4) + "</p>" })
	}
	vars := map[string]any{"first": 15, "includeContent": true, "format": "html"}
	resp, body := e.postBare("/api/graphql", e.token, map[string]any{"query": omnivoreSearch, "variables": vars})
	if resp.StatusCode != 200 || !strings.Contains(string(body), "exceed 30 bytes") {
		t.Errorf("three contents over a 30-byte budget: %d %s", resp.StatusCode, body)
	}
	// Without includeContent, content is null and costs nothing.
	vars["includeContent"] = false
	resp, body = e.postBare("/api/graphql", e.token, map[string]any{"query": omnivoreSearch, "variables": vars})
	if resp.StatusCode != 200 || strings.Contains(string(body), "errors") || strings.Count(string(body), `"content":null`) != 3 {
		t.Errorf("without includeContent: %d %s", resp.StatusCode, body)
	}
}

// The npm client's own documents (src/graphql.ts @ ce99d23, every
// fragment field): the plugins' pages fit the default complexity limit, and
// larger pages and aliases are priced.
func TestOmnivoreClientDocumentsFitTheComplexityLimit(t *testing.T) {
	e := newEnv(t, options{})
	search, updates := graphql.OmnivoreClientSearch, graphql.OmnivoreClientUpdates
	for _, c := range []struct {
		doc  string
		vars map[string]any
	}{
		// The plugins' page (src/main.ts and src/index.ts: size 15).
		{search, map[string]any{"first": 15, "query": "in:all", "includeContent": true, "format": "highlightedMarkdown"}},
		{updates, map[string]any{"first": 15, "since": "2021-01-01"}},
		// About 100 a page item with every field: 40 items fit.
		{search, map[string]any{"first": 40, "query": "in:all", "includeContent": true, "format": "highlightedMarkdown"}},
	} {
		if r := e.post(e.token, c.doc, c.vars); r.Status != 200 || len(r.Errors) > 0 {
			t.Errorf("%.40s: %d %+v", c.doc, r.Status, r.Errors)
		}
	}
	// Omnivore's largest page, 100, with every field is refused with a
	// clear error rather than run.
	e.wantError(e.token, updates, map[string]any{"first": 100, "since": "2021-01-01"}, 400, "COMPLEXITY_LIMIT_EXCEEDED")
	var aliased strings.Builder
	aliased.WriteString("{")
	for i := range 20 {
		aliased.WriteString(" s" + strconv.Itoa(i) + `: search(first: 15, query: "x") { ... on SearchSuccess { edges { node { id } } } }`)
	}
	aliased.WriteString(" }")
	e.wantError(e.token, aliased.String(), nil, 400, "COMPLEXITY_LIMIT_EXCEEDED")
}

// A content download URL carries no credential but its secret, so a link
// that is not one counts against the client address's tokenless budget,
// as an unknown key does: past it Omnivore's error shape with 429 and
// Retry-After. A real link is not counted (the plugins download a sync's
// links back to back) and still downloads from that address.
func TestContentDownloadGuessesCountAgainstTheClientAddress(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: 2, MemberRateLimit: -1})
	link := e.contentLink(e.saveArticle(e.member.ID, 1, nil).ID)
	guess := e.srv.URL + omnivore.ContentDownloadPath + "cl_madeupmadeupmadeupmadeup"
	for i := range 2 {
		if status, _, b := getURL(t, link); status != http.StatusOK {
			t.Fatalf("real link %d: HTTP %d %s", i, status, b)
		}
		if status, _, b := getURL(t, guess); status != http.StatusNotFound {
			t.Fatalf("guess %d: HTTP %d %s", i, status, b)
		}
	}
	status, h, b := getURL(t, guess)
	var out map[string]string
	if status != http.StatusTooManyRequests || json.Unmarshal(b, &out) != nil || out["errorCode"] != "TOO_MANY_REQUESTS" || h.Get("Retry-After") == "" {
		t.Fatalf("past the budget: HTTP %d %v %s", status, h, b)
	}
	if status, _, b := getURL(t, link); status != http.StatusOK {
		t.Fatalf("real link past the guesses' budget: HTTP %d %s", status, b)
	}
}

// A saveUrl that is refused leaves no label behind: the labels it names by
// name are made for the item it saves, so a refusal of the URL, or of a
// later label, makes none of them.
func TestOmnivoreRefusedSaveURLMakesNoLabel(t *testing.T) {
	e := newEnv(t, options{})
	const save = `mutation SaveUrl($input: SaveUrlInput!) {
  saveUrl(input: $input) { __typename ... on SaveSuccess { url } ... on SaveError { errorCodes } }
}`
	if _, err := library.Of(e.store).CreateLabel(t.Context(), e.member.ID, "Kept", "#112233"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		url    string
		labels []map[string]any
	}{
		{"a URL that is not one", "not a url", []map[string]any{{"name": "Fresh"}, {"name": "kept"}}},
		{"a later label's bad color", "https://example.com/a", []map[string]any{{"name": "Fresh"}, {"name": "Other", "color": "red"}}},
	} {
		r := e.post(e.token, save, map[string]any{"input": map[string]any{
			"url": c.url, "source": "api", "clientRequestId": "c1", "labels": c.labels}})
		if len(r.Errors) == 0 || r.Errors[0].Code() != "BAD_USER_INPUT" {
			t.Fatalf("%s: errors %+v, data %s, want BAD_USER_INPUT", c.name, r.Errors, r.Data)
		}
		var got struct{ Labels []struct{ Name string } }
		e.do(labelsQuery, nil, &got)
		if len(got.Labels) != 1 || got.Labels[0].Name != "Kept" {
			t.Fatalf("%s: labels after the refusal = %+v, want only Kept", c.name, got.Labels)
		}
		page, err := library.Of(e.store).SavedItemsPage(t.Context(), e.member.ID, library.ItemFilter{Status: library.StatusAll},
			library.PageRequest{Field: library.SortCreatedAt, First: 10})
		if err != nil || len(page.Items) != 0 {
			t.Fatalf("%s: items after the refusal: %+v %v", c.name, page, err)
		}
	}
}

// A download URL ends with the member's access: revoking it (a reset link
// made with --revoke-access, a password change that revokes access) ends
// the links the member's tokens made, as it ends the tokens, rather than
// leaving whoever holds them the items' content for the rest of their hour.
func TestContentLinksEndWhenTheMembersAccessIsRevoked(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, nil)
	before := e.contentLink(it.ID)
	status, h, b := getURL(t, before)
	if status != http.StatusOK {
		t.Fatalf("before the revocation: HTTP %d %s", status, b)
	}
	// The saved page, shown at its link, runs nothing of the site's, and a
	// link followed from it does not tell the link (its secret) to the
	// page it leads to.
	if h.Get("Content-Security-Policy") != "sandbox" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("the HTML download's headers: %v", h)
	}
	if _, _, err := members.Of(e.store).RevokeMemberAccess(t.Context(), e.member.ID); err != nil {
		t.Fatal(err)
	}
	if status, _, b := getURL(t, before); status != http.StatusNotFound || !strings.Contains(string(b), `"NOT_FOUND"`) {
		t.Fatalf("a link made before the revocation: HTTP %d %s, want 404 NOT_FOUND", status, b)
	}
	// A new token of the member's makes links that work.
	_, token, err := apitokens.Of(e.store).Create(t.Context(), e.member.ID, "after", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.token = token
	if status, _, b := getURL(t, e.contentLink(it.ID)); status != http.StatusOK {
		t.Fatalf("a link made after: HTTP %d %s", status, b)
	}
}

// contentLink makes a download URL of the item's content as HTML through
// POST /api/content, as the plugins do.
func (e *env) contentLink(itemID string) string {
	e.t.Helper()
	resp, b := e.postBare(omnivore.ContentPath, e.token, map[string]any{"libraryItemIds": []string{itemID}, "format": "html"})
	var made struct {
		Data []struct {
			DownloadURL string `json:"downloadUrl"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &made); err != nil || resp.StatusCode != 200 || len(made.Data) != 1 {
		e.t.Fatalf("content: HTTP %d %s", resp.StatusCode, b)
	}
	return made.Data[0].DownloadURL
}

// getURL GETs u without credentials.
func getURL(t *testing.T, u string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
