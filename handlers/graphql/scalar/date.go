package scalar

import (
	"errors"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalDate writes t as Omnivore's Date: the same form as DateTime
// (JavaScript's toISOString, which Omnivore's server writes too).
func MarshalDate(t time.Time) graphql.Marshaler { return MarshalDateTime(t) }

// UnmarshalDate reads Omnivore's Date as its clients send it: an ISO 8601
// time with an offset (luxon's toISO, 2024-05-01T10:00:00.000+02:00) or a
// date (the Logseq plugin's first sync sends 2021-01-01), read as that
// day's start at UTC, as JavaScript's new Date does.
func UnmarshalDate(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, errors.New("a Date must be a string such as 2024-05-01T10:00:00Z or 2024-05-01")
	}
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return d, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("a Date must be an ISO 8601 time such as 2024-05-01T10:00:00Z or a date such as 2024-05-01")
	}
	return t.UTC(), nil
}
