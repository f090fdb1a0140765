package storage

import "time"

// Helpers the domain packages under storage/ share with the domains still
// in this package: one rule each, in one place.

// Now is the time records are stamped with: UTC, to the millisecond.
func Now() time.Time { return now() }

// CleanLine trims s and refuses, with an *InvalidError naming what, text
// that is not UTF-8 or is longer than max characters.
func CleanLine(s string, max int, what string) (string, error) { return cleanLine(s, max, what) }

// HasControl reports whether s holds a control character (refused in
// one-line names shown on pages).
func HasControl(s string) bool { return hasControl(s) }

// IsID reports whether s has the form of a record id (NewID: decimal
// digits).
func IsID(s string) bool { return isItemID(s) }

// GuardCount writes the member's guard key of kind (a creation bounded by
// a count per member): two transactions creating at once conflict on it,
// so the bound holds without a lock.
func (tx *Tx) GuardCount(memberID, kind string) error { return tx.guardCount(memberID, kind) }
