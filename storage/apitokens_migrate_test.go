package storage

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// putLegacyAPIToken writes an API token the way versions before issue 17
// did: the record and its global ref, with no origin in either.
func putLegacyAPIToken(t *testing.T, s *Store, memberID, name string, createdAt time.Time) string {
	t.Helper()
	secret := NewSecret(APITokenPrefix, apiTokenRandomBytes)
	d := Digest(secret)
	id := testID()
	err := s.Update(t.Context(), func(tx *Tx) error {
		if err := tx.put(apiTokenRefKey(d), []byte(`{"member_id":"`+memberID+`","token_id":"`+id+`"}`), 0); err != nil {
			return err
		}
		old := `{"id":"` + id + `","member_id":"` + memberID + `","name":"` + name + `","digest":"` + d +
			`","created_at":"` + createdAt.UTC().Format(time.RFC3339Nano) + `"}`
		return tx.put(apiTokenKey(memberID, id), []byte(old), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	dir := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

// Tokens made before origins were kept: one older than every OAuth app
// stays; one made after an app existed (an OAuth access token with read and
// write could make it through createApiToken) expires at the next Open, so
// revoking the app, which could not reach it, is no longer needed for it to
// stop. Fails without the migration: the second token keeps working after
// the app is revoked.
func TestMigrationExpiresLegacyAPITokensThatAnOAuthGrantCouldHaveMade(t *testing.T) {
	s := openTestStore(t)
	m, err := s.CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	before := putLegacyAPIToken(t, s, m.ID, "laptop script", time.Now().Add(-time.Hour))
	app, _, err := s.CreateOAuthApp(t.Context(), "Sync app", "", []string{"https://app.example/cb"}, []string{"read", "write"})
	if err != nil {
		t.Fatal(err)
	}
	code, err := s.CreateOAuthCode(t.Context(), app.ClientID, m.ID, "https://app.example/cb", []string{"read", "write"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ExchangeOAuthCode(t.Context(), code, func(*OAuthCode) error { return nil }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the migration leaves a second's margin around the app's creation
	minted := putLegacyAPIToken(t, s, m.ID, "sync", time.Now())
	if err := s.RevokeOAuthAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}

	s = reopen(t, s)
	if _, _, err := s.APITokenMember(t.Context(), minted); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the token an OAuth grant could have made still works after the migration: %v", err)
	}
	got, tok, err := s.APITokenMember(t.Context(), before)
	if err != nil || got.ID != m.ID || tok.Origin != OriginLegacy {
		t.Fatalf("the token older than every OAuth app: %v %+v", err, tok)
	}
	toks, err := s.APITokens(t.Context(), m.ID)
	if err != nil || len(toks) != 2 {
		t.Fatalf("%d tokens (%v), want both records kept", len(toks), err)
	}
	for _, tk := range toks {
		if tk.Origin != OriginLegacy {
			t.Fatalf("%s: origin %q", tk.Name, tk.Origin)
		}
		if expired := tk.Expired(time.Now()); expired != (tk.Name == "sync") {
			t.Fatalf("%s: expired %v", tk.Name, expired)
		}
	}

	// Idempotent: a second Open changes nothing, and new tokens carry
	// their origin and are left alone.
	fresh, freshSecret, err := s.CreateAPIToken(t.Context(), m.ID, "new", 0)
	if err != nil || fresh.Origin != OriginSession {
		t.Fatalf("%v %+v", err, fresh)
	}
	op, opSecret, err := s.CreateOperatorAPIToken(t.Context(), m.ID, "ops", 0)
	if err != nil || op.Origin != OriginOperator {
		t.Fatalf("%v %+v", err, op)
	}
	kept, expired, err := s.migrateAPITokenOrigins(t.Context())
	if err != nil || kept != 0 || expired != 0 {
		t.Fatalf("second migration: kept %d expired %d %v", kept, expired, err)
	}
	s = reopen(t, s)
	for _, sec := range []string{before, freshSecret, opSecret} {
		if _, _, err := s.APITokenMember(t.Context(), sec); err != nil {
			t.Fatalf("after a second Open: %v", err)
		}
	}
	if _, _, err := s.APITokenMember(t.Context(), minted); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after a second Open: %v", err)
	}
}

// A backup of an earlier version is migrated when it is restored.
func TestRestoreMigratesLegacyAPITokens(t *testing.T) {
	s := openTestStore(t)
	m, err := s.CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateOAuthApp(t.Context(), "Sync app", "", []string{"https://app.example/cb"}, []string{"read", "write"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	minted := putLegacyAPIToken(t, s, m.ID, "sync", time.Now())
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.APITokenMember(t.Context(), minted); err != nil {
		t.Fatalf("before the restore the legacy token works (the old way): %v", err)
	}
	if _, err := s.Replace(&buf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.APITokenMember(t.Context(), minted); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a restored legacy token an OAuth grant could have made works: %v", err)
	}
}

// Suspending the member stops a legacy token that was kept.
func TestSuspensionStopsLegacyAPITokens(t *testing.T) {
	s := openTestStore(t)
	m, err := s.CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	old := putLegacyAPIToken(t, s, m.ID, "laptop script", time.Now().Add(-time.Hour))
	s = reopen(t, s)
	if _, _, err := s.APITokenMember(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.APITokenMember(t.Context(), old); !errors.Is(err, ErrSuspended) {
		t.Fatalf("a suspended member's legacy token: %v", err)
	}
}

// A ref the migration cannot read stops Open with a clear error and leaves
// the directory unlocked (Badger closed), so the next Open says the same
// instead of "in use by another process".
func TestMigrationFailureReleasesTheStore(t *testing.T) {
	s := openTestStore(t)
	dir := s.Path()
	if err := s.Update(t.Context(), func(tx *Tx) error { return tx.put(apiTokenRefKey("x"), []byte("not json"), 0) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		s2, err := Open(dir, Options{})
		if err == nil {
			s2.Close()
			t.Fatal("Open succeeded over an unreadable API token ref")
		}
		if errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "migrate API tokens") {
			t.Fatalf("Open %d: %v", i, err)
		}
	}
}
