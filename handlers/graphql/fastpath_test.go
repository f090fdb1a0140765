package graphql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/graphql/scalar"
	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The entries fast path must answer exactly what gqlgen's executor answers:
// every operation below runs through both, on the same store, and the
// bodies must be byte for byte the same. served says whether the fast path
// must have written an entries field (false: it must have stepped aside).
func TestEntriesFastPathAnswersWhatGqlgenAnswers(t *testing.T) {
	store, token := fastPathFixture(t)
	fast := unlimited(t, store)
	slow := unlimited(t, store)
	slow.noFastPath = true

	const itemFields = `
fragment Item on SavedItem {
  __typename id createdAt updatedAt title originalUrl sourceDomain description author leadImage
  wordCount type status readingProgress readAt isReadManual
  labels { __typename id createdAt name color order }
}`
	const highlightFields = `
fragment Hl on Highlight {
  __typename id createdAt updatedAt savedItemTitle savedItemOriginalUrl note
  segments { __typename id xpath beforeText afterText startOffset endOffset text }
}`
	cases := []struct {
		name   string
		query  string
		vars   map[string]any
		op     string
		served bool
	}{
		{"bench query", `query Entries($query: GetEntriesInput!) { entries(query: $query) { edges { cursor node { __typename id createdAt ... on SavedItem { title originalUrl wordCount status readingProgress updatedAt labels { id name } } } } pageInfo { hasNextPage endCursor } } }`,
			map[string]any{"query": map[string]any{"first": 50}}, "", true},
		{"every field of saved items", `query($q: GetEntriesInput!) { entries(query: $q) { __typename edges { __typename cursor node { ...Item } } pageInfo { __typename endCursor startCursor hasNextPage hasPreviousPage } } }` + itemFields,
			map[string]any{"q": map[string]any{"first": 100}}, "", true},
		{"every field of archived items", `query($q: GetEntriesInput!) { entries(query: $q) { edges { cursor node { ...Item } } } }` + itemFields,
			map[string]any{"q": map[string]any{"first": 100, "q": "in:archive"}}, "", true},
		{"every field of highlights", `query($q: GetEntriesInput!) { entries(query: $q) { edges { cursor node { ...Hl ... on Highlight { savedItem { ...Item } } } } pageInfo { endCursor hasNextPage } } }` + itemFields + highlightFields,
			map[string]any{"q": map[string]any{"first": 100, "q": "type:highlight"}}, "", true},
		{"content and highlights of items", `{ entries(query: {first: 100}) { edges { node { id ... on SavedItem {
			article { __typename contentHtml contentText } newsletter { __typename contentHtml contentText subscription { id } }
			highlights { id note segments { text startOffset } savedItem { id labels { name } } } } } } } }`, nil, "", true},
		{"literal arguments and sort", `{ entries(query: {first: 3, sort: {field: title, direction: asc}}) { edges { cursor node { id ... on SavedItem { title } } } pageInfo { hasNextPage endCursor } } }`, nil, "", true},
		{"sort by word count, descending, by variable", `query($s: EntrySort) { entries(query: {first: 4, sort: $s}) { edges { node { ... on SavedItem { wordCount } } } } }`,
			map[string]any{"s": map[string]any{"field": "wordCount", "direction": "desc"}}, "", true},
		{"null sort and after", `query($s: EntrySort, $a: String) { entries(query: {sort: $s, after: $a}) { edges { node { id } } pageInfo { hasNextPage } } }`,
			map[string]any{"s": nil, "a": nil}, "", true},
		{"default first", `{ entries(query: {}) { edges { cursor } } }`, nil, "", true},
		{"first as a float", `{ entries(query: {first: 2.0}) { edges { cursor } } }`, nil, "", true},
		{"aliases and two entries fields", `{ a: entries(query: {first: 1}) { e: edges { c: cursor n: node { t: __typename i: id } } } b: entries(query: {first: 1, q: "in:archive"}) { p: pageInfo { __typename hasNextPage } edges { node { ... on SavedItem { s: status } } } } }`, nil, "", true},
		{"skip and include", `query($x: Boolean!) { entries(query: {first: 3}) { edges { node { id kind: __typename @include(if: $x) ... on SavedItem @skip(if: $x) { wordCount } ... on SavedItem @include(if: $x) { title } } } } }`,
			map[string]any{"x": true}, "", true},
		{"skip and include, the other way", `query($x: Boolean!) { entries(query: {first: 3}) { edges { node { id kind: __typename @include(if: $x) ... on SavedItem @skip(if: $x) { wordCount } } } pageInfo @skip(if: $x) { hasNextPage } } }`,
			map[string]any{"x": false}, "", true},
		{"fields merged from fragments", `{ entries(query: {first: 5}) { edges { node { ...A ...B ... on Entry { id } } } } } fragment A on SavedItem { id labels { id } } fragment B on SavedItem { title labels { name color } }`, nil, "", true},
		{"fragment on the connection", `{ entries(query: {first: 2}) { ...C } } fragment C on EntryConnection { edges { node { id } } pageInfo { startCursor } }`, nil, "", true},
		{"with other root fields", `{ labels { id name } entries(query: {first: 2}) { edges { cursor } } me { id } }`, nil, "", true},
		{"named operation among several", `query A { labels { id } } query B { entries(query: {first: 2}) { edges { node { id } } } }`, nil, "B", true},
		{"label and free-text search", `{ entries(query: {first: 10, q: "label:\"bread & <butter>\" quote"}) { edges { node { id } } } }`, nil, "", true},
		{"empty page", `{ entries(query: {first: 10, q: "in:trash"}) { edges { cursor } pageInfo { endCursor startCursor hasNextPage hasPreviousPage } } }`, nil, "", true},
		{"bad q", `{ entries(query: {q: "saved:yesterday..tomorrow"}) { edges { cursor } } }`, nil, "", false},
		{"bad cursor", `{ entries(query: {after: "not-a-cursor"}) { edges { cursor } } }`, nil, "", false},
		{"q too long", `query($q: String) { entries(query: {q: $q}) { edges { cursor } } }`,
			map[string]any{"q": strings.Repeat("x", 201)}, "", false},
		{"validation error", `{ entries(query: {first: 2}) { edges { node { nope } } } }`, nil, "", false},
		{"variable of the wrong type", `query($q: GetEntriesInput!) { entries(query: $q) { edges { cursor } } }`,
			map[string]any{"q": map[string]any{"first": "many"}}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"query": tc.query, "variables": tc.vars, "operationName": tc.op})
			before := fast.fastServed.Load()
			fs, fb := serveOnce(fast, token, body)
			served := fast.fastServed.Load() > before
			ss, sb := serveOnce(slow, token, body)
			if fs != ss || !bytes.Equal(fb, sb) {
				t.Fatalf("fast path: %d %s\ngqlgen:    %d %s", fs, fb, ss, sb)
			}
			if served != tc.served {
				t.Fatalf("fast path served = %v, want %v (answer %d %.300s)", served, tc.served, fs, fb)
			}
			if tc.served && (fs != http.StatusOK || bytes.Contains(fb, []byte(`"errors"`))) {
				t.Fatalf("want a clean answer: %d %s", fs, fb)
			}
		})
	}
	if slow.fastServed.Load() != 0 {
		t.Fatal("the fast path ran with noFastPath set")
	}
}

