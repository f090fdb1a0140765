package apitokens

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Feed secrets: the capability in a member's Atom feed and OPDS catalog
// URLs, which feed readers and e-readers fetch without credentials. Like
// the newsletter inbound secret, one per member, kept as its digest only,
// shown once when made; renewing replaces it and revoking removes it (the
// old URLs stop working at once). Layout:
//
//	gql/feed/<digest>   member id (global lookup; removed by DeleteMember)
//	u/<member>/gql/feed FeedSecret

// FeedPrefix starts every feed secret.
const FeedPrefix = "fd_"

// FeedSecret is what is kept of a member's feed secret.
type FeedSecret struct {
	Digest    string    `json:"digest"`
	CreatedAt time.Time `json:"created_at"`
}

func feedRefKey(digest string) []byte { return storage.Key("gql", "feed", digest) }
func feedKey(memberID string) []byte  { return storage.Key("u", memberID, "gql", "feed") }
func looksLikeFeed(secret string) bool {
	return strings.HasPrefix(secret, FeedPrefix) && len(secret) <= 128 && len(secret) >= 20
}

// RenewFeedSecret gives the member a new feed secret, replacing the old
// one, and returns it.
func (s Store) RenewFeedSecret(ctx context.Context, memberID string) (string, error) {
	secret := storage.NewSecret(FeedPrefix, 32)
	fs := FeedSecret{Digest: storage.Digest(secret), CreatedAt: storage.Now()}
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if _, err := members.ByID(tx, memberID); err != nil {
			return err
		}
		if err := deleteFeedSecret(tx, memberID); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		if err := tx.Put(feedRefKey(fs.Digest), []byte(memberID), 0); err != nil {
			return err
		}
		return tx.PutJSON(feedKey(memberID), fs, 0)
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// FeedSecretInfo returns the member's feed secret record, or storage.ErrNotFound.
func (s Store) FeedSecretInfo(ctx context.Context, memberID string) (*FeedSecret, error) {
	var fs FeedSecret
	if err := s.st.View(ctx, func(tx *storage.Tx) error { return tx.GetJSON(feedKey(memberID), &fs) }); err != nil {
		return nil, err
	}
	return &fs, nil
}

// RevokeFeedSecret removes the member's feed secret (storage.ErrNotFound
// when there is none).
func (s Store) RevokeFeedSecret(ctx context.Context, memberID string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error { return deleteFeedSecret(tx, memberID) })
}

func deleteFeedSecret(tx *storage.Tx, memberID string) error {
	var fs FeedSecret
	if err := tx.GetJSON(feedKey(memberID), &fs); err != nil {
		return err
	}
	if err := tx.Delete(feedRefKey(fs.Digest)); err != nil {
		return err
	}
	return tx.Delete(feedKey(memberID))
}

// FeedMember returns the member whose feed secret is secret
// (storage.ErrNotFound, or members.ErrSuspended for a suspended member).
func (s Store) FeedMember(ctx context.Context, secret string) (*members.Member, error) {
	if !looksLikeFeed(secret) {
		return nil, storage.ErrNotFound
	}
	return s.memberAt(ctx, feedRefKey(storage.Digest(secret)))
}

func init() {
	members.OnDelete(func(tx *storage.Tx, memberID string) error {
		if err := deleteFeedSecret(tx, memberID); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		return nil
	})
	// A member's access ends with their feed URLs too (RevokeMemberAccess).
	members.OnRevokeAccess(func(tx *storage.Tx, m *members.Member) (int, int, error) {
		if err := deleteFeedSecret(tx, m.ID); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return 0, 0, err
		}
		return 0, 0, nil
	})
}
