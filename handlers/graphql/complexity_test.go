package graphql_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql/introspection"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// A highlight's savedItem is its item again, with its highlights: nesting
// them multiplied the response by the number of highlights at every level
// (the reviewer's query below returned 108 MB for one 100 KB article with
// 10 highlights), and the complexity limit let it through. Such nesting is
// refused before it runs, with the complexity error, at the default limit;
// the queries sync clients run, 100 entries with labels and highlights,
// still pass.
func TestComplexityRefusesNestedHighlights(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: -1, MemberRateLimit: -1})
	body := "<p>" + strings.Repeat("lorem ipsum ", 8000) + "</p>"
	art := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) { in.HTML, in.Text = body, body })
	for i := range 10 {
		if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, art.ID, []library.HighlightSegment{{XPath: "/p", EndOffset: 5, Text: fmt.Sprint("h", i)}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i <= 120; i++ {
		e.saveArticle(e.member.ID, i, nil)
	}
	vars := map[string]any{"i": art.ID}
	for _, q := range []string{
		`query($i:String!){savedItem(query:{id:$i}){highlights{savedItem{highlights{savedItem{highlights{savedItem{article{contentHtml}}}}}}}}}`,
		`query($i:String!){savedItem(query:{id:$i}){highlights{savedItem{highlights{savedItem{article{contentHtml}}}}}}}`,
		`query($i:String!){savedItem(query:{id:$i}){highlights{savedItem{highlights{id}}}}}`,
		`query($i:String!){savedItem(query:{id:$i}){highlights{savedItem{article{contentHtml}}}}}`,
		`{entries(query:{first:100}){edges{node{...on SavedItem{highlights{savedItem{highlights{savedItem{newsletter{contentHtml}}}}}}}}}}`,
		`{entries(query:{first:5,q:"type:highlight"}){edges{node{...on Highlight{savedItem{highlights{savedItem{article{contentText}}}}}}}}}`,
	} {
		r := e.wantError(e.token, q, vars, http.StatusBadRequest, "COMPLEXITY_LIMIT_EXCEEDED")
		if string(r.Data) != "" && string(r.Data) != "null" {
			t.Fatalf("%s: refused, yet data = %.200s", q, r.Data)
		}
		if !strings.Contains(r.Errors[0].Message, "exceeds the limit of 5000") {
			t.Fatalf("%s: message %q", q, r.Errors[0].Message)
		}
	}

	const item = `fragment Item on SavedItem {
  __typename id createdAt updatedAt title originalUrl sourceDomain description author leadImage
  wordCount type status readingProgress readAt isReadManual labels { id createdAt name color order } }`
	for _, q := range []string{
		entriesQuery,
		`query($query: GetEntriesInput!) { entries(query: $query) { edges { cursor node { ...Item } } pageInfo { endCursor hasNextPage } } }` + item,
		`query($query: GetEntriesInput!) { entries(query: $query) { edges { node { id ... on SavedItem { title labels { name }
			article { contentHtml contentText } newsletter { contentHtml contentText }
			highlights { id note segments { text startOffset } savedItem { id labels { name } } } } } } } }`,
		`query($query: GetEntriesInput!) { entries(query: $query) { edges { node { ... on Highlight { id note createdAt updatedAt
			savedItemTitle segments { id xpath beforeText afterText startOffset endOffset text } savedItem { ...Item } } } } } }` + item,
	} {
		r := e.post(e.token, q, map[string]any{"query": map[string]any{"first": 100}})
		if r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Fatalf("%s: status %d, errors %+v", q, r.Status, r.Errors)
		}
	}
	// The item's own highlights and their text are as cheap as before.
	var got struct {
		SavedItem struct {
			Highlights []struct {
				SavedItem struct{ ID string }
			}
		}
	}
	e.do(`query($i:String!){savedItem(query:{id:$i}){ article { contentHtml } highlights{ id savedItem { id title labels { name } } }}}`, vars, &got)
	if len(got.SavedItem.Highlights) != 10 || got.SavedItem.Highlights[0].SavedItem.ID != art.ID {
		t.Fatalf("highlights = %+v", got.SavedItem.Highlights)
	}
}

