package library

import (
	"context"

	"github.com/hearthkit/caddy-hearth/storage"
)

// StatusCount returns how many of the member's items have one of the
// statuses (StatusAll and StatusNotDeleted as in ItemFilter), from the
// filter counts the search keeps, but those a pending emptying of the
// trash is to delete (emptyingCut); ok is false while those are not built
// yet (a store from before them, being indexed).
func (s Store) StatusCount(ctx context.Context, memberID, status string) (n int, ok bool, err error) {
	statuses := []string{status}
	switch status {
	case StatusAll:
		statuses = []string{StatusActive, StatusArchived, StatusDeleted}
	case StatusNotDeleted:
		statuses = []string{StatusActive, StatusArchived}
	case "":
		statuses = []string{StatusActive}
	}
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		n = 0
		if ok, err = searchReady(tx, memberID); err != nil || !ok {
			return err
		}
		for _, st := range statuses {
			c, found := statusCode[st]
			if !found {
				return storage.Invalid("unknown status")
			}
			k, err := filterCount(tx, memberID, "s", c)
			if err != nil {
				return err
			}
			if st == StatusDeleted {
				cut, err := readEmptyingCut(tx, memberID)
				if err != nil {
					return err
				}
				k = max(k-cut.left, 0)
			}
			n += k
		}
		return nil
	})
	return n, ok, err
}
