package library

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Tombstones: what is kept of a permanently deleted item, so that a client
// syncing by time (Omnivore's updatesSince) can remove its copy. Layout:
//
//	u/<member>/gql/gone/<deletedAt><id>   Tombstone (expires after TombstoneRetention)
//
// Items in the trash are still items (status DELETED) and are listed as
// such; a tombstone is written when an item leaves the trash for good.

// TombstoneRetention is how long a permanently deleted item is reported
// to clients syncing by time; a sync from before that is a full sync.
const TombstoneRetention = 90 * 24 * time.Hour

// Tombstone is what is kept of a permanently deleted item.
type Tombstone struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Title     string    `json:"title"`
	URL       string    `json:"url,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	DeletedAt time.Time `json:"deleted_at"`
}

func tombstonePrefix(memberID string) []byte { return storage.Key("u", memberID, "gql", "gone", "") }

func putTombstone(tx *storage.Tx, it *SavedItem) error {
	now := storage.Now()
	t := Tombstone{ID: it.ID, Type: it.Type, Title: it.Title, URL: it.OriginalURL, CreatedAt: it.CreatedAt, DeletedAt: now}
	k := encUint64(encTime(tombstonePrefix(it.MemberID), now), idBytes(it.ID))
	return tx.PutJSON(k, t, TombstoneRetention)
}

// Tombstones returns the member's items permanently deleted at or after
// since, oldest first, skipping the first skip and returning at most limit
// (and whether there are more).
func (s Store) Tombstones(ctx context.Context, memberID string, since time.Time, skip, limit int) ([]*Tombstone, bool, error) {
	var out []*Tombstone
	more := false
	prefix := tombstonePrefix(memberID)
	start := encTime(append([]byte(nil), prefix...), since)
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		out, more = out[:0], false
		n := 0
		return tx.Scan(prefix, start, false, false, func(_, val []byte) (bool, error) {
			if n < skip {
				n++
				return true, nil
			}
			if len(out) == limit {
				more = true
				return false, nil
			}
			var t Tombstone
			if err := json.Unmarshal(val, &t); err != nil {
				return false, err
			}
			out = append(out, &t)
			return true, nil
		})
	})
	return out, more, err
}
