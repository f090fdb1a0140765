package storage

import (
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Helpers the domain packages under storage/ share: one rule each, in one
// place.

// Now is the time records are stamped with: UTC, to the millisecond.
func Now() time.Time { return now() }

// CleanLine trims s and refuses, with an *InvalidError about the field
// what, text that is not UTF-8 or is longer than max characters.
func CleanLine(s string, max int, what string) (string, error) { return cleanLine(s, max, what) }

// HasControl reports whether s holds a control character (refused in
// one-line names shown on pages).
func HasControl(s string) bool { return strings.IndexFunc(s, unicode.IsControl) >= 0 }

// IsID reports whether s has the form of a record id (NewID: decimal
// digits).
func IsID(s string) bool { return isItemID(s) }

// GuardCount writes the member's guard key of kind (a creation bounded by
// a count per member): two transactions creating at once conflict on it,
// so the bound holds without a lock.
func (tx *Tx) GuardCount(memberID, kind string) error { return tx.guardCount(memberID, kind) }

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func cleanLine(s string, max int, what string) (string, error) {
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return "", InvalidField(what, "%s must be valid UTF-8", what)
	}
	if utf8.RuneCountInString(s) > max {
		return "", InvalidField(what, "%s must be at most %d characters", what, max)
	}
	return s, nil
}

// isItemID reports whether s has the form of an item or highlight id.
func isItemID(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// guardCount makes the transaction conflict with every other that counts
// the member's records of one kind (labels, saved queries) to keep a limit:
// each reads and writes the same guard key. Badger sees a conflict on a key
// read, not on an insert into a range scanned, so two concurrent creations
// would each count without the other and both pass the limit; with the
// guard the later one is retried and counts again.
func (tx *Tx) guardCount(memberID, kind string) error {
	k := key("u", memberID, "gql", "guard", kind)
	if _, err := tx.get(k); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return tx.put(k, nil, 0)
}