// List results of item mutations count one selection per two ids given.
func TestComplexityCountsMutationListsByIDs(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: -1, MemberRateLimit: -1, MaxComplexity: 50})
	var ids []string
	for i := range 30 {
		ids = append(ids, e.saveArticle(e.member.ID, i, nil).ID)
	}
	const q = `mutation($ids:[String!]!){updateSavedItemsStatus(data:{ids:$ids,status:ARCHIVED}){id title status updatedAt}}`
	e.wantError(e.token, q, map[string]any{"ids": ids}, http.StatusBadRequest, "COMPLEXITY_LIMIT_EXCEEDED")
	e.do(q, map[string]any{"ids": ids[:10]}, nil)
}

// Inboxt's web app archives and marks read in bulk with its 14-field item
// selection; up to library.MaxBatchIDs (500) ids pass at the default limit
// (7001 > 5000 when every id counted one selection).
func TestComplexityAllowsInboxtBulkMutations(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: -1, MemberRateLimit: -1})
	var ids []string
	for i := range library.MaxBatchIDs {
		ids = append(ids, e.saveArticle(e.member.ID, i, nil).ID)
	}
	var out struct{ UpdateSavedItemsStatus []struct{ ID, Status string } }
	e.do(updateStatusMutation, map[string]any{"data": map[string]any{"ids": ids, "status": "ARCHIVED"}}, &out)
	if len(out.UpdateSavedItemsStatus) != len(ids) || out.UpdateSavedItemsStatus[0].Status != "ARCHIVED" {
		t.Fatalf("updateSavedItemsStatus returned %d items", len(out.UpdateSavedItemsStatus))
	}
	e.do(readStatusMutation, map[string]any{"data": map[string]any{"ids": ids, "isRead": true}}, nil)
}

// Queries that cost little yet answered hundreds of megabytes (the
// reviewer's: 4900 aliases of one 240 KB article's content, 1.18 GB; a
// page of 100 highlights each with its item's content 40 times, 960 MB;
// 3000 aliased introspections, 47.7 MB) are refused before they run: the
// contents and introspection are priced so that aliases multiply them, and
// a highlight entry's item counts as repeated. The standard introspection
// query and a sync client's page of 50 items with content and highlights
// still pass.
func TestComplexityPricesContentAndIntrospection(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: -1, MemberRateLimit: -1})
	body := "<p>" + strings.Repeat("lorem ipsum ", 20000) + "</p>"
	art := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) { in.HTML, in.Text = body, body })
	for i := range 100 {
		if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, art.ID, []library.HighlightSegment{{XPath: "/p", EndOffset: 5, Text: fmt.Sprint("h", i)}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	aliases := func(n int, sel string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "a%d:%s ", i, sel)
		}
		return b.String()
	}
	for _, q := range []string{
		`query($i:String!){savedItem(query:{id:$i}){article{` + aliases(4900, "contentHtml") + `}}}`,
		`query($i:String!){savedItem(query:{id:$i}){newsletter{` + aliases(1001, "contentText") + `}}}`,
		`{entries(query:{first:100,q:"type:highlight"}){edges{node{...on Highlight{savedItem{article{` + aliases(40, "contentHtml") + `}}}}}}}`,
		`{` + aliases(3000, "__schema{types{name fields{name args{name} type{name ofType{name}}}}}") + `}`,
		`{__schema{types{` + aliases(3000, "fields{name}") + `}}}`,
	} {
		// Refused by their price, or before by the document limits
		// (limits.go: more aliases or fields than a document may have).
		r := e.post(e.token, q, map[string]any{"i": art.ID})
		if len(r.Errors) == 0 || r.Status != http.StatusBadRequest || (r.Errors[0].Code() != "COMPLEXITY_LIMIT_EXCEEDED" &&
			r.Errors[0].Code() != "GRAPHQL_VALIDATION_FAILED" && r.Errors[0].Code() != "GRAPHQL_PARSE_FAILED") {
			t.Fatalf("%.100s: status %d, errors %+v; want it refused", q, r.Status, r.Errors)
		}
		if string(r.Data) != "" && string(r.Data) != "null" {
			t.Fatalf("%.100s: refused, yet data = %.200s", q, r.Data)
		}
	}

	e.do(introspection.Query, nil, nil)
	// A page of highlight entries with their item's content is priced as a
	// page of items (the content budget bounds what it carries).
	e.do(`{entries(query:{first:100,q:"type:highlight"}){edges{node{...on Highlight{savedItem{title article{contentHtml}}}}}}}`, nil, nil)
	e.do(`query($i:String!){savedItem(query:{id:$i}){ title article { contentHtml contentText } newsletter { contentHtml contentText } }}`, map[string]any{"i": art.ID}, nil)
	for i := 2; i <= 60; i++ {
		e.saveArticle(e.member.ID, i, func(in *library.NewItem) { in.HTML, in.Text = body, body })
	}
	const sync = `query($query: GetEntriesInput!) { entries(query: $query) { edges { cursor node { __typename id createdAt ... on SavedItem {
		updatedAt title originalUrl sourceDomain description author leadImage wordCount type status readingProgress readAt isReadManual
		labels { id createdAt name color order } article { contentHtml } newsletter { contentHtml }
		highlights { id note createdAt updatedAt segments { id xpath beforeText afterText startOffset endOffset text } } } } }
		pageInfo { endCursor hasNextPage } } }`
	var got struct {
		Entries struct {
			Edges []struct {
				Node struct{ Article *struct{ ContentHTML string } }
			}
		}
	}
	e.do(sync, map[string]any{"query": map[string]any{"first": 50}}, &got)
	if len(got.Entries.Edges) != 50 || got.Entries.Edges[0].Node.Article == nil || got.Entries.Edges[0].Node.Article.ContentHTML == "" {
		t.Fatalf("sync page: %d edges", len(got.Entries.Edges))
	}
}

