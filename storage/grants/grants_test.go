package grants

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"

	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

func openOAuthTestStore(t *testing.T) *storage.Store {
	t.Helper()
	s := storagetest.OpenFast(t, t.TempDir())
	// On PostgreSQL the record caches serve once the store listens for
	// other nodes' writes (recordcache.go).
	kvtest.Eventually(t, "the store listens for other nodes' writes", s.Live)
	return s
}

func oauthFixture(t *testing.T) (*storage.Store, *members.Member, *App, string) {
	t.Helper()
	s := openOAuthTestStore(t)
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "Alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	app, secret, err := Of(s).CreateApp(t.Context(), "Tooter", "", []string{"https://app.example/cb"}, []string{"read", "write"})
	if err != nil {
		t.Fatal(err)
	}
	return s, m, app, secret
}

// issueToken is an access token of m for app with scopes, issued as an
// app's is: a code granted to redirectURI, then exchanged.
func issueToken(tb testing.TB, s *storage.Store, app *App, m *members.Member, redirectURI string, scopes ...string) (*AccessToken, string) {
	tb.Helper()
	code, err := Of(s).CreateCode(tb.Context(), app.ClientID, m, redirectURI, scopes, "")
	if err != nil {
		tb.Fatal(err)
	}
	tk, tok, err := Of(s).ExchangeCode(tb.Context(), code, func(*Code) error { return nil })
	if err != nil {
		tb.Fatal(err)
	}
	return tk, tok
}

func TestOAuthSecretsStoredOnlyAsDigests(t *testing.T) {
	s, m, app, secret := oauthFixture(t)
	code, err := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	err = s.View(t.Context(), func(tx *storage.Tx) error {
		return tx.Scan([]byte{}, nil, false, false, func(k, v []byte) (bool, error) {
			all.Write(k)
			all.Write(v)
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"client secret": secret, "code": code, "token": tok} {
		if strings.Contains(all.String(), v) {
			t.Errorf("%s stored in the clear", name)
		}
	}
}

func TestAuthenticateOAuthClient(t *testing.T) {
	s, _, app, secret := oauthFixture(t)
	if _, err := Of(s).AuthenticateClient(t.Context(), app.ClientID, secret); err != nil {
		t.Fatalf("right secret: %v", err)
	}
	for _, c := range []struct{ id, secret string }{
		{app.ClientID, secret + "x"}, {app.ClientID, ""}, {"nope", secret}, {"", ""},
	} {
		if _, err := Of(s).AuthenticateClient(t.Context(), c.id, c.secret); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("AuthenticateOAuthClient(%q, …) = %v, want storage.ErrNotFound", c.id, err)
		}
	}
}

func TestOAuthCodeSingleUseRevokesOnReplay(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	code, _ := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	_, tok, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Token(t.Context(), tok); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); !errors.Is(err, ErrCodeUsed) {
		t.Fatalf("second use = %v, want ErrCodeUsed", err)
	}
	if _, _, err := Of(s).Token(t.Context(), tok); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("token after replay = %v, want storage.ErrNotFound (revoked)", err)
	}
}

func TestOAuthCodeFailedExchangeConsumesIt(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	code, _ := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	bad := errors.New("wrong verifier")
	if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return bad }); !errors.Is(err, bad) {
		t.Fatalf("got %v, want the check's error", err)
	}
	if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); !errors.Is(err, ErrCodeUsed) {
		t.Fatalf("after a failed exchange = %v, want ErrCodeUsed", err)
	}
}

func TestOAuthCodeExpiresAfterTenMinutes(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	code, _ := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	defer setNow(func() time.Time { return time.Now().Add(CodeLifetime + time.Second) })()
	if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("old code = %v, want storage.ErrNotFound", err)
	}
}

func TestOAuthCodeConcurrentExchangesIssueOneToken(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	code, _ := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var tokens []string
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, tok, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil })
			if err == nil {
				mu.Lock()
				tokens = append(tokens, tok)
				mu.Unlock()
			} else if !errors.Is(err, ErrCodeUsed) {
				t.Errorf("exchange: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(tokens) != 1 {
		t.Fatalf("%d tokens issued, want exactly 1", len(tokens))
	}
}

