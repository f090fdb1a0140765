package graphql

import (
	"context"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/library/query"
)

// exportQuery reads q as entries does, for handlers/export's feeds and
// books: newest first unless it sorts.
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

// SaveURL saves rawURL for the member as addArticleFromUrl does: a pending
// item now, the article fetched in the background. Its error is for the
// member (articles.MemberMessage).
func (s *Server) SaveURL(ctx context.Context, memberID, rawURL string, labelIDs []string) error {
	_, err := s.articles.QueueURL(ctx, memberID, rawURL, labelIDs)
	return err
}