// The contents one response carries are bounded at run time
// (Options.MaxContentBytes): past it, further content fields resolve to
// CONTENT_LIMIT_EXCEEDED errors, in gqlgen's executor and in the entries
// fast path alike, and their article is null.
func TestContentBudgetBoundsResponses(t *testing.T) {
	const budget = 1 << 20
	e := newEnv(t, options{TokenRateLimit: -1, MemberRateLimit: -1, MaxContentBytes: budget})
	body := strings.Repeat("x", 300_000)
	var first *library.SavedItem
	for i := range 5 {
		it := e.saveArticle(e.member.ID, i, func(in *library.NewItem) { in.HTML, in.Text = "<p>"+body+"</p>", body })
		if first == nil {
			first = it
		}
	}
	check := func(name string, r *response, nonNull int, articles func() []*json.RawMessage) {
		t.Helper()
		if r.Status != http.StatusOK || len(r.Errors) == 0 {
			t.Fatalf("%s: status %d, errors %+v", name, r.Status, r.Errors)
		}
		for _, e := range r.Errors {
			if e.Code() != "CONTENT_LIMIT_EXCEEDED" || !strings.Contains(e.Message, "exceed 1048576 bytes") {
				t.Fatalf("%s: error %+v", name, e)
			}
		}
		n := 0
		for _, a := range articles() {
			if a != nil && string(*a) != "null" {
				n++
			}
		}
		if n != nonNull {
			t.Fatalf("%s: %d articles with content, want %d", name, n, nonNull)
		}
		if len(r.Data) > budget+100_000 {
			t.Fatalf("%s: %d bytes of data", name, len(r.Data))
		}
	}

	// gqlgen's executor: 5 aliases of a 300 KB content, 3 fit.
	q := `query($i:String!){savedItem(query:{id:$i}){` + "a0:article{contentText} a1:article{contentText} a2:article{contentText} a3:article{contentText} a4:article{contentText}" + `}}`
	r := e.post(e.token, q, map[string]any{"i": first.ID})
	var one struct{ SavedItem map[string]*json.RawMessage }
	if err := json.Unmarshal(r.Data, &one); err != nil {
		t.Fatal(err)
	}
	check("savedItem", r, 3, func() (out []*json.RawMessage) {
		for _, a := range one.SavedItem {
			out = append(out, a)
		}
		return out
	})

	// The fast path: a page of 5 items with their content; it steps aside,
	// and gqlgen serves the page with the budget it left untouched.
	r = e.post(e.token, `{entries(query:{first:5}){edges{node{...on SavedItem{article{contentText}}}}}}`, nil)
	var page struct {
		Entries struct {
			Edges []struct {
				Node struct{ Article *json.RawMessage }
			}
		}
	}
	if err := json.Unmarshal(r.Data, &page); err != nil {
		t.Fatal(err)
	}
	check("entries", r, 3, func() (out []*json.RawMessage) {
		for _, e := range page.Entries.Edges {
			out = append(out, e.Node.Article)
		}
		return out
	})

	// Within the budget nothing changes.
	e.do(`{entries(query:{first:3}){edges{node{...on SavedItem{article{contentText}}}}}}`, nil, nil)
	e.do(`{a:entries(query:{first:2}){edges{node{...on SavedItem{article{contentText}}}}} b:entries(query:{first:1}){edges{node{id}}}}`, nil, nil)
}