func TestOAuthTokenRefusesSuspendedAndDeletedMembers(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	tk, tok := issueToken(t, s, app, m, "https://app.example/cb", "read")
	got, gm, err := Of(s).Token(t.Context(), tok)
	if err != nil || gm.ID != m.ID || got.ID != tk.ID || !got.Allows("read:statuses") || got.Allows("write") {
		t.Fatalf("OAuthToken = %+v, %+v, %v", got, gm, err)
	}
	if _, err := members.Of(s).SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Token(t.Context(), tok); !errors.Is(err, members.ErrSuspended) {
		t.Fatalf("suspended: %v, want members.ErrSuspended", err)
	}
	if _, err := members.Of(s).SetSuspended(t.Context(), "alice", false); err != nil {
		t.Fatal(err)
	}
	if err := members.Of(s).DeleteMember(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Token(t.Context(), tok); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleted member: %v, want storage.ErrNotFound", err)
	}
}

func TestRevokeOAuthTokenOnlyOwnClient(t *testing.T) {
	s, _, app, _ := oauthFixture(t)
	other, _, _ := Of(s).CreateApp(t.Context(), "Other", "", []string{"https://o.example/cb"}, []string{"read"})
	_, tok, err := Of(s).CreateAppToken(t.Context(), app.ClientID, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Of(s).RevokeToken(t.Context(), other.ClientID, tok); err != nil {
		t.Fatal(err)
	}
	if _, m, err := Of(s).Token(t.Context(), tok); err != nil || m != nil {
		t.Fatalf("after another client's revoke: %v, member %v", err, m)
	}
	if err := Of(s).RevokeToken(t.Context(), app.ClientID, tok); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Of(s).Token(t.Context(), tok); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after revoke: %v", err)
	}
	if err := Of(s).RevokeToken(t.Context(), app.ClientID, tok); err != nil {
		t.Fatalf("revoking twice: %v", err)
	}
}

func TestAuthorizedOAuthAppsAndMemberRevoke(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	var toks []string
	for _, sc := range [][]string{{"read"}, {"write"}} {
		_, tok := issueToken(t, s, app, m, "https://app.example/cb", sc...)
		toks = append(toks, tok)
	}
	apps, err := Of(s).AuthorizedApps(t.Context(), m.ID)
	if err != nil || len(apps) != 1 || apps[0].App.Name != "Tooter" || strings.Join(apps[0].Scopes, " ") != "read write" {
		t.Fatalf("AuthorizedOAuthApps = %+v, %v", apps, err)
	}
	if err := Of(s).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		if _, _, err := Of(s).Token(t.Context(), tok); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("token after member revoke: %v", err)
		}
	}
	if apps, _ := Of(s).AuthorizedApps(t.Context(), m.ID); len(apps) != 0 {
		t.Fatalf("still listed: %+v", apps)
	}
}

func TestMemberRevokeVoidsOutstandingCodes(t *testing.T) {
	s, m, app, _ := oauthFixture(t)
	other, err := members.Of(s).CreateMember(t.Context(), "bob", "Bob", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	pending, _ := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	bobs, _ := Of(s).CreateCode(t.Context(), app.ClientID, other, "https://app.example/cb", []string{"read"}, "")
	if err := Of(s).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}
	ok := func(*Code) error { return nil }
	if _, _, err := Of(s).ExchangeCode(t.Context(), pending, ok); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a code granted before the revocation: %v, want storage.ErrNotFound", err)
	}
	if _, _, err := Of(s).ExchangeCode(t.Context(), bobs, ok); err != nil {
		t.Fatalf("another member's code: %v", err)
	}
	// Approving the app again afterwards works.
	again, _ := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
	if _, _, err := Of(s).ExchangeCode(t.Context(), again, ok); err != nil {
		t.Fatalf("a code granted after the revocation: %v", err)
	}
	if apps, _ := Of(s).AuthorizedApps(t.Context(), m.ID); len(apps) != 1 {
		t.Fatalf("authorized apps after approving again: %+v", apps)
	}
}

func TestOAuthScopesCover(t *testing.T) {
	cases := []struct {
		granted string
		want    string
		ok      bool
	}{
		{"read", "read:statuses", true},
		{"write", "write:media", true},
		{"read", "write:statuses", false},
		{"read:statuses", "read", false},
		{"read:statuses", "read:accounts", false},
		{"write:statuses", "write:media", false},
		{"profile", "profile", true},
		{"read", "profile", false},
		{"follow", "read:follows", true},
		{"read", "read:nonsense", false},
	}
	for _, c := range cases {
		if got := ScopesCover(strings.Fields(c.granted), c.want); got != c.ok {
			t.Errorf("ScopesCover(%q, %q) = %v, want %v", c.granted, c.want, got, c.ok)
		}
	}
}

