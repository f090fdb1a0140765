package importer

import (
	"context"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// PlaceFetchedQuotes places the item's quotes kept without a place (an
// import brought them before the content) in content, the item's content
// as the fetch saved it, within the same bound as an import's quotes.
func PlaceFetchedQuotes(ctx context.Context, st *storage.Store, memberID, itemID, content string) (int, error) {
	body := contentBody(content)
	if body == nil {
		return 0, nil
	}
	ct := newContentText(body, len(content))
	budget := placeBudget
	return library.Of(st).PlaceHighlights(ctx, memberID, itemID, func(quote string) []library.HighlightSegment {
		return ct.placeQuote(quote, &budget)
	})
}

// PlaceQuote places h's quote, kept without a place, in content, the
// item's content: one quote's walk of the text, whatever other quotes of
// the item are still unplaced. It reports whether h was placed.
func PlaceQuote(ctx context.Context, st *storage.Store, memberID string, h *library.Highlight, content string) (bool, error) {
	body := contentBody(content)
	if body == nil {
		return false, nil
	}
	ct := newContentText(body, len(content))
	budget := placeBudget
	return library.Of(st).PlaceHighlight(ctx, memberID, h, func(quote string) []library.HighlightSegment {
		return ct.placeQuote(quote, &budget)
	})
}
