package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

func init() {
	registerHandler[OAuth](httpcaddyfile.Before, "handle")
}

// OAuth is the hearth_oauth handler: the Mastodon-compatible OAuth
// authorization server for the site's members (handlers/oauth), plus the
// member pages. Requests for other paths go to the next handler.
type OAuth struct {
	// The public URL of the server (scheme://host[:port]).
	BaseURL string `json:"base_url,omitempty" caddyfile:"base_url <url>" default:"each request's scheme and host"`
	// The domain of account handles on a split-domain site.
	AccountDomain string `json:"account_domain,omitempty" caddyfile:"account_domain <domain>" default:"base_url's host"`
	// Allow plain-http redirect URIs beyond loopback hosts.
	AllowHTTPRedirects bool `json:"allow_http_redirects,omitempty" caddyfile:"allow_http_redirects" default:"off"`
	// App registrations (POST /api/v1/apps) per client IP per registration_window (Mastodon's figure).
	RegistrationLimit int `json:"registration_limit,omitempty" caddyfile:"registration_limit <n> <window>" default:"5"`
	// The window of registration_limit.
	RegistrationWindow caddy.Duration `json:"registration_window,omitempty" caddyfile:"registration_limit <n> <window>" default:"10m"`
	// /oauth/token and /oauth/revoke requests, and requests with an unknown bearer token, per client IP per token_window;
	// -1 (Caddyfile: off) disables the limit.
	TokenLimit int `json:"token_limit,omitempty" caddyfile:"token_limit <n> <window> | off" default:"300"`
	// The window of token_limit.
	TokenWindow caddy.Duration `json:"token_window,omitempty" caddyfile:"token_limit <n> <window> | off" default:"5m"`
	// Failed exchanges of one member's authorization codes (wrong client, redirect_uri or PKCE verifier, a code used
	// before) per failed_code_window; past it that member's codes get 429 (sign-in is not affected); -1 (Caddyfile: off)
	// disables the limit.
	FailedCodeLimit int `json:"failed_code_limit,omitempty" caddyfile:"failed_code_limit <n> <window> | off" default:"10"`
	// The window of failed_code_limit.
	FailedCodeWindow caddy.Duration `json:"failed_code_window,omitempty" caddyfile:"failed_code_limit <n> <window> | off" default:"10m"`
	// Authorization codes issued to one member per authorize_window (consent pages shown do not count; an OpenID code
	// costs a signature); past it the authorization page answers 429 with Retry-After and issues none; -1 (Caddyfile:
	// off) disables the limit.
	AuthorizeLimit int `json:"authorize_limit,omitempty" caddyfile:"authorize_limit <n> <window> | off" default:"60"`
	// The window of authorize_limit.
	AuthorizeWindow caddy.Duration `json:"authorize_window,omitempty" caddyfile:"authorize_limit <n> <window> | off" default:"1m"`
	// The site's name: the title in /api/v1/instance and /api/v2/instance, and on every member page.
	InstanceTitle string `json:"instance_title,omitempty" caddyfile:"instance_title <text>" default:"Hearth"`
	// The description in the instance documents.
	InstanceDescription string `json:"instance_description,omitempty" caddyfile:"instance_description <text>" default:"empty"`
	// The contact e-mail address in the instance documents.
	ContactEmail string `json:"contact_email,omitempty" caddyfile:"contact_email <address>" default:"empty"`
	// How long an ID token of an operator client (OpenID Connect) is valid, from its signature (when the code is issued: [oauth.md](oauth.md)).
	IDTokenLifetime caddy.Duration `json:"id_token_lifetime,omitempty" caddyfile:"id_token_lifetime <duration>" default:"1h"`
	// How long an operator client's access token works (Mastodon apps' tokens have no fixed expiry).
	AccessTokenLifetime caddy.Duration `json:"access_token_lifetime,omitempty" caddyfile:"access_token_lifetime <duration>" default:"1h"`
	// How long an operator client's refresh token (offline_access) works; each refresh hands out a new one.
	RefreshTokenLifetime caddy.Duration `json:"refresh_token_lifetime,omitempty" caddyfile:"refresh_token_lifetime <duration>" default:"720h"`
	// How long an ID-token signing key signs before its successor takes over.
	SigningKeyRotation caddy.Duration `json:"signing_key_rotation,omitempty" caddyfile:"signing_key_rotation <duration>" default:"720h"`
	// How long a successor key is published in the JWKS before it signs.
	SigningKeyPublishAhead caddy.Duration `json:"signing_key_publish_ahead,omitempty" caddyfile:"signing_key_publish_ahead <duration>" default:"24h"`

	server *oauth.Server
	pages  *account.Pages
	app    *App

	siteHome
}

// CaddyModule returns the Caddy module information.
func (OAuth) CaddyModule() caddy.ModuleInfo { return handlerInfo[OAuth]("hearth_oauth") }

