package graphql

import (
	"context"
	"fmt"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/scalar"
)

// Omnivore's search and updatesSince through the fast path (fastpath.go):
// the note-taking plugins page through them as Inboxt's clients page
// through entries, and gqlgen's executor spent five times the entries
// page's allocations on a page of theirs (a goroutine per item, per
// highlight list and per content field). The resolvers are the ones gqlgen
// calls (omnivore.go); only the writing of their result differs, and it
// writes what gqlgen's marshalers write.

// The implementors lists gqlgen's generated code passes to CollectFields.
var (
	searchSuccessTypes   = []string{"SearchSuccess", "SearchResult"}
	searchErrorTypes     = []string{"SearchError", "SearchResult"}
	updatesSuccessTypes  = []string{"UpdatesSinceSuccess", "UpdatesSinceResult"}
	updatesErrorTypes    = []string{"UpdatesSinceError", "UpdatesSinceResult"}
	searchItemEdgeTypes  = []string{"SearchItemEdge"}
	syncUpdatedEdgeTypes = []string{"SyncUpdatedItemEdge"}
	searchItemTypes      = []string{"SearchItem"}
)

// omnivoreRoot resolves search or updatesSince with the arguments gqlgen's
// generated unmarshalers would give, and returns the writer of its result;
// ok is false when gqlgen must serve the field (an argument it would
// convert otherwise or refuse, an error from the resolver).
func omnivoreRoot(ctx context.Context, field *graphql.CollectedField, op *graphql.OperationContext, res *resolver) (write func(w *jsonWriter) bool, ok bool) {
	args := field.ArgumentMap(op.Variables)
	after, err := optStringArg(args["after"])
	if err != nil {
		return nil, false
	}
	first, err := optIntArg(args["first"])
	if err != nil {
		return nil, false
	}
	sel := field.Selections
	q := &queryResolver{res}
	switch field.Name {
	case "search":
		for k := range args {
			switch k {
			case "after", "first", "query", "includeContent", "format":
			default:
				return nil, false
			}
		}
		query, err1 := optStringArg(args["query"])
		format, err2 := optStringArg(args["format"])
		content, err3 := optBoolArg(args["includeContent"])
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, false
		}
		out, err := q.Search(ctx, after, first, query, content, format)
		if err != nil || out == nil {
			return nil, false
		}
		return func(w *jsonWriter) bool { return w.searchResult(sel, out) }, true
	case "updatesSince":
		for k := range args {
			switch k {
			case "after", "first", "since", "folder":
			default:
				return nil, false
			}
		}
		folder, err := optStringArg(args["folder"])
		if err != nil || args["since"] == nil {
			return nil, false
		}
		since, err := scalar.UnmarshalDate(args["since"])
		if err != nil {
			return nil, false
		}
		out, err := q.UpdatesSince(ctx, after, first, since, folder)
		if err != nil || out == nil {
			return nil, false
		}
		return func(w *jsonWriter) bool { return w.updatesResult(sel, out) }, true
	}
	return nil, false
}

