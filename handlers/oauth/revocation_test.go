package oauth_test

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// manyTokensCount is how many tokens the member holds in the tests of
// revocation at scale: more than one transaction may delete.
const manyTokensCount = 10000

// TestRevokingAccessAtManyTokens: a member holding 10,000 tokens of an
// app (as a client that mints them can make them) ends its access through
// each page that does it, and the page answers as at one token: the
// account page's password change with "revoke access", a reset link made
// to revoke access, the authorized apps page's revoke. Every token is then
// refused with Mastodon's 401, and the app is no longer listed.
func TestRevokingAccessAtManyTokens(t *testing.T) {
	for _, how := range []string{"password change", "reset link", "authorized apps page"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t)
			m := f.member("alice")
			tooter := f.register("Tooter", "https://app.example/cb", "read")
			b := f.signedIn("alice")
			approved := f.exchange(tooter, b.approve(authQuery(tooter, "https://app.example/cb", "read", "s")), "https://app.example/cb", "")
			toks, err := grants.Of(f.store).IssueMany(t.Context(), tooter.ClientID, m.ID, []string{"read"}, manyTokensCount)
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, approved)
			for _, tok := range []string{toks[0], approved} {
				wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
			}
			wantBody(t, b.get(oauth.AuthorizedAppsPath), "Tooter")

			switch how {
			case "password change":
				page := b.get(account.AccountPath)
				r := b.submit(page, "/settings/account/password", url.Values{
					"current_password": {password}, "password": {"a new password"}, "password_confirmation": {"a new password"},
					"revoke_access": {"1"},
				})
				wantStatus(t, r, http.StatusSeeOther)
				wantBody(t, b.follow(r), "your API tokens and authorized apps were revoked")
			case "reset link":
				link, _, _, err := members.Of(f.store).CreateResetLink(t.Context(), "alice", time.Hour, members.ResetLinkOptions{RevokeAccess: true})
				if err != nil {
					t.Fatal(err)
				}
				visitor := f.browser()
				page := visitor.get(account.ResetPathPrefix + link)
				wantStatus(t, page, http.StatusOK)
				r := visitor.submit(page, account.ResetPathPrefix+link, url.Values{"password": {"a new password"}, "password_confirmation": {"a new password"}})
				wantStatus(t, r, http.StatusOK)
				wantBody(t, r, "Your new password is set")
				b = f.browser()
				r = b.submit(b.get(account.SignInPath), account.SignInPath, url.Values{"username": {"alice"}, "password": {"a new password"}})
				wantStatus(t, r, http.StatusSeeOther)
			case "authorized apps page":
				r := b.submit(b.get(oauth.AuthorizedAppsPath), oauth.AuthorizedAppsPath, nil)
				wantStatus(t, r, http.StatusOK)
				wantBody(t, r, "Tooter was revoked")
			}
			for _, tok := range []string{toks[0], toks[len(toks)/2], toks[manyTokensCount-1], approved} {
				wantJSONError(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnauthorized, "The access token is invalid")
			}
			if r := b.get(oauth.AuthorizedAppsPath); strings.Contains(r.body, "Tooter") {
				t.Fatalf("the revoked app is still listed:\n%s", r.body)
			}
		})
	}
}

// pgNodes is this package's PostgreSQL server for two nodes of one site
// (each package its own port, so packages may run at once).
var pgNodes = storagetest.NewPostgres(15469)

func TestMain(m *testing.M) {
	code := m.Run()
	pgNodes.Stop()
	os.Exit(code)
}

// TestRevokingAccessAtManyTokensOnTwoNodes: two nodes of one site on
// PostgreSQL; the member changes their password with "revoke access" on
// node A while holding 10,000 tokens, which node B has been answering
// (the tokens, the member and the grant in B's caches): A answers as at
// one token, and B answers Mastodon's 401 for them.
func TestRevokingAccessAtManyTokensOnTwoNodes(t *testing.T) {
	sa, sb := pgNodes.TwoNodes(t)
	a, b := newFixtureOn(t, sa), newFixtureOn(t, sb)
	m := a.member("alice")
	tooter := a.register("Tooter", "https://app.example/cb", "read")
	browser := a.signedIn("alice")
	toks, err := grants.Of(sa).IssueMany(t.Context(), tooter.ClientID, m.ID, []string{"read"}, manyTokensCount)
	if err != nil {
		t.Fatal(err)
	}
	some := []string{toks[0], toks[len(toks)/2], toks[len(toks)-1]}
	for _, tok := range some {
		wantStatus(t, b.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
	}
	storagetest.Eventually(t, "B has the tokens cached", func() bool {
		for _, tok := range some {
			wantStatus(t, b.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
		}
		for _, tok := range some {
			if !grants.Of(sb).Cached(tok) {
				return false
			}
		}
		return true
	})

	r := browser.submit(browser.get(account.AccountPath), "/settings/account/password", url.Values{
		"current_password": {password}, "password": {"a new password"}, "password_confirmation": {"a new password"},
		"revoke_access": {"1"},
	})
	wantStatus(t, r, http.StatusSeeOther)
	wantBody(t, browser.follow(r), "your API tokens and authorized apps were revoked")
	for _, tok := range some {
		wantJSONError(t, a.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnauthorized, "The access token is invalid")
	}
	storagetest.Eventually(t, "B refuses the revoked tokens", func() bool {
		return b.getWithToken(oauth.VerifyCredentialsPath, toks[0]).StatusCode == http.StatusUnauthorized
	})
	for _, tok := range some {
		wantJSONError(t, b.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnauthorized, "The access token is invalid")
	}
}
