package members

import (
	"context"
	"errors"
	"strconv"

	"github.com/hearthkit/caddy-hearth/storage"
)

// memberCountKey holds the number of members, written in the transaction
// that creates or deletes one: the instance endpoints and nodeinfo, which
// anyone may ask without a limit, read one key instead of every member
// record. Two creations at once both read and write it, so they conflict
// and one is retried (as Mastodon keeps user_count apart from its users
// table, but exact).
func memberCountKey() []byte { return storage.Key("member", "count") }

// countIn returns the number of members in tx: the counter, or, in a store
// written before the counter existed (or restored from such a backup), the
// member records counted by key (their values are not read), once: the
// writer that needs it writes it back.
func countIn(tx *storage.Tx) (n int, stored bool, err error) {
	v, err := tx.Get(memberCountKey())
	if err == nil {
		n, err := strconv.Atoi(string(v))
		if err == nil && n >= 0 {
			return n, true, nil
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return 0, false, err
	}
	err = tx.Scan(memberIDKey(""), nil, false, true, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, false, err
}

// addToCount moves the member counter by delta in tx.
func addToCount(tx *storage.Tx, delta int) error {
	n, _, err := countIn(tx)
	if err != nil {
		return err
	}
	return tx.Put(memberCountKey(), []byte(strconv.Itoa(max(n+delta, 0))), 0)
}

// Count returns the number of members (suspended ones included) in a
// read of one key; the first call on a store without the counter counts
// the members once and writes it.
func (s Store) Count(ctx context.Context) (n int, err error) {
	var stored bool
	err = s.st.View(ctx, func(tx *storage.Tx) error { n, stored, err = countIn(tx); return err })
	if err != nil || stored {
		return n, err
	}
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		if n, stored, err = countIn(tx); err != nil || stored {
			return err
		}
		return tx.Put(memberCountKey(), []byte(strconv.Itoa(n)), 0)
	})
	return n, err
}