func serveOnce(s *Server, token string, body []byte) (int, []byte) {
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w.Code, w.Body.Bytes()
}

// fastPathFixture is a member with items and highlights whose fields take
// every shape a marshaler distinguishes: absent optional strings, strings
// that need escaping, big and fractional numbers, read and unread,
// archived, newsletters, labels, several segments.
func fastPathFixture(t *testing.T) (*storage.Store, string) {
	t.Helper()
	store := StoreForTest(t, t.TempDir())
	m, token := MemberForTest(t, store, "fast")
	bread, err := library.Of(store).CreateLabel(t.Context(), m.ID, "bread & <butter>", "#ff8800")
	if err != nil {
		t.Fatal(err)
	}
	quote, err := library.Of(store).CreateLabel(t.Context(), m.ID, `say "cheese" \ now`, "#00aa00")
	if err != nil {
		t.Fatal(err)
	}
	titles := []string{
		`Plain title`,
		`Quotes "inside" and a back\slash`,
		"Tab\tand\nnewline and é, 漢字, emoji 🍞, line separator \u2028 <script>&amp;",
		`</script><b>bold</b> & more`,
	}
	var ids []string
	for n := 0; n < 24; n++ {
		in := library.NewItem{
			URL:       fmt.Sprintf("https://example.com/a/%d?x=%d&y=<%d>", n, n, n),
			Title:     titles[n%len(titles)] + fmt.Sprintf(" %d", n),
			WordCount: []int{0, 7, 1234567, 100000000, 999999}[n%5],
			HTML:      fmt.Sprintf(`<p class="x">Body "%d" & <i>more</i></p>`, n),
			Text:      fmt.Sprintf("Body \"%d\"\nmore", n),
		}
		if n%2 == 0 {
			in.Description = fmt.Sprintf("Description %d with \"quotes\"", n)
			in.Author = "Ann O'Nymous"
			in.LeadImage = fmt.Sprintf("https://example.com/img/%d.png", n)
		}
		if n%3 == 0 {
			in.LabelIDs = []string{bread.ID, quote.ID}
		} else if n%3 == 1 {
			in.LabelIDs = []string{quote.ID}
		}
		if n%7 == 0 {
			in.Type = library.TypeNewsletter
			in.URL = ""
			in.SourceDomain = "news.example.org"
			in.FromName = "The Letter"
			in.FromAddress = "letter@news.example.org"
		}
		it, _, err := library.Of(store).SaveItem(t.Context(), m.ID, in)
		if err != nil {
			t.Fatalf("save %d: %v", n, err)
		}
		ids = append(ids, it.ID)
	}
	if _, err := library.Of(store).UpdateReadingProgress(t.Context(), m.ID, ids[1], 0.375); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(store).UpdateReadingProgress(t.Context(), m.ID, ids[2], 1); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(store).SetItemsRead(t.Context(), m.ID, ids[3:5], true); err != nil {
		t.Fatal(err)
	}
	if _, err := library.Of(store).SetItemsStatus(t.Context(), m.ID, ids[5:8], library.StatusArchived); err != nil {
		t.Fatal(err)
	}
	for i, itemID := range []string{ids[0], ids[0], ids[2], ids[9]} {
		segs := []library.HighlightSegment{{
			XPath: "/html/body/p[1]", BeforeText: `before "` + fmt.Sprint(i), AfterText: "after\n",
			StartOffset: i, EndOffset: i + 12, Text: "highlighted & <quoted>",
		}}
		if i == 1 {
			segs = append(segs, library.HighlightSegment{XPath: "/html/body/p[2]", StartOffset: 0, EndOffset: 3})
		}
		note := ""
		if i%2 == 0 {
			note = "a note\twith a tab"
		}
		if _, err := library.Of(store).CreateHighlight(t.Context(), m.ID, itemID, segs, note); err != nil {
			t.Fatalf("highlight %d: %v", i, err)
		}
	}
	return store, token
}

