package oauth

import (
	"context"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/grants"
)

// ClientSpec is an operator client to register (caddy hearth client add,
// the admin API).
type ClientSpec struct {
	Name                   string   `json:"name"`
	RedirectURIs           []string `json:"redirect_uris"`
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris,omitempty"`
	// Scopes the client may ask for; empty: every OpenID scope but
	// offline_access.
	Scopes   []string `json:"scopes,omitempty"`
	Public   bool     `json:"public,omitempty"`
	Pairwise bool     `json:"pairwise,omitempty"`
	// IDTokenSignedResponseAlg is RS256 (the default) or ES256.
	IDTokenSignedResponseAlg string `json:"id_token_signed_response_alg,omitempty"`
}

// RegisterClient validates spec and registers the client. It returns the
// client and its secret ("" for a public client), shown once; a bad spec
// is a *storage.InvalidError saying what to fix.
func RegisterClient(ctx context.Context, st *storage.Store, spec ClientSpec) (*grants.App, string, error) {
	name := strings.TrimSpace(spec.Name)
	if name == "" || utf8.RuneCountInString(name) > maxAppNameLen || !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return nil, "", storage.Invalid("name must be 1 to %d characters on one line", maxAppNameLen)
	}
	if len(spec.RedirectURIs) == 0 || len(spec.RedirectURIs) > maxRedirectURIs {
		return nil, "", storage.Invalid("give 1 to %d redirect URIs", maxRedirectURIs)
	}
	if len(spec.PostLogoutRedirectURIs) > maxRedirectURIs {
		return nil, "", storage.Invalid("give at most %d post-logout redirect URIs", maxRedirectURIs)
	}
	for _, list := range [][]string{spec.RedirectURIs, spec.PostLogoutRedirectURIs} {
		for _, u := range list {
			if msg := checkClientURI(u); msg != "" {
				return nil, "", storage.Invalid("%s: %s", msg, clipURI(u))
			}
		}
	}
	scopes := spec.Scopes
	if len(scopes) == 0 {
		scopes = []string{"openid", "profile", "email", "groups"}
	}
	var clean []string
	for _, sc := range scopes {
		for _, f := range strings.Fields(sc) {
			if !grants.IsOIDCScope(f) {
				return nil, "", storage.Invalid("unknown scope %q; the scopes are %s", clipURI(f), strings.Join(grants.OIDCScopes, ", "))
			}
			if !contains(clean, f) {
				clean = append(clean, f)
			}
		}
	}
	alg := spec.IDTokenSignedResponseAlg
	switch alg {
	case "RS256":
		alg = ""
	case "", "ES256":
	default:
		return nil, "", storage.Invalid("id_token_signed_response_alg must be RS256 or ES256")
	}
	return grants.Of(st).CreateClient(ctx, name, spec.RedirectURIs, clean, grants.ClientSettings{
		IDTokenAlg:             alg,
		Public:                 spec.Public,
		PostLogoutRedirectURIs: spec.PostLogoutRedirectURIs,
		Pairwise:               spec.Pairwise,
	})
}

// checkClientURI is the rule for an operator client's redirect URIs: an
// absolute http(s) URI with a host (plain http is the operator's choice,
// for apps on a private network), or a native app's own scheme; never a
// fragment, credentials or a dangerous scheme.
func checkClientURI(raw string) string {
	if len(raw) > maxURILen || !utf8.ValidString(raw) || strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "not a valid URI"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Scheme == "":
		return "not an absolute URI"
	case strings.Contains(raw, "#"):
		return "a redirect URI cannot contain a fragment"
	case u.User != nil:
		return "a redirect URI cannot carry credentials"
	}
	switch strings.ToLower(u.Scheme) {
	case "javascript", "data", "vbscript", "file", "blob", "about":
		return "this scheme is forbidden"
	case "http", "https":
		if u.Host == "" {
			return "not an absolute URI"
		}
	}
	return ""
}

func clipURI(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
