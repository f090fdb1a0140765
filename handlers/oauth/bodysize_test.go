package oauth_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

// TestTokenOversizeBodyIs413: a token (or revocation) request longer than
// MaxBodyBytes is refused with 413 in RFC 6749's error shape, in every body
// encoding the endpoint reads; a short malformed body stays a 400.
func TestTokenOversizeBodyIs413(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.MaxBodyBytes = 1024 })
	big := strings.Repeat("a", 2000)
	for _, path := range []string{oauth.TokenPath, oauth.RevokePath} {
		for _, tc := range []struct{ contentType, body string }{
			{"application/x-www-form-urlencoded", "grant_type=client_credentials&client_id=" + big},
			{"application/x-www-form-urlencoded; charset=utf-8", "grant_type=client_credentials&client_id=" + big},
			{"application/json", `{"grant_type":"client_credentials","client_id":"` + big + `"}`},
		} {
			r := f.request(http.MethodPost, path, tc.contentType, strings.NewReader(tc.body))
			wantStatus(t, r, http.StatusRequestEntityTooLarge)
			if body := r.json(t); body["error"] != "invalid_request" || body["error_description"] == "" {
				t.Errorf("%s %s: %s", path, tc.contentType, r.body)
			}
		}
	}
	r := f.request(http.MethodPost, oauth.TokenPath, "application/json", strings.NewReader(`{"grant_type":`))
	wantOAuthError(t, r, "invalid_request")
}
