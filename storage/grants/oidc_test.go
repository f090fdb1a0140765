package grants

import (
	"errors"
	"strings"
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
		&CodeOIDC{Nonce: "n", AuthTime: time.Now(), AccessTTL: time.Hour, RefreshTTL: 24 * time.Hour}, nil)
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
	defer setNow(func() time.Time { return time.Now().Add(CodeLifetime + time.Second) })()
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
	defer setNow(func() time.Time { return time.Now().Add(25 * time.Hour) })()
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

// TestOIDCIDTokenSignedWithTheCode: an ID token signed when the code is
// issued is signed for the very access token the exchange issues (its
// at_hash holds), comes back from the exchange, and leaves the store with
// the seed of that token once the code is used; the token is stored only
// as its digest and goes when the code is replayed, as any other.
func TestOIDCIDTokenSignedWithTheCode(t *testing.T) {
	s, m, _, _ := oauthFixture(t)
	app, _, err := Of(s).CreateClient(t.Context(), "Gitea", []string{"https://git.example/cb"}, OIDCScopes, ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	var signedFor string
	sign := func(accessToken string) (*PreparedIDToken, error) {
		signedFor = accessToken
		return &PreparedIDToken{JWT: "header.claims.signature", Issuer: "https://id.example/", Expires: time.Now().Add(time.Hour)}, nil
	}
	code, err := Of(s).CreateCodeOIDC(t.Context(), app.ClientID, m, "https://git.example/cb", []string{"openid", "offline_access"}, "",
		&CodeOIDC{AuthTime: time.Now(), AccessTTL: time.Hour, RefreshTTL: 24 * time.Hour}, sign)
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if signedFor == "" || secret != signedFor {
		t.Fatalf("the ID token was signed for %.8s..., the exchange issued %.8s...", signedFor, secret)
	}
	if tok.Grant == nil || tok.Grant.IDToken == nil || tok.Grant.IDToken.JWT != "header.claims.signature" {
		t.Fatalf("the exchange does not return the ID token signed with the code: %+v", tok.Grant)
	}
	var c Code
	if err := s.View(t.Context(), func(tx *storage.Tx) error { return tx.GetJSON(codeKey(storage.Digest(code)), &c) }); err != nil {
		t.Fatal(err)
	}
	if !c.Used || c.OIDC == nil || c.OIDC.IDToken != nil || c.OIDC.Seed != "" || c.OIDC.Family == "" {
		t.Fatalf("the used code's record keeps %+v", c.OIDC)
	}
	if _, _, err := Of(s).Token(t.Context(), secret); err != nil {
		t.Fatalf("the issued token: %v", err)
	}
	if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); !errors.Is(err, ErrCodeUsed) {
		t.Fatalf("replay = %v, want ErrCodeUsed", err)
	}
	if _, _, err := Of(s).Token(t.Context(), secret); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the token issued from a replayed code = %v, want storage.ErrNotFound", err)
	}
	if _, _, _, err := Of(s).Refresh(t.Context(), app.ClientID, tok.Refresh, nil); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the refresh token issued from a replayed code = %v, want storage.ErrNotFound", err)
	}
}

// TestOIDCPreparedTokenNeedsCodeAndRecord: the access token of a code
// whose ID token was signed ahead depends on the record's seed too, not
// on the code alone: the same code with another seed gives another token.
func TestOIDCPreparedTokenNeedsCodeAndRecord(t *testing.T) {
	code := storage.NewSecret(CodePrefix, 32)
	a, b := accessTokenFor(code, storage.NewSecret("", 32)), accessTokenFor(code, storage.NewSecret("", 32))
	if a == b || !strings.HasPrefix(a, TokenPrefix) || len(a) != len(storage.NewSecret(TokenPrefix, 32)) {
		t.Fatalf("tokens %.8s... and %.8s...", a, b)
	}
}

// TestOIDCCodeNotStoredWhenSigningFails: a code whose ID token cannot be
// signed is not issued.
func TestOIDCCodeNotStoredWhenSigningFails(t *testing.T) {
	s, m, _, _ := oauthFixture(t)
	app, _, err := Of(s).CreateClient(t.Context(), "Gitea", []string{"https://git.example/cb"}, OIDCScopes, ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("no key")
	code, err := Of(s).CreateCodeOIDC(t.Context(), app.ClientID, m, "https://git.example/cb", []string{"openid"}, "",
		&CodeOIDC{AuthTime: time.Now(), AccessTTL: time.Hour}, func(string) (*PreparedIDToken, error) { return nil, failed })
	if !errors.Is(err, failed) || code != "" {
		t.Fatalf("CreateCodeOIDC = %q, %v", code, err)
	}
}
