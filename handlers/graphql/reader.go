package graphql

import (
	"context"
	"errors"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Query is a parsed search (the q of entries), for the library pages,
// which take exactly the API's syntax.
type Query struct {
	// Highlights: q asked for highlights (type:highlight), not items.
	Highlights bool
	Filter     library.ItemFilter
	// Sort is the sort: q named, if any (it wins over any other choice).
	Sort *QuerySort
}

// QuerySort is a sort field and direction.
type QuerySort struct {
	Field library.SortField
	Desc  bool
}

// ParseQuery reads q as entries does (see parseSearch). Its error is for
// the member, in plain words.
func ParseQuery(q string) (*Query, error) {
	s, err := parseSearch(q)
	if err != nil {
		return nil, err
	}
	out := &Query{Highlights: s.highlights, Filter: s.filter}
	if s.sort != nil {
		out.Sort = &QuerySort{Field: s.sort.field, Desc: s.sort.desc}
	}
	return out, nil
}

// exportQuery reads q as entries does, for handlers/export's feeds and
// books: newest first unless it sorts.
func exportQuery(q string) (*export.Query, error) {
	s, err := parseSearch(q)
	if err != nil {
		return nil, err
	}
	out := &export.Query{Highlights: s.highlights, Filter: s.filter, Field: library.SortCreatedAt, Desc: true}
	if s.sort != nil {
		out.Field, out.Desc = s.sort.field, s.sort.desc
	}
	return out, nil
}

// SaveURL saves rawURL for the member as addArticleFromUrl does: a pending
// item now, the article fetched in the background. Its error is for the
// member.
func (s *Server) SaveURL(ctx context.Context, memberID, rawURL string, labelIDs []string) error {
	_, err := s.articles.QueueURL(ctx, memberID, rawURL, labelIDs)
	return err
}

// MemberMessage is what to tell the member about err, when err is the
// member's to fix (a URL refused, a site that failed): the message the API
// would answer with. Other errors (the store's) are not said as they are.
func MemberMessage(err error) (string, bool) {
	var ue *userError
	var ie *storage.InvalidError
	var ai *articles.InputError
	var af *articles.FetchError
	switch {
	case errors.As(err, &ue):
		return ue.msg, true
	case errors.As(err, &ie):
		return ie.Msg, true
	case errors.As(err, &ai):
		return ai.Msg, true
	case errors.As(err, &af):
		return af.Msg, true
	}
	return "", false
}