func TestFastDateTimeIsScalarLayout(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 22, 17, 4, 5, 123456789, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", 5*3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5, 3, 1, 0, 0, 0, 7e6, time.UTC),
		time.Date(2024, 2, 29, 9, 8, 7, 60e6, time.FixedZone("y", -7*3600-1800)),
	} {
		var w jsonWriter
		w.dateTime(tm)
		var want bytes.Buffer
		scalar.MarshalDateTime(tm).MarshalGQL(&want)
		if string(w.buf) != want.String() {
			t.Errorf("%v: %s, want %s", tm, w.buf, want.String())
		}
	}
}

// The npm client's search and updatesSince documents for the package's
// external tests.
const (
	OmnivoreClientSearch  = clientSearch
	OmnivoreClientUpdates = clientUpdates
)

// The npm client's documents as it sends them (@omnivore-app/api 1.0.4,
// src/graphql.ts @ omnivore-app/omnivore-api ce99d23; gql.tada appends the
// fragments), which the Obsidian and Logseq plugins send through it.
const (
	clientFragments = `
fragment PageInfoFragment on PageInfo { hasNextPage hasPreviousPage startCursor endCursor totalCount }
fragment LabelFragment on Label { name color createdAt id internal source description }
fragment HighlightFragment on Highlight { id quote annotation patch updatedAt labels { ...LabelFragment } type
  highlightPositionPercent color highlightPositionAnchorIndex prefix suffix createdAt }
fragment SearchItemFragment on SearchItem { id title siteName originalArticleUrl author description slug
  labels { ...LabelFragment } highlights { ...HighlightFragment } updatedAt savedAt pageType content publishedAt
  url image readAt wordsCount readingProgressPercent isArchived archivedAt contentReader }`
	clientSearch = `query Search($after: String, $first: Int, $format: String, $includeContent: Boolean, $query: String) {
  search(after: $after, first: $first, format: $format, includeContent: $includeContent, query: $query) {
    __typename ... on SearchSuccess { edges { node { ...SearchItemFragment } } pageInfo { ...PageInfoFragment } }
    ... on SearchError { errorCodes } } }` + clientFragments
	clientUpdates = `query UpdatesSince($after: String, $first: Int, $since: Date!) {
  updatesSince(after: $after, first: $first, since: $since) {
    __typename ... on UpdatesSinceSuccess { edges { itemID updateReason node { ...SearchItemFragment } } pageInfo { ...PageInfoFragment } }
    ... on UpdatesSinceError { errorCodes } } }` + clientFragments
)

