package apitokens

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The API token migration against OAuth grants (storage/grants, which
// imports storage: hence this external test package).

// Tokens made before origins were kept: one older than every OAuth app
// stays; one made after an app existed (an OAuth access token with read and
// write could make it through createApiToken) expires at the next Open, so
// revoking the app, which could not reach it, is no longer needed for it to
// stop. Fails without the migration: the second token keeps working after
// the app is revoked.
func TestMigrationExpiresLegacyAPITokensThatAnOAuthGrantCouldHaveMade(t *testing.T) {
	s := storagetest.Open(t)
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	before := putLegacyAPIToken(t, s, m.ID, "laptop script", time.Now().Add(-time.Hour))
	app, _, err := grants.Of(s).CreateApp(t.Context(), "Sync app", "", []string{"https://app.example/cb"}, []string{"read", "write"})
	if err != nil {
		t.Fatal(err)
	}
	code, err := grants.Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read", "write"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := grants.Of(s).ExchangeCode(t.Context(), code, func(*grants.Code) error { return nil }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the migration leaves a second's margin around the app's creation
	minted := putLegacyAPIToken(t, s, m.ID, "sync", time.Now())
	if err := grants.Of(s).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}

	s = reopen(t, s)
	if _, _, err := Of(s).Member(t.Context(), minted); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the token an OAuth grant could have made still works after the migration: %v", err)
	}
	got, tok, err := Of(s).Member(t.Context(), before)
	if err != nil || got.ID != m.ID || tok.Origin != OriginLegacy {
		t.Fatalf("the token older than every OAuth app: %v %+v", err, tok)
	}
	toks, err := Of(s).List(t.Context(), m.ID)
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
	fresh, freshSecret, err := Of(s).Create(t.Context(), m.ID, "new", 0)
	if err != nil || fresh.Origin != OriginSession {
		t.Fatalf("%v %+v", err, fresh)
	}
	op, opSecret, err := Of(s).CreateOperator(t.Context(), m.ID, "ops", 0)
	if err != nil || op.Origin != OriginOperator {
		t.Fatalf("%v %+v", err, op)
	}
	kept, expired, err := Of(s).migrateAPITokenOrigins(t.Context())
	if err != nil || kept != 0 || expired != 0 {
		t.Fatalf("second migration: kept %d expired %d %v", kept, expired, err)
	}
	s = reopen(t, s)
	for _, sec := range []string{before, freshSecret, opSecret} {
		if _, _, err := Of(s).Member(t.Context(), sec); err != nil {
			t.Fatalf("after a second Open: %v", err)
		}
	}
	if _, _, err := Of(s).Member(t.Context(), minted); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after a second Open: %v", err)
	}
}

// A backup of an earlier version is migrated when it is restored.
func TestRestoreMigratesLegacyAPITokens(t *testing.T) {
	s := storagetest.Open(t)
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := grants.Of(s).CreateApp(t.Context(), "Sync app", "", []string{"https://app.example/cb"}, []string{"read", "write"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	minted := putLegacyAPIToken(t, s, m.ID, "sync", time.Now())
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Member(t.Context(), minted); err != nil {
		t.Fatalf("before the restore the legacy token works (the old way): %v", err)
	}
	if _, err := s.Replace(&buf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Member(t.Context(), minted); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a restored legacy token an OAuth grant could have made works: %v", err)
	}
}
