package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/gate"
)

func init() {
	// With the other authentication handlers: before request_header,
	// encode and everything that answers (reverse_proxy, file_server).
	registerHandler[Gate](httpcaddyfile.After, "basic_auth")
}

// Gate is the hearth_gate handler: only the site's signed-in members pass
// (handlers/gate), with who they are in Remote-User, Remote-Name,
// Remote-Email (a verified address) and Remote-Groups; browsers are sent
// to sign in, API clients get 401. With forward_auth it answers instead of
// passing on, for Caddy's forward_auth and nginx's auth_request.
type Gate struct {
	// Only these members may pass (with allow_groups: members of either).
	AllowMembers []string `json:"allow_members,omitempty" caddyfile:"allow_members <username...>" default:"every member"`
	// Only members of these groups may pass (caddy hearth member groups).
	AllowGroups []string `json:"allow_groups,omitempty" caddyfile:"allow_groups <group...>" default:"every member"`
	// Only members who sign in with a second factor may pass.
	RequireTwoFactor bool `json:"require_two_factor,omitempty" caddyfile:"require_two_factor" default:"off"`
	// Only members whose session signed in with a passkey (alone or as the second factor) may pass.
	RequirePasskey bool `json:"require_passkey,omitempty" caddyfile:"require_passkey" default:"off"`
	// Where browsers sign in: the sign-in page of the site serving Hearth's pages, for a gate on another
	// subdomain (with the hearth option cookie_domain).
	SignInURL string `json:"sign_in_url,omitempty" caddyfile:"sign_in_url <url>" default:"/auth/sign_in on the same site"`
	// Answer 200 with the member's headers, or 401 (a browser: a redirect to sign in), instead of passing on.
	ForwardAuth bool `json:"forward_auth,omitempty" caddyfile:"forward_auth" default:"off"`

	gate *gate.Gate
	app  *App
}

// CaddyModule returns the Caddy module information.
func (Gate) CaddyModule() caddy.ModuleInfo { return handlerInfo[Gate]("hearth_gate") }

// Provision builds the gate on the hearth app's store.
func (h *Gate) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	h.app = app
	h.gate = gate.New(app.Store(), gate.Options{
		Members:          h.AllowMembers,
		Groups:           h.AllowGroups,
		RequireTwoFactor: h.RequireTwoFactor,
		RequirePasskey:   h.RequirePasskey,
		SignInURL:        h.SignInURL,
		Logger:           ctx.Logger(),
	})
	return nil
}

// Validate checks sign_in_url.
func (h *Gate) Validate() error {
	if h.SignInURL != "" {
		u, err := url.Parse(h.SignInURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
			return fmt.Errorf("hearth_gate: sign_in_url must be an absolute http(s) URL without a query, got %q", h.SignInURL)
		}
	}
	return nil
}

// signInPaths are the member pages a browser needs to sign in; a gate that
// signs in on its own site serves them itself, so it never locks the
// member out of signing in (and they never reach the app behind).
var signInPaths = map[string]bool{account.SignInPath: true, account.TwoFactorPath: true, account.CopyScriptPath: true,
	account.PasskeyScriptPath: true, account.PasskeySignInOptionsPath: true, account.PasskeySignInPath: true,
	account.TwoFactorPasskeyOptionsPath: true, account.TwoFactorPasskeyPath: true}

// ServeHTTP lets members through, or refuses.
func (h *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if err := h.app.start(); err != nil {
		return caddyhttp.Error(http.StatusServiceUnavailable, err)
	}
	if h.ForwardAuth {
		h.gate.ServeForwardAuth(w, r)
		return nil
	}
	if h.SignInURL == "" && signInPaths[r.URL.Path] {
		h.app.Pages().ServeHTTP(w, r)
		return nil
	}
	v, m, _ := h.gate.Check(r)
	if v != gate.Pass {
		h.gate.Refuse(w, r, v, h.back(r))
		return nil
	}
	gate.Prepare(r, m)
	return next.ServeHTTP(w, r)
}

// back is where sign-in returns to: the path on this site, or the whole
// URL when sign-in is on another one.
func (h *Gate) back(r *http.Request) string {
	if h.SignInURL == "" {
		return r.URL.RequestURI()
	}
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + r.Host + r.URL.RequestURI()
}

// UnmarshalCaddyfile reads the directive's block.
func (h *Gate) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return readBlock(d, "hearth_gate subdirective", func(name string) (err error) {
		switch name {
		case "allow_members":
			h.AllowMembers, err = argStrings(d)
		case "allow_groups":
			h.AllowGroups, err = argStrings(d)
		case "require_two_factor":
			h.RequireTwoFactor, err = true, argNone(d)
		case "require_passkey":
			h.RequirePasskey, err = true, argNone(d)
		case "sign_in_url":
			h.SignInURL, err = argString(d)
		case "forward_auth":
			h.ForwardAuth, err = true, argNone(d)
		default:
			err = errUnrecognized
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Gate)(nil)
	_ caddy.Validator             = (*Gate)(nil)
	_ caddyhttp.MiddlewareHandler = (*Gate)(nil)
	_ caddyfile.Unmarshaler       = (*Gate)(nil)
)
