package graphql_test

import "testing"

// BenchmarkSearchContentPastTheBudget asks Omnivore's search for a page of
// 100 items with their content as Markdown (includeContent, as the
// plugins' search asks it), each item of 512 KiB of HTML, against a content
// budget of 8 MiB (MaxContentBytes): the page meets the budget at its
// 17th item. The fast path then steps aside and gqlgen's executor serves
// the page again, a goroutine an item. It reports besides the largest heap
// seen (peaks, as the imports' benchmarks do).
func BenchmarkSearchContentPastTheBudget(b *testing.B) {
	benchContentPastTheBudget(b, 100, 512<<10, map[string]any{
		"query": `query S($first: Int, $includeContent: Boolean, $format: String) {
  search(first: $first, includeContent: $includeContent, format: $format) {
    ... on SearchSuccess { edges { node { id content } } }
    ... on SearchError { errorCodes }
  }
}`,
		"variables": map[string]any{"first": 100, "includeContent": true, "format": "markdown"}})
}
