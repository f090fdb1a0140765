package apitokens_test

import (
	"errors"
	"testing"
	"time"

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

// An image address signed with an API key finds its member while the key
// works: not once it has expired, nor under another key, the feed
// secret's (signed alike) or another image's.
func TestImageMemberOfAnAPIKey(t *testing.T) {
	st := storagetest.Open(t)
	ctx := t.Context()
	m, err := members.Of(st).CreateMember(ctx, "alice", "Alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	s := apitokens.Of(st)
	tok, _, err := s.Create(ctx, m.ID, "notes", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := s.Create(ctx, m.ID, "other", 0)
	feed, _ := s.RenewFeedSecret(ctx, m.ID)
	sig := apitokens.ImageSignature(tok.ImageKey(), m.ID, "item", "0")
	if got, err := s.ImageMember(ctx, m.ID, tok.ID, "item", "0", sig); err != nil || got.ID != m.ID {
		t.Fatalf("ImageMember = %v, %v", got, err)
	}
	for _, c := range []struct{ tokenID, n, sig string }{
		{tok.ID, "1", sig},
		{other.ID, "0", sig},
		{"", "0", sig},
		{tok.ID, "0", apitokens.ImageSignature(apitokens.FeedImageKey(storage.Digest(feed)), m.ID, "item", "0")},
		{tok.ID, "0", apitokens.ImageSignature(other.ImageKey(), m.ID, "item", "0")},
	} {
		if _, err := s.ImageMember(ctx, m.ID, c.tokenID, "item", c.n, c.sig); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	past := storage.Now().Add(-time.Minute)
	if _, err := s.SetExpiry(ctx, m.ID, tok.ID, &past); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ImageMember(ctx, m.ID, tok.ID, "item", "0", sig); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("expired key: %v", err)
	}
}