// search and updatesSince through the fast path answer what gqlgen's
// executor answers, for the client's documents with the variables the
// plugins send (obsidian-omnivore @ 619013b src/main.ts fetchOmnivore;
// logseq-omnivore @ 0174149 src/index.ts and src/api.ts), and for every
// field of the types.
func TestOmnivoreFastPathAnswersWhatGqlgenAnswers(t *testing.T) {
	store, token := fastPathFixture(t)
	fast := unlimited(t, store)
	slow := unlimited(t, store)
	slow.noFastPath = true

	// Deletions, one for good: updatesSince reports both.
	memberID := fastPathMember(t, store)
	lib := library.Of(store)
	page, err := lib.SavedItemsPage(t.Context(), memberID, library.ItemFilter{}, library.PageRequest{Field: library.SortCreatedAt, First: 3})
	if err != nil || len(page.Items) < 3 {
		t.Fatal(page, err)
	}
	if _, err := lib.SetItemsStatus(t.Context(), memberID, []string{page.Items[0].ID, page.Items[1].ID}, library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := lib.PermanentlyDeleteItems(t.Context(), memberID, []string{page.Items[1].ID}); err != nil {
		t.Fatal(err)
	}
	const every = `
fragment Every on SearchItem { __typename id title slug url pageType contentReader createdAt updatedAt isArchived
  readingProgressPercent readingProgressTopPercent readingProgressAnchorIndex author image description publishedAt
  originalArticleUrl labels { __typename id createdAt name color order description internal source position }
  subscription state siteName readAt savedAt wordsCount content archivedAt folder highlightsCount
  highlights { __typename id createdAt updatedAt savedItemTitle savedItemOriginalUrl note quote prefix suffix patch
    annotation highlightPositionPercent highlightPositionAnchorIndex type color shortId labels { id }
    segments { id xpath beforeText afterText startOffset endOffset text } } }`
	cases := []struct {
		name   string
		query  string
		vars   map[string]any
		served bool
	}{
		{"obsidian first sync, first page", clientSearch, map[string]any{"first": 15, "after": "0", "query": "in:all sort:saved-asc", "includeContent": false, "format": "highlightedMarkdown"}, true},
		{"obsidian first sync, second page", clientSearch, map[string]any{"first": 15, "after": "15", "query": "in:all sort:saved-asc", "includeContent": false, "format": "highlightedMarkdown"}, true},
		{"obsidian incremental", clientSearch, map[string]any{"first": 15, "after": "0", "query": "updated:2020-01-01T00:00:00.000Z sort:saved-asc in:all", "includeContent": false, "format": "highlightedMarkdown"}, true},
		{"content as highlightedMarkdown", clientSearch, map[string]any{"first": 15, "after": "0", "query": "in:all", "includeContent": true, "format": "highlightedMarkdown"}, true},
		{"content as markdown and html", clientSearch, map[string]any{"first": 10, "query": "in:archive", "includeContent": true, "format": "markdown"}, true},
		{"logseq in:all", clientSearch, map[string]any{"first": 15, "after": "0", "query": "in:all", "includeContent": false, "format": "markdown"}, true},
		{"logseq has:highlights", clientSearch, map[string]any{"first": 15, "after": "0", "query": "has:highlights in:all", "includeContent": false}, true},
		{"label and sort", clientSearch, map[string]any{"first": 15, "query": `label:"bread & <butter>" sort:updated-asc`}, true},
		{"past the end", clientSearch, map[string]any{"first": 15, "after": "1000", "query": "in:all"}, true},
		{"logseq updatesSince", clientUpdates, map[string]any{"first": 15, "after": "0", "since": "2020-01-01T00:00:00.000Z"}, true},
		{"updatesSince, second page", clientUpdates, map[string]any{"first": 15, "after": "15", "since": "2020-01-01"}, true},
		{"every field", `query($a: String) { search(first: 30, query: "in:all", after: $a, includeContent: true) { __typename ... on SearchSuccess { __typename edges { __typename cursor node { ...Every } } pageInfo { __typename startCursor endCursor hasNextPage hasPreviousPage totalCount } } } }` + every, map[string]any{"a": nil}, true},
		{"every field of updates", `{ u: updatesSince(since: "2020-01-01", first: 25, folder: "all") { __typename ... on UpdatesSinceSuccess { edges { __typename cursor updateReason itemID node { ...Every } } pageInfo { endCursor } } } }` + every, nil, true},
		{"search error", clientSearch, map[string]any{"first": 15, "query": strings.Repeat("x", 256)}, true},
		{"bad format", clientSearch, map[string]any{"first": 15, "format": "pdf"}, false},
		{"bad query", clientSearch, map[string]any{"first": 15, "query": "saved:yesterday..tomorrow"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"query": tc.query, "variables": tc.vars})
			before := fast.fastServed.Load()
			fs, fb := serveOnce(fast, token, body)
			served := fast.fastServed.Load() > before
			ss, sb := serveOnce(slow, token, body)
			if fs != ss || !bytes.Equal(fb, sb) {
				t.Fatalf("fast path: %d %s\ngqlgen:    %d %s", fs, firstDifference(fb, sb), ss, firstDifference(sb, fb))
			}
			if served != tc.served {
				t.Fatalf("fast path served = %v, want %v (answer %d %.300s)", served, tc.served, fs, fb)
			}
			if tc.served && (fs != http.StatusOK || bytes.Contains(fb, []byte(`"errors"`))) {
				t.Fatalf("want a clean answer: %d %s", fs, fb)
			}
		})
	}
}

