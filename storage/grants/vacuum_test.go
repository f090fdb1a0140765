package grants_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// TestUnusedAppsAreRemovedAfterADay: a day after registration, an app
// never used is gone: its client_id and secret no longer authenticate
// (what the token endpoint answers with Doorkeeper's invalid_client), as
// Mastodon's ApplicationsVacuum deletes it (app/lib/vacuum/
// applications_vacuum.rb in mastodon/mastodon, commit
// 0ca70415d85273e68efc0535d6c407b6891982fe); an app that got an app token,
// one that got an authorization code, one registered less than a day ago
// and an operator client all stay.
func TestUnusedAppsAreRemovedAfterADay(t *testing.T) {
	st := storagetest.OpenFast(t, t.TempDir())
	kvtest.Eventually(t, "the store listens for other nodes' writes", st.Live)
	g := grants.Of(st)
	const redirect = "https://app.example/cb"
	type client struct{ id, secret string }
	register := func(name string) client {
		t.Helper()
		app, secret, err := g.CreateApp(t.Context(), name, "", []string{redirect}, []string{"read"})
		if err != nil {
			t.Fatal(err)
		}
		return client{app.ClientID, secret}
	}
	authenticates := func(c client) error {
		_, err := g.AuthenticateClient(t.Context(), c.id, c.secret)
		return err
	}

	unused := register("Unused")
	byToken := register("Used by its app token")
	_, token, err := g.CreateAppToken(t.Context(), byToken.id, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	// An app that revoked its only token was used all the same.
	if err := g.RevokeToken(t.Context(), byToken.id, token); err != nil {
		t.Fatal(err)
	}
	byCode := register("Used by a member")
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "Alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateCode(t.Context(), byCode.id, m, redirect, []string{"read"}, ""); err != nil {
		t.Fatal(err)
	}
	op, opSecret, err := g.CreateClient(t.Context(), "Wiki", []string{redirect}, []string{"openid"}, grants.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}

	// A pass before the day is over removes nothing.
	if err := grants.VacuumApps(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if err := authenticates(unused); err != nil {
		t.Fatalf("an unused app before its first day: %v", err)
	}

	defer grants.SetNow(func() time.Time { return time.Now().Add(grants.UnusedAppAge + time.Minute) })()
	young := register("Registered a minute ago")
	if err := grants.VacuumApps(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if err := authenticates(unused); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("an app unused for a day authenticates: %v, want not found (invalid_client)", err)
	}
	// Its client, had it authenticated just before the removal (a request
	// in flight), gets no token that would outlive the app.
	if _, _, err := g.CreateAppToken(t.Context(), unused.id, []string{"read"}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("an app token for a removed app: %v, want not found (invalid_client)", err)
	}
	for what, c := range map[string]client{
		"an app used by its app token":   byToken,
		"an app used by a member":        byCode,
		"an app registered a minute ago": young,
	} {
		if err := authenticates(c); err != nil {
			t.Errorf("%s: %v, want it kept", what, err)
		}
	}
	if _, err := g.AuthenticateOperatorClient(t.Context(), op.ClientID, opSecret); err != nil {
		t.Errorf("an operator client a day on: %v, want it kept", err)
	}
}
