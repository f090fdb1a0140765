package libraryservice

import (
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/library/query"
)

// exportQuery reads q as the GraphQL API's entries does, for
// handlers/export's feeds and books: newest first unless it sorts.
func exportQuery(q string) (*export.Query, error) {
	s, err := query.Parse(q)
	if err != nil {
		return nil, err
	}
	out := &export.Query{Highlights: s.Highlights, Filter: s.Filter, Field: library.SortCreatedAt, Desc: true}
	if s.Sort != nil {
		out.Field, out.Desc = s.Sort.Field, s.Sort.Desc
	}
	return out, nil
}