// fastPathMember is the id of fastPathFixture's member.
func fastPathMember(t *testing.T, store *storage.Store) string {
	t.Helper()
	m, err := members.Of(store).Member(t.Context(), "fast")
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// firstDifference is a, from a little before where it differs from b.
func firstDifference(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("(at byte %d of %d) …%s", i, len(a), a[max(0, i-200):min(len(a), i+200)])
}

// A page by offset on a node that served none of the pages before it
// reads the offset from the store's fences, and lists what the node that
// paged in order lists, in both orders and past the end.
func TestOmnivoreOffsetOnAnotherNode(t *testing.T) {
	store, token := fastPathFixture(t)
	page := func(s *Server, query string, after int) string {
		body, _ := json.Marshal(map[string]any{"query": `query($q: String, $a: String) { search(first: 5, after: $a, query: $q) {
			... on SearchSuccess { edges { cursor node { id } } pageInfo { hasNextPage endCursor totalCount } } } }`,
			"variables": map[string]any{"q": query, "a": fmt.Sprint(after)}})
		status, out := serveOnce(s, token, body)
		if status != http.StatusOK || bytes.Contains(out, []byte(`"errors"`)) {
			t.Fatalf("%d %s", status, out)
		}
		return string(out)
	}
	for _, query := range []string{"in:all sort:saved-asc", "in:inbox", "in:archive sort:saved-asc", "sort:saved-desc in:all"} {
		inOrder := unlimited(t, store)
		var want []string
		for after := 0; after <= 30; after += 5 {
			want = append(want, page(inOrder, query, after))
		}
		for i, after := 0, 0; after <= 30; i, after = i+1, after+5 {
			other := unlimited(t, store)
			if got := page(other, query, after); got != want[i] {
				t.Errorf("%q after %d on another node:\n%s\nwant\n%s", query, after, got, want[i])
			}
		}
	}
}

// unlimited is the API on its own library service of store, without rate
// limits; the service is closed when the test ends.
func unlimited(tb testing.TB, store *storage.Store) *Server {
	return newTestServer(tb, store, libraryservice.Options{TokenRateLimit: -1, MemberRateLimit: -1})
}

// newTestServer is the API on its own library service of store, built
// from lo as caddymodule builds them; the service is closed when the test
// ends.
func newTestServer(tb testing.TB, store *storage.Store, lo libraryservice.Options) *Server {
	lib := libraryservice.Prepare(store, lo)
	tb.Cleanup(func() { lib.Close() })
	return New(store, lib, Options{})
}
