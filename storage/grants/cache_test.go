package grants

// The caches of applications and tokens (storage.NewCacheKind) follow
// every write.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// A cached application record gives way to every committed write to its
// key: a change, a deletion, a restore.
func TestOAuthAppCacheFollowsWrites(t *testing.T) {
	s, _, app, secret := oauthFixture(t)
	if _, err := Of(s).AuthenticateClient(t.Context(), app.ClientID, secret); err != nil {
		t.Fatal(err)
	}
	if appCache.Of(s).Get(app.ClientID) == nil {
		t.Fatal("the application was not cached after a lookup")
	}
	got, err := Of(s).App(t.Context(), app.ClientID)
	if err != nil || got.Name != "Tooter" {
		t.Fatalf("cached lookup: %+v, %v", got, err)
	}
	got.Scopes = []string{"write"} // a caller's copy, not the cache's
	got.Name = "Changed by a caller"
	if again, _ := Of(s).App(t.Context(), app.ClientID); again.Name != "Tooter" {
		t.Fatalf("a caller changed the cached record: %q", again.Name)
	}

	renamed := *app
	renamed.Name = "Tooter 2"
	if err := s.Update(t.Context(), func(tx *storage.Tx) error { return tx.PutJSON(appKey(app.ClientID), &renamed, 0) }); err != nil {
		t.Fatal(err)
	}
	if got, err := Of(s).App(t.Context(), app.ClientID); err != nil || got.Name != "Tooter 2" {
		t.Fatalf("after a write: %+v, %v", got, err)
	}

	if err := s.Update(t.Context(), func(tx *storage.Tx) error { return tx.Delete(appKey(app.ClientID)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(s).AuthenticateClient(t.Context(), app.ClientID, secret); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after a delete: %v, want storage.ErrNotFound", err)
	}

	// A backup from a busier store carries a newer version of the record
	// (Badger keeps the versions of a backup), so restoring it replaces
	// the cached one.
	other := openOAuthTestStore(t)
	for i := range 20 {
		busier := *app
		busier.Name = fmt.Sprint("Tooter from backup ", i)
		if err := other.Update(t.Context(), func(tx *storage.Tx) error { return tx.PutJSON(appKey(app.ClientID), &busier, 0) }); err != nil {
			t.Fatal(err)
		}
	}
	var backup bytes.Buffer
	if err := other.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(tx *storage.Tx) error { return tx.PutJSON(appKey(app.ClientID), app, 0) }); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(s).AuthenticateClient(t.Context(), app.ClientID, secret); err != nil {
		t.Fatalf("after writing the record again: %v", err)
	}
	if _, err := s.Replace(&backup); err != nil {
		t.Fatal(err)
	}
	if got, err := Of(s).App(t.Context(), app.ClientID); err != nil || got.Name != "Tooter from backup 19" {
		t.Fatalf("after a restore: %+v, %v", got, err)
	}
}

// A cached access token and its cached member give way at once to a
// revocation, a suspension and a deletion of the member.
func TestCachedTokensAndMembersFollowWrites(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	tok, secret := issueToken(t, s, app, m, "https://app.example/cb", "read")
	if _, got, err := Of(s).Token(t.Context(), secret); err != nil || got.ID != m.ID {
		t.Fatalf("OAuthToken = %v, %v", got, err)
	}
	if tokenCache.Of(s).Get(storage.Digest(secret)) == nil || members.Cache.Of(s).Get(m.ID) == nil {
		t.Fatal("the token and its member were not cached after a lookup")
	}
	if _, _, err := Of(s).Token(t.Context(), secret); err != nil {
		t.Fatalf("cached lookup: %v", err)
	}
	if _, err := members.Of(s).SetSuspended(t.Context(), m.Username, true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Token(t.Context(), secret); !errors.Is(err, members.ErrSuspended) {
		t.Fatalf("after suspending the member: %v, want members.ErrSuspended", err)
	}
	if _, err := members.Of(s).SetSuspended(t.Context(), m.Username, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Token(t.Context(), secret); err != nil {
		t.Fatalf("after lifting the suspension: %v", err)
	}
	if err := Of(s).RevokeToken(t.Context(), tok.ClientID, secret); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Token(t.Context(), secret); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after revoking: %v, want storage.ErrNotFound", err)
	}
}

// Under concurrent lookups, a lookup that starts after a write to the
// application returned sees that write.
func TestOAuthAppCacheUnderConcurrentLookups(t *testing.T) {
	s, _, app, _ := oauthFixture(t)
	stop := storagetest.Loop(4, func() bool {
		if _, err := Of(s).App(t.Context(), app.ClientID); err != nil {
			t.Error(err)
			return false
		}
		return true
	})
	for i := range 200 {
		renamed := *app
		renamed.Name = fmt.Sprint("name ", i)
		if err := s.Update(t.Context(), func(tx *storage.Tx) error { return tx.PutJSON(appKey(app.ClientID), &renamed, 0) }); err != nil {
			t.Fatal(err)
		}
		got, err := Of(s).App(t.Context(), app.ClientID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != renamed.Name {
			t.Fatalf("after writing %q a lookup saw %q", renamed.Name, got.Name)
		}
	}
	stop()
}