// Highlight texts count in the same budget: an item's highlights are not
// bounded in number, so aliases of them could otherwise carry gigabytes
// within the complexity limit (found in review: 1.8 GB at cost 5000).
func TestContentBudgetCountsHighlightTexts(t *testing.T) {
	const budget = 1 << 20
	e := newEnv(t, options{TokenRateLimit: -1, MemberRateLimit: -1, MaxContentBytes: budget})
	art := e.saveArticle(e.member.ID, 0, func(*library.NewItem) {})
	seg := strings.Repeat("s", 9000)
	for range 10 {
		segs := make([]library.HighlightSegment, 20)
		for i := range segs {
			segs[i] = library.HighlightSegment{XPath: "/p", EndOffset: 5, Text: seg, BeforeText: "b", AfterText: "a"}
		}
		if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, art.ID, segs, strings.Repeat("n", 9000)); err != nil {
			t.Fatal(err)
		}
	}
	// About 1.9 MB of highlight text per alias; 8 aliases.
	var q strings.Builder
	q.WriteString(`query($i:String!){`)
	for i := range 8 {
		fmt.Fprintf(&q, `a%d:savedItem(query:{id:$i}){highlights{note segments{text}}} `, i)
	}
	q.WriteString(`}`)
	r := e.post(e.token, q.String(), map[string]any{"i": art.ID})
	if r.Status != http.StatusOK || len(r.Errors) == 0 || r.Errors[0].Code() != "CONTENT_LIMIT_EXCEEDED" {
		t.Fatalf("savedItem aliases: status %d, errors %+v", r.Status, r.Errors)
	}
	if len(r.Data) > budget+200_000 {
		t.Fatalf("savedItem aliases: %d bytes of data with a budget of %d", len(r.Data), budget)
	}
	// The fast path: highlight entries with their texts.
	r = e.post(e.token, `{a:entries(query:{first:10,q:"type:highlight"}){edges{node{...on Highlight{note segments{text}}}}} b:entries(query:{first:10,q:"type:highlight"}){edges{node{...on Highlight{note segments{text}}}}}}`, nil)
	if r.Status != http.StatusOK || len(r.Errors) == 0 || r.Errors[0].Code() != "CONTENT_LIMIT_EXCEEDED" {
		t.Fatalf("highlight entries: status %d, errors %+v", r.Status, r.Errors)
	}
	if len(r.Data) > budget+200_000 {
		t.Fatalf("highlight entries: %d bytes of data with a budget of %d", len(r.Data), budget)
	}
}

