package graphql_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage"
)

// A highlight's savedItem is its item again, with its highlights: nesting
// them multiplied the response by the number of highlights at every level
// (the reviewer's query below returned 108 MB for one 100 KB article with
// 10 highlights), and the complexity limit let it through. Such nesting is
// refused before it runs, with the complexity error, at the default limit;
// the queries sync clients run, 100 entries with labels and highlights,
// still pass.
func TestComplexityRefusesNestedHighlights(t *testing.T) {
	e := newEnv(t, graphql.Options{TokenRateLimit: -1, MemberRateLimit: -1})
	body := "<p>" + strings.Repeat("lorem ipsum ", 8000) + "</p>"
	art := e.saveArticle(e.member.ID, 1, func(in *storage.NewItem) { in.HTML, in.Text = body, body })
	for i := range 10 {
		if _, err := e.store.CreateHighlight(e.member.ID, art.ID, []storage.HighlightSegment{{XPath: "/p", EndOffset: 5, Text: fmt.Sprint("h", i)}}, ""); err != nil {
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
		r := e.wantError(e.token, q, vars, http.StatusUnprocessableEntity, "COMPLEXITY_LIMIT_EXCEEDED")
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
	e := newEnv(t, graphql.Options{TokenRateLimit: -1, MemberRateLimit: -1, MaxComplexity: 50})
	var ids []string
	for i := range 30 {
		ids = append(ids, e.saveArticle(e.member.ID, i, nil).ID)
	}
	const q = `mutation($ids:[String!]!){updateSavedItemsStatus(data:{ids:$ids,status:ARCHIVED}){id title status updatedAt}}`
	e.wantError(e.token, q, map[string]any{"ids": ids}, http.StatusUnprocessableEntity, "COMPLEXITY_LIMIT_EXCEEDED")
	e.do(q, map[string]any{"ids": ids[:10]}, nil)
}

// Inboxt's web app archives and marks read in bulk with its 14-field item
// selection; up to storage.MaxBatchIDs (500) ids pass at the default limit
// (7001 > 5000 when every id counted one selection).
func TestComplexityAllowsInboxtBulkMutations(t *testing.T) {
	e := newEnv(t, graphql.Options{TokenRateLimit: -1, MemberRateLimit: -1})
	var ids []string
	for i := range storage.MaxBatchIDs {
		ids = append(ids, e.saveArticle(e.member.ID, i, nil).ID)
	}
	var out struct{ UpdateSavedItemsStatus []struct{ ID, Status string } }
	e.do(updateStatusMutation, map[string]any{"data": map[string]any{"ids": ids, "status": "ARCHIVED"}}, &out)
	if len(out.UpdateSavedItemsStatus) != len(ids) || out.UpdateSavedItemsStatus[0].Status != "ARCHIVED" {
		t.Fatalf("updateSavedItemsStatus returned %d items", len(out.UpdateSavedItemsStatus))
	}
	e.do(readStatusMutation, map[string]any{"data": map[string]any{"ids": ids, "isRead": true}}, nil)
}
