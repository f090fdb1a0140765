package graphql

import (
	"errors"
	"math"

	"github.com/hearthkit/caddy-hearth/storage/library/query"
)

// Page sizes of entries (Inboxt's first).
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// pageSize turns the first argument into a page size: default 20 for zero
// or less, fractional values rounded down, at most 100.
func pageSize(first float64) int {
	if math.IsNaN(first) || first < 1 {
		return DefaultPageSize
	}
	if first > MaxPageSize {
		return MaxPageSize
	}
	return int(first)
}

// sortOrder is a sort field and direction.
type sortOrder = query.Sort

// parseSearch reads q as Inboxt's entries resolver does (query.Parse).
func parseSearch(q string) (*query.Query, error) { return parseSearchIn(q, query.Inboxt) }

// parseSearchIn reads q in a dialect (query.ParseIn), its refusals as the
// API answers them: Inboxt's free-text limit a BAD_REQUEST, the others
// bad input.
func parseSearchIn(q string, dialect query.Syntax) (*query.Query, error) {
	s, err := query.ParseIn(q, dialect)
	var qe *query.Error
	if errors.As(err, &qe) {
		if qe.TooLong {
			return nil, &userError{codeBadRequest, qe.Msg}
		}
		return nil, &userError{codeBadUserInput, qe.Msg}
	}
	return s, err
}
