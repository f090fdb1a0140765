package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
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
