// Package scalar holds the GraphQL API's custom scalars: DateTime is a UTC
// RFC 3339 time with millisecond precision, as Inboxt (JavaScript's
// toISOString) writes it.
package scalar

import (
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// Layout is how DateTime values are written.
const Layout = "2006-01-02T15:04:05.000Z"

// Format writes t as a DateTime.
func Format(t time.Time) string { return t.UTC().Format(Layout) }

// MarshalDateTime writes t as a JSON string.
func MarshalDateTime(t time.Time) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		_, _ = io.WriteString(w, strconv.Quote(Format(t)))
	})
}

// UnmarshalDateTime reads an RFC 3339 string.
func UnmarshalDateTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, errors.New("DateTime must be an RFC 3339 string")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("DateTime must be an RFC 3339 string such as 2019-12-03T09:54:33Z")
	}
	return t.UTC(), nil
}