func optIntArg(v any) (*int, error) {
	if v == nil {
		return nil, nil
	}
	n, err := graphql.UnmarshalInt(v)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

func optBoolArg(v any) (*bool, error) {
	if v == nil {
		return nil, nil
	}
	b, ok := v.(bool)
	if !ok {
		return nil, errUnexpectedArg
	}
	return &b, nil
}

func (w *jsonWriter) searchResult(sel ast.SelectionSet, r generated.SearchResult) bool {
	switch r := r.(type) {
	case *generated.SearchSuccess:
		return w.object(sel, searchSuccessTypes, func(f graphql.CollectedField) bool {
			switch f.Name {
			case "edges":
				return w.list(len(r.Edges), func(i int) bool {
					e := r.Edges[i]
					return e != nil && w.object(f.Selections, searchItemEdgeTypes, func(f graphql.CollectedField) bool {
						switch f.Name {
						case "cursor":
							w.str(e.Cursor)
							return true
						case "node":
							return e.Node != nil && w.searchItem(f.Selections, e.Node)
						}
						return false
					})
				})
			case "pageInfo":
				return r.PageInfo != nil && w.pageInfo(f.Selections, r.PageInfo)
			}
			return false
		})
	case *generated.SearchError:
		return errorCodes(w, sel, searchErrorTypes, r.ErrorCodes)
	}
	return false
}

func (w *jsonWriter) updatesResult(sel ast.SelectionSet, r generated.UpdatesSinceResult) bool {
	switch r := r.(type) {
	case *generated.UpdatesSinceSuccess:
		return w.object(sel, updatesSuccessTypes, func(f graphql.CollectedField) bool {
			switch f.Name {
			case "edges":
				return w.list(len(r.Edges), func(i int) bool {
					e := r.Edges[i]
					return e != nil && w.object(f.Selections, syncUpdatedEdgeTypes, func(f graphql.CollectedField) bool {
						switch f.Name {
						case "cursor":
							w.str(e.Cursor)
						case "updateReason":
							w.str(e.UpdateReason.String())
						case "itemID":
							w.str(e.ItemID)
						case "node":
							if e.Node == nil {
								w.null()
								return true
							}
							return w.searchItem(f.Selections, e.Node)
						default:
							return false
						}
						return true
					})
				})
			case "pageInfo":
				return r.PageInfo != nil && w.pageInfo(f.Selections, r.PageInfo)
			}
			return false
		})
	case *generated.UpdatesSinceError:
		return errorCodes(w, sel, updatesErrorTypes, r.ErrorCodes)
	}
	return false
}

// errorCodes writes a SearchError or UpdatesSinceError.
func errorCodes[C fmt.Stringer](w *jsonWriter, sel ast.SelectionSet, types []string, codes []C) bool {
	return w.object(sel, types, func(f graphql.CollectedField) bool {
		if f.Name != "errorCodes" {
			return false
		}
		return w.list(len(codes), func(i int) bool { w.str(codes[i].String()); return true })
	})
}

// searchItem writes the model omnivore.go's searchItem made, its
// highlights and content from the field resolvers gqlgen calls.
func (w *jsonWriter) searchItem(sel ast.SelectionSet, it *generated.SearchItem) bool {
	r := &searchItemResolver{w.res}
	return w.object(sel, searchItemTypes, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "id":
			w.str(it.ID)
		case "title":
			w.str(it.Title)
		case "slug":
			w.str(it.Slug)
		case "url":
			w.str(it.URL)
		case "pageType":
			w.str(it.PageType.String())
		case "contentReader":
			w.str(it.ContentReader.String())
		case "createdAt":
			w.dateTime(it.CreatedAt)
		case "updatedAt":
			w.optTime(it.UpdatedAt)
		case "isArchived":
			w.boolean(it.IsArchived)
		case "readingProgressPercent":
			return w.float(it.ReadingProgressPercent)
		case "readingProgressTopPercent":
			return w.optFloat(it.ReadingProgressTopPercent)
		case "readingProgressAnchorIndex":
			w.buf = strconv.AppendInt(w.buf, int64(it.ReadingProgressAnchorIndex), 10)
		case "author":
			w.optStr(it.Author)
		case "image":
			w.optStr(it.Image)
		case "description":
			w.optStr(it.Description)
		case "publishedAt":
			w.optTime(it.PublishedAt)
		case "originalArticleUrl":
			w.optStr(it.OriginalArticleURL)
		case "labels":
			return w.labels(f.Selections, it.Labels)
		case "subscription":
			w.optStr(it.Subscription)
		case "state":
			if it.State == nil {
				w.null()
			} else {
				w.str(it.State.String())
			}
		case "siteName":
			w.optStr(it.SiteName)
		case "readAt":
			w.optTime(it.ReadAt)
		case "savedAt":
			w.dateTime(it.SavedAt)
		case "highlights":
			hs, err := r.Highlights(w.ctx, it)
			return err == nil && w.highlights(f.Selections, hs)
		case "wordsCount":
			w.optInt(it.WordsCount)
		case "content":
			s, err := r.Content(w.ctx, it)
			return err == nil && w.optContentStr(s)
		case "archivedAt":
			w.optTime(it.ArchivedAt)
		case "folder":
			w.str(it.Folder)
		case "highlightsCount":
			w.optInt(it.HighlightsCount)
		default:
			return false
		}
		return true
	})
}
