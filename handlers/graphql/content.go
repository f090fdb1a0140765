package graphql

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
)

// The contents of articles and newsletters (contentHtml, contentText, up to
// storage.MaxContentLen each) and the texts of highlights (notes and
// segments: small each, but an item can have any number of highlights)
// are the values that can make a response large. The complexity limit
// prices them (complexity.go) but cannot bound the bytes they carry, so each
// operation also has a budget of such bytes, Options.MaxContentBytes
// (64 MiB): the strings of Article, Newsletter, Highlight and
// HighlightSegment a response carries are added up as they are resolved, by
// gqlgen's executor (limitContent) and by the entries fast path, and once
// they exceed the budget those fields resolve to an error with
// CONTENT_LIMIT_EXCEEDED instead (the nearest nullable parent is then null,
// the rest of the response stays).

// codeContentLimit is the code of a content field past the budget.
const codeContentLimit = "CONTENT_LIMIT_EXCEEDED"

// contentBudget counts the content bytes of one operation. Root fields of
// a query run concurrently, so it is atomic.
type contentBudget struct {
	max  int64
	used atomic.Int64
}

type contentBudgetKey struct{}

func contentBudgetOf(ctx context.Context) *contentBudget {
	b, _ := ctx.Value(contentBudgetKey{}).(*contentBudget)
	return b
}

// take adds n bytes and reports whether the budget still holds them. The
// bytes stay counted either way: past the budget every further content is
// refused, however small.
func (b *contentBudget) take(n int) bool {
	if b == nil {
		return true
	}
	return b.used.Add(int64(n)) <= b.max
}

// spent reports whether the budget is past: every further content is
// refused, so a content that costs work to make need not be made.
func (b *contentBudget) spent() bool {
	return b != nil && b.used.Load() > b.max
}

// release gives back n bytes taken (the fast path's, when it steps aside
// and gqlgen writes the field again).
func (b *contentBudget) release(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}

func (b *contentBudget) err() error {
	return &userError{codeContentLimit, fmt.Sprintf("the response's article and newsletter contents and highlight texts exceed %d bytes; ask for fewer items, highlights or content fields", b.max)}
}

// withContentBudget gives each operation its budget.
func (s *Server) withContentBudget(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	return next(context.WithValue(ctx, contentBudgetKey{}, &contentBudget{max: s.opts.MaxContentBytes}))
}

// limitContent counts the content fields that gqlgen's executor resolves.
func (s *Server) limitContent(ctx context.Context, next graphql.Resolver) (any, error) {
	res, err := next(ctx)
	if err != nil {
		return res, err
	}
	var str string
	switch v := res.(type) {
	case string:
		str = v
	case *string: // nullable fields such as a highlight's note
		if v == nil {
			return res, nil
		}
		str = *v
	default:
		return res, nil
	}
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return res, nil
	}
	switch fc.Object {
	case "Article", "Newsletter", "Highlight", "HighlightSegment":
	case "SearchItem": // Omnivore's search, with includeContent
		if fc.Field.Name != "content" {
			return res, nil
		}
	default:
		return res, nil
	}
	if b := contentBudgetOf(ctx); !b.take(len(str)) {
		return nil, b.err()
	}
	return res, nil
}