// BenchmarkCreateOAuthAppToken is the store's part of a client_credentials
// issuance (bench/oauth.sh loads the whole request), without syncing.
func BenchmarkCreateOAuthAppToken(b *testing.B) {
	st, app := benchStoreAndApp(b)
	defer st.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := Of(st).CreateAppToken(b.Context(), app.ClientID, []string{"read"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokenOfMember is the store's part of authenticating a member's
// bearer token (verify_credentials and every Mastodon API request): the
// token and its member, both from the record caches once the first run read
// them.
func BenchmarkTokenOfMember(b *testing.B) {
	st, app := benchStoreAndApp(b)
	defer st.Close()
	m, err := members.Of(st).CreateMember(b.Context(), "alice", "Alice", "correct horse battery")
	if err != nil {
		b.Fatal(err)
	}
	_, token := issueToken(b, st, app, m, "urn:ietf:wg:oauth:2.0:oob", "read")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, got, err := Of(st).Token(b.Context(), token); err != nil || got.ID != m.ID {
			b.Fatalf("Token: %v, %v", got, err)
		}
	}
}

// benchStoreAndApp opens a store on Badger without syncing, with an
// application registered. The benchmark closes it when it returns (a
// deferred Close, not b.Cleanup: a store of the first short run closing
// while the timed run goes on would count its work there).
func benchStoreAndApp(b *testing.B) (*storage.Store, *App) {
	b.Helper()
	f := false
	st, err := storage.Open(b.TempDir(), storage.Options{GCInterval: -1, SyncWrites: &f})
	if err != nil {
		b.Fatal(err)
	}
	app, _, err := Of(st).CreateApp(b.Context(), "bench", "", []string{"urn:ietf:wg:oauth:2.0:oob"}, []string{"read"})
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	return st, app
}

// The engine suite's server for this package (storagetest.Main).
const testPostgresPort = 15443

func TestMain(m *testing.M) { storagetest.Main(m, testPostgresPort) }

// TestCodeGrantedBeforeCredentialChange: an authorization code granted
// before its member's password, second factor or suspension changed is not
// exchanged (the change ended the session that granted it), and a member
// read by a session before the change grants no new code.
func TestCodeGrantedBeforeCredentialChange(t *testing.T) {
	changes := map[string]func(s *storage.Store, m *members.Member) error{
		"password": func(s *storage.Store, m *members.Member) error {
			_, _, err := members.Of(s).ChangePassword(t.Context(), m.ID, "another password", "", false)
			return err
		},
		"two-factor off": func(s *storage.Store, m *members.Member) error {
			return members.Of(s).DisableTwoFactor(t.Context(), m.ID, "")
		},
		"suspension and reinstatement": func(s *storage.Store, m *members.Member) error {
			if _, err := members.Of(s).SetSuspended(t.Context(), m.Username, true); err != nil {
				return err
			}
			_, err := members.Of(s).SetSuspended(t.Context(), m.Username, false)
			return err
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			s, m, app, _ := oauthFixture(t)
			if name == "two-factor off" {
				const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
				if err := members.Of(s).StartTwoFactorSetup(t.Context(), m.ID, secret); err != nil {
					t.Fatal(err)
				}
				code, _ := members.TOTPCode(secret, time.Now())
				if _, err := members.Of(s).ConfirmTwoFactor(t.Context(), m.ID, code, ""); err != nil {
					t.Fatal(err)
				}
				m, _ = members.Of(s).MemberByID(t.Context(), m.ID)
			}
			code, err := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := change(s, m); err != nil {
				t.Fatal(err)
			}
			if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("exchange of a code granted before the change: %v, want ErrNotFound (invalid_grant)", err)
			}
			if _, err := Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, ""); !errors.Is(err, members.ErrCredentialsChanged) {
				t.Fatalf("a code granted by the member as read before the change: %v, want ErrCredentialsChanged", err)
			}
			// Signed in again, the member grants codes that work.
			m, _ = members.Of(s).MemberByID(t.Context(), m.ID)
			code, err = Of(s).CreateCode(t.Context(), app.ClientID, m, "https://app.example/cb", []string{"read"}, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := Of(s).ExchangeCode(t.Context(), code, func(*Code) error { return nil }); err != nil {
				t.Fatalf("a code granted after the change: %v", err)
			}
		})
	}
}
