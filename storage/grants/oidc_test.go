package grants

import (
	"errors"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// oidcCode creates an operator client's code with offline_access.
func oidcCode(t *testing.T, s *storage.Store, m *members.Member) (*App, string) {
	t.Helper()
	app, _, err := Of(s).CreateClient(t.Context(), "Gitea", []string{"https://git.example/cb"}, OIDCScopes, ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	code, err := Of(s).CreateCodeOIDC(t.Context(), app.ClientID, m, "https://git.example/cb", []string{"openid", "offline_access"}, "",
		&CodeOIDC{Nonce: "n", AuthTime: time.Now(), AccessTTL: time.Hour, RefreshTTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return app, code
}

// TestOIDCExpiredCodeRefused: an operator client's code expires as any
// other (the token endpoint answers invalid_grant for ErrNotFound).
func TestOIDCExpiredCodeRefused(t *testing.T) {
	s, m, _, _ := oauthFixture(t)
	_, code := oidcCode(t, s, m)
	now = func() time.Time { return time.Now().Add(CodeLifetime + time.Second) }
	defer func() { now = time.Now }()
	if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired code = %v, want storage.ErrNotFound", err)
	}
}

// TestOIDCRefreshTokenExpires: a refresh token past its lifetime is
// refused; an access token past its lifetime is too.
func TestOIDCRefreshTokenExpires(t *testing.T) {
	s, m, _, _ := oauthFixture(t)
	app, code := oidcCode(t, s, m)
	tok, secret, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil })
	if err != nil || tok.Refresh == "" {
		t.Fatalf("exchange: %v, refresh %q", err, tok.Refresh)
	}
	now = func() time.Time { return time.Now().Add(25 * time.Hour) }
	defer func() { now = time.Now }()
	if _, _, _, err := Of(s).Refresh(t.Context(), app.ClientID, tok.Refresh, nil); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired refresh token = %v", err)
	}
	if _, _, err := Of(s).Token(t.Context(), secret); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired access token = %v", err)
	}
}

// TestOIDCKeyringPolicy: the first key signs at once; a successor is
// published PublishAhead before it signs; the old key stays Retain after
// its last signature, then goes.
func TestOIDCKeyringPolicy(t *testing.T) {
	p := KeyPolicy{Rotation: 10 * time.Hour, PublishAhead: time.Hour, Retain: 2 * time.Hour}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var r keyring
	key := func() *SigningKey { return &SigningKey{ID: storage.NewSecret("", 8)} }
	if !r.change(t0, p, key(), false) || len(r.Keys) != 1 || r.signer(t0) != 0 {
		t.Fatal("no first key")
	}
	first := r.Keys[0]
	if r.change(t0.Add(8*time.Hour), p, key(), false) {
		t.Fatal("a successor before the signer is within PublishAhead of its end")
	}
	if !r.change(t0.Add(9*time.Hour), p, key(), false) || len(r.Keys) != 2 {
		t.Fatal("no successor published ahead")
	}
	if r.Keys[r.signer(t0.Add(9*time.Hour+30*time.Minute))] != first {
		t.Fatal("the successor signs before its time")
	}
	if r.Keys[r.signer(t0.Add(10*time.Hour))] == first {
		t.Fatal("the successor does not sign at its time")
	}
	r.change(t0.Add(11*time.Hour), p, key(), false)
	if len(r.Keys) != 2 {
		t.Fatal("the old key went before what it signed expired")
	}
	r.change(t0.Add(12*time.Hour+time.Minute), p, key(), false)
	for _, k := range r.Keys {
		if k == first {
			t.Fatal("the old key stays after what it signed expired")
		}
	}
}

// TestOIDCRefreshEndsWithCredentialChange: a refresh token is refused once
// the member's password changed (the security stamp of its grant differs).
func TestOIDCRefreshEndsWithCredentialChange(t *testing.T) {
	s, m, _, _ := oauthFixture(t)
	app, code := oidcCode(t, s, m)
	tok, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil })
	if err != nil || tok.Refresh == "" {
		t.Fatalf("exchange: %v", err)
	}
	if err := members.Of(s).SetPassword(t.Context(), m.Username, "a brand new password"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Of(s).Refresh(t.Context(), app.ClientID, tok.Refresh, nil); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("refresh after a password change = %v, want storage.ErrNotFound", err)
	}
}