// A search (q filtering by more than a status and a type) may look at up
// to the library's search budget of items to fill one page, so it is
// priced: one passes with the heaviest page sync clients ask for, a dozen
// aliases of it do not, while aliases of plain listings stay cheap.
func TestComplexityPricesSearches(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: -1, MemberRateLimit: -1})
	aliases := func(n int, q string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, " a%d: entries(query: {first: 1, q: %q}) { edges { node { __typename } } }", i, q)
		}
		return b.String() + " }"
	}
	for _, q := range []string{"fern", "label:x", "site:example.com", "progress:0..10", "updated:2020-01-01..*", "type:highlight fern"} {
		if r := e.post(e.token, aliases(1, q), nil); r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Fatalf("one search %q: %d %+v", q, r.Status, r.Errors)
		}
		e.wantError(e.token, aliases(13, q), nil, http.StatusBadRequest, "COMPLEXITY_LIMIT_EXCEEDED")
	}
	for _, q := range []string{"", "in:inbox", "in:archive type:article sort:title_asc", "type:highlight"} {
		if r := e.post(e.token, aliases(13, q), nil); r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Fatalf("13 listings %q: %d %+v", q, r.Status, r.Errors)
		}
	}
	heavy := `query($query: GetEntriesInput!) { entries(query: $query) { edges { node { id ... on SavedItem { title labels { name }
		article { contentHtml contentText } newsletter { contentHtml contentText }
		highlights { id note segments { text startOffset } savedItem { id labels { name } } } } } } } }`
	if r := e.post(e.token, heavy, map[string]any{"query": map[string]any{"first": 100, "q": "updated:2020-01-01..* sort:updated-asc"}}); r.Status != http.StatusOK || len(r.Errors) > 0 {
		t.Fatalf("a sync client's page: %d %+v", r.Status, r.Errors)
	}
}

