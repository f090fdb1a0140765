package oauth_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

// TestPerAddressLimitsCountAnIPv6Slash64: app registrations, the token
// endpoint and unknown bearer tokens count every address of one IPv6 /64
// together (rotating addresses within it does not escape them); another
// /64 has its own count.
func TestPerAddressLimitsCountAnIPv6Slash64(t *testing.T) {
	client := func(o *oauth.Options) {
		o.ClientIP = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
	}
	from := func(i int) string { return fmt.Sprintf("2001:db8:1:2::%x", i+1) }
	t.Run("app registrations", func(t *testing.T) {
		f := newFixture(t, client, func(o *oauth.Options) { o.RegistrationLimit = 2 })
		form := url.Values{"client_name": {"App"}, "redirect_uris": {"https://a.example/cb"}}
		for i := range 2 {
			wantStatus(t, f.postForm(oauth.AppsPath, form, "X-Test-Client", from(i)), http.StatusOK)
		}
		wantStatus(t, f.postForm(oauth.AppsPath, form, "X-Test-Client", "2001:db8:1:2:ffff::1"), http.StatusTooManyRequests)
		wantStatus(t, f.postForm(oauth.AppsPath, form, "X-Test-Client", "2001:db8:1:3::1"), http.StatusOK)
	})
	t.Run("token endpoint", func(t *testing.T) {
		f := newFixture(t, client, func(o *oauth.Options) { o.TokenLimit = 2 })
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"x"}, "client_secret": {"y"}}
		for i := range 2 {
			wantOAuthError(t, f.token(form, "X-Test-Client", from(i)), "invalid_client")
		}
		wantStatus(t, f.token(form, "X-Test-Client", "2001:db8:1:2::ffff"), http.StatusTooManyRequests)
		wantOAuthError(t, f.token(form, "X-Test-Client", "2001:db8:1:3::1"), "invalid_client")
	})
	t.Run("unknown bearer tokens", func(t *testing.T) {
		f := newFixture(t, client, func(o *oauth.Options) { o.TokenLimit = 2 })
		guess := func(addr string) resp {
			return f.request(http.MethodGet, oauth.VerifyCredentialsPath, "", nil, "Authorization", "Bearer hat_guess", "X-Test-Client", addr)
		}
		for i := range 2 {
			wantStatus(t, guess(from(i)), http.StatusUnauthorized)
		}
		wantStatus(t, guess("2001:db8:1:2::abc"), http.StatusTooManyRequests)
		wantStatus(t, guess("2001:db8:1:3::1"), http.StatusUnauthorized)
	})
}
