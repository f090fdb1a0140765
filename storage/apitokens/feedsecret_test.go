package apitokens_test

import (
	"errors"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// A feed secret finds its member until it is renewed, revoked, the
// member's access is revoked or the member is deleted; only its digest is
// stored.
func TestFeedSecretLifecycle(t *testing.T) {
	st := storagetest.Open(t)
	ctx := t.Context()
	m, err := members.Of(st).CreateMember(ctx, "alice", "Alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	s := apitokens.Of(st)
	first, err := s.RenewFeedSecret(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.FeedMember(ctx, first); err != nil || got.ID != m.ID {
		t.Fatalf("FeedMember = %v, %v", got, err)
	}
	info, err := s.FeedSecretInfo(ctx, m.ID)
	if err != nil || info.Digest != storage.Digest(first) {
		t.Fatalf("info %+v, %v", info, err)
	}
	second, _ := s.RenewFeedSecret(ctx, m.ID)
	if _, err := s.FeedMember(ctx, first); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("renewed secret: %v", err)
	}
	if err := s.RevokeFeedSecret(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FeedMember(ctx, second); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("revoked secret: %v", err)
	}
	if err := s.RevokeFeedSecret(ctx, m.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("revoking twice: %v", err)
	}

	third, _ := s.RenewFeedSecret(ctx, m.ID)
	if _, _, err := members.Of(st).RevokeMemberAccess(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FeedMember(ctx, third); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("after revoking the member's access: %v", err)
	}

	fourth, _ := s.RenewFeedSecret(ctx, m.ID)
	if err := members.Of(st).DeleteMember(ctx, m.Username); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FeedMember(ctx, fourth); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("after deleting the member: %v", err)
	}
	if _, err := s.FeedMember(ctx, "fd_short"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("malformed: %v", err)
	}
}