// Provision builds the server on the hearth app's store and adds the
// authorized-applications page to the member settings.
func (h *OAuth) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	h.pages, h.app = app.Pages(), app
	// Every page of the site says its name, whichever module serves it.
	// The pages are the app's: one name for all the sites of this Caddy.
	if prev := h.pages.SetSiteName(h.InstanceTitle); prev != "" && prev != strings.TrimSpace(h.InstanceTitle) {
		ctx.Logger().Warn("several hearth_oauth instance_title values: the member pages show only one of them",
			zap.String("shown", strings.TrimSpace(h.InstanceTitle)), zap.String("other", prev))
	}
	h.server = oauth.New(app.Store(), oauth.Options{
		RateLimits:           app.RateLimits(),
		BaseURL:              h.BaseURL,
		AccountDomain:        h.AccountDomain,
		AllowHTTPRedirects:   h.AllowHTTPRedirects,
		RegistrationLimit:    h.RegistrationLimit,
		RegistrationWindow:   time.Duration(h.RegistrationWindow),
		TokenLimit:           h.TokenLimit,
		TokenWindow:          time.Duration(h.TokenWindow),
		FailedCodeLimit:      h.FailedCodeLimit,
		FailedCodeWindow:     time.Duration(h.FailedCodeWindow),
		AuthorizeLimit:       h.AuthorizeLimit,
		AuthorizeWindow:      time.Duration(h.AuthorizeWindow),
		InstanceTitle:        h.InstanceTitle,
		InstanceDescription:  h.InstanceDescription,
		ContactEmail:         h.ContactEmail,
		OpenRegistration:     app.OpenRegistration,
		Pages:                h.pages,
		IDTokenLifetime:      time.Duration(h.IDTokenLifetime),
		AccessTokenLifetime:  time.Duration(h.AccessTokenLifetime),
		RefreshTokenLifetime: time.Duration(h.RefreshTokenLifetime),
		KeyRotation:          time.Duration(h.SigningKeyRotation),
		KeyPublishAhead:      time.Duration(h.SigningKeyPublishAhead),
		ClientIP:             clientIP,
		Logger:               ctx.Logger(),
		KeepOutOfAccessLog:   keepOutOfAccessLog,
	})
	h.pages.SetSignInReason(h.server.SignInReason)
	h.pages.AddSettingsPage(account.SettingsPage{
		Path:    oauth.AuthorizedAppsPath,
		Title:   oauth.AuthorizedAppsTitle,
		Handler: h.server.AuthorizedAppsPage(),
	})
	h.pages.AddSettingsPage(account.SettingsPage{
		Path:    oauth.EmailPath,
		Title:   oauth.EmailTitle,
		Handler: h.server.EmailPage(),
	})
	return nil
}

// Validate checks the URLs of the configuration.
func (h *OAuth) Validate() error {
	if h.BaseURL != "" {
		u, err := url.Parse(h.BaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return fmt.Errorf("hearth_oauth: base_url must be scheme://host[:port], got %q", h.BaseURL)
		}
	}
	if h.RegistrationLimit < 0 {
		return fmt.Errorf("hearth_oauth: registration_limit must be positive")
	}
	return nil
}

// ServeHTTP serves the OAuth endpoints and member pages, and passes other
// requests on (orNotFound: a path under /api/v1/, /api/v2/ or /oauth/ that
// neither they nor the rest of the route answer gets Mastodon's JSON 404).
func (h *OAuth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if err := h.app.start(); err != nil {
		return caddyhttp.Error(http.StatusServiceUnavailable, err)
	}
	r = h.withHome(r)
	if isLanding(r) {
		return serveLanding(w, r, next, h.pages, oauthService)
	}
	return serveOrNext(w, r, orNotFound{next, h.pages}, h.server, h.pages)
}

// answerWatch records whether a response was started.
type answerWatch struct {
	http.ResponseWriter
	answered bool
}

func (a *answerWatch) WriteHeader(status int) {
	a.answered = true
	a.ResponseWriter.WriteHeader(status)
}

func (a *answerWatch) Write(b []byte) (int, error) {
	a.answered = true
	return a.ResponseWriter.Write(b)
}

func (a *answerWatch) ReadFrom(r io.Reader) (int64, error) {
	a.answered = true
	return io.Copy(a.ResponseWriter, r)
}

// Unwrap lets http.ResponseController reach the writer's Flush, Hijack, ...
func (a *answerWatch) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// UnmarshalCaddyfile reads the directive's block.
func (h *OAuth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return readBlock(d, "hearth_oauth subdirective", func(name string) (err error) {
		switch name {
		case "base_url":
			h.BaseURL, err = argString(d)
		case "account_domain":
			h.AccountDomain, err = argString(d)
		case "allow_http_redirects":
			h.AllowHTTPRedirects, err = true, argNone(d)
		case "registration_limit":
			h.RegistrationLimit, h.RegistrationWindow, err = argLimit(d, name)
		case "token_limit":
			h.TokenLimit, h.TokenWindow, err = argLimitOrOff(d, name)
		case "failed_code_limit":
			h.FailedCodeLimit, h.FailedCodeWindow, err = argLimitOrOff(d, name)
		case "authorize_limit":
			h.AuthorizeLimit, h.AuthorizeWindow, err = argLimitOrOff(d, name)
		case "instance_title":
			h.InstanceTitle, err = argString(d)
		case "instance_description":
			h.InstanceDescription, err = argString(d)
		case "contact_email":
			h.ContactEmail, err = argString(d)
		case "id_token_lifetime":
			h.IDTokenLifetime, err = argDuration(d, name)
		case "access_token_lifetime":
			h.AccessTokenLifetime, err = argDuration(d, name)
		case "refresh_token_lifetime":
			h.RefreshTokenLifetime, err = argDuration(d, name)
		case "signing_key_rotation":
			h.SigningKeyRotation, err = argDuration(d, name)
		case "signing_key_publish_ahead":
			h.SigningKeyPublishAhead, err = argDuration(d, name)
		default:
			err = errUnrecognized
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*OAuth)(nil)
	_ caddy.Validator             = (*OAuth)(nil)
	_ caddyhttp.MiddlewareHandler = (*OAuth)(nil)
	_ caddyfile.Unmarshaler       = (*OAuth)(nil)
)