// Reading a page a client sends (savePage, addArticleFromHtmlSnapshot)
// costs readability's pass over it, about a second of CPU at the fetcher's
// largest size, where a field's price is one: aliases of them would
// multiply one request's cost by up to MaxAliases. An operation may save
// one such page; a second, by an alias, a fragment or the other field,
// refuses the operation before anything runs, and one alone still saves.
func TestAnOperationSavesOnePageSentWithIt(t *testing.T) {
	e := newEnv(t, options{})
	page := "<html><head><title>Bread</title></head><body><article><p>" + strings.Repeat("Flour, water and salt, and time. ", 40) + "</p></article></body></html>"
	vars := map[string]any{"i": map[string]any{"url": "https://example.com/bread", "source": "extension", "clientRequestId": "c1", "originalContent": page}, "h": page}
	for name, q := range map[string]string{
		"aliases":   `mutation($i: SavePageInput!){a: savePage(input:$i){__typename} b: savePage(input:$i){__typename}}`,
		"fragment":  `mutation($i: SavePageInput!){savePage(input:$i){__typename} ...again} fragment again on Mutation {b: savePage(input:$i){__typename}}`,
		"both":      `mutation($i: SavePageInput!, $h: String!){savePage(input:$i){__typename} addArticleFromHtmlSnapshot(data:{url:"https://example.com/rye", html:$h})}`,
		"snapshots": `mutation($h: String!){a: addArticleFromHtmlSnapshot(data:{url:"https://example.com/a", html:$h}) b: addArticleFromHtmlSnapshot(data:{url:"https://example.com/b", html:$h})}`,
	} {
		r := e.wantError(e.token, q, vars, http.StatusBadRequest, "GRAPHQL_VALIDATION_FAILED")
		if msg := r.Errors[0].Message; !strings.Contains(msg, "one operation may read one") {
			t.Errorf("%s: message %q, want it to say one page an operation", name, msg)
		}
	}
	saved, err := library.Of(e.store).SavedItemsPage(t.Context(), e.member.ID, library.ItemFilter{Status: library.StatusAll}, library.PageRequest{Field: library.SortCreatedAt, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Items) != 0 {
		t.Fatalf("%d items after the refused operations, want none saved", len(saved.Items))
	}
	var out struct {
		SavePage struct{ ClientRequestID string } `json:"savePage"`
	}
	e.do(`mutation($i: SavePageInput!){savePage(input:$i){... on SaveSuccess{clientRequestId}}}`, vars, &out)
	if out.SavePage.ClientRequestID == "" {
		t.Fatal("one savePage alone saved nothing")
	}
}

// Omnivore's createHighlight of a HIGHLIGHT places its quote in the item's
// stored content, a parse and walk of a page of up to several MiB, where
// the field's price is one: its aliases would multiply that as savePage's
// would. An operation may read one whole page, so a second such
// createHighlight (by an alias, a fragment, or beside savePage, at either
// endpoint, its type written or left to the default) refuses the operation
// before anything runs; NOTEs read no page and may be many.
func TestAnOperationCreatesOneHighlightFromAQuote(t *testing.T) {
	e := newEnv(t, options{})
	it, _, err := library.Of(e.store).SaveItem(t.Context(), e.member.ID, library.NewItem{URL: "https://example.com/p", Title: "p", HTML: "<p>some text here</p>", Text: "some text here"})
	if err != nil {
		t.Fatal(err)
	}
	hl := func(quote string) map[string]any {
		return map[string]any{"id": "x", "shortId": "y", "articleId": it.ID, "quote": quote}
	}
	page := map[string]any{"source": "extension", "clientRequestId": "c1", "url": "https://example.com/bread", "originalContent": "<p>bread</p>"}
	vars := map[string]any{"id": it.ID, "a": hl("some"), "b": hl("text"), "p": page}
	for name, q := range map[string]string{
		"literal HIGHLIGHTs": `mutation($id: ID!) { a: createHighlight(input: {id: "x", shortId: "y", type: HIGHLIGHT, articleId: $id, quote: "some"}) { __typename }
			b: createHighlight(input: {id: "x", shortId: "y", type: HIGHLIGHT, articleId: $id, quote: "text"}) { __typename } }`,
		"default type in variables": `mutation($a: CreateHighlightInput!, $b: CreateHighlightInput!) { a: createHighlight(input: $a) { __typename } ...b }
			fragment b on Mutation { b: createHighlight(input: $b) { __typename } }`,
		"beside savePage": `mutation($a: CreateHighlightInput!, $p: SavePageInput!) { createHighlight(input: $a) { __typename } savePage(input: $p) { __typename } }`,
	} {
		a := e.omnivore(e.token, q, vars)
		if a.Status != http.StatusBadRequest || len(a.Errors) != 1 || a.Errors[0].Code() != "GRAPHQL_VALIDATION_FAILED" || !strings.Contains(a.Errors[0].Message, "one operation may read one") {
			t.Errorf("%s: status %d, %d answers, errors %+v", name, a.Status, len(a.Data), a.Errors)
		}
	}
	r := e.wantError(e.token, `mutation($a: OmnivoreCreateHighlightInput!, $b: OmnivoreCreateHighlightInput!) { a: omnivoreCreateHighlight(input: $a) { __typename }
		b: omnivoreCreateHighlight(input: $b) { __typename } }`, vars, http.StatusBadRequest, "GRAPHQL_VALIDATION_FAILED")
	if !strings.Contains(r.Errors[0].Message, "one operation may read one") {
		t.Errorf("at /api/graphql: %+v", r.Errors)
	}
	if hs, err := library.Of(e.store).ItemHighlights(t.Context(), e.member.ID, it.ID); err != nil || len(hs) != 0 {
		t.Fatalf("after the refused operations: %d highlights (%v), want none", len(hs), err)
	}
	// NOTEs, however their type is written, and one HIGHLIGHT beside them.
	note := hl("")
	note["type"], note["annotation"] = "NOTE", "first"
	a := e.omnivoreOK(e.token, `mutation($n: CreateHighlightInput!, $id: ID!) { a: createHighlight(input: $n) { __typename }
		b: createHighlight(input: {id: "x", shortId: "y", type: NOTE, articleId: $id, annotation: "second"}) { __typename }
		c: createHighlight(input: {id: "x", shortId: "y", articleId: $id, quote: "text"}) { ... on CreateHighlightSuccess { highlight { id } } } }`,
		map[string]any{"n": note, "id": it.ID})
	if len(a.Data) != 3 || a.Data["c"] == nil || a.Data["c"].Highlight == nil {
		t.Fatalf("two NOTEs and a HIGHLIGHT: %+v", a)
	}
	h, err := library.Of(e.store).Highlight(t.Context(), e.member.ID, a.Data["c"].Highlight.ID)
	if err != nil || library.Unplaced(h.Segments) {
		t.Fatalf("the HIGHLIGHT beside the NOTEs: %+v (%v), want it placed", h, err)
	}
}
