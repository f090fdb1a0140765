package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

func init() {
	caddy.RegisterModule(OAuth{})
	httpcaddyfile.RegisterHandlerDirective("hearth_oauth", parseOAuth)
	httpcaddyfile.RegisterDirectiveOrder("hearth_oauth", httpcaddyfile.Before, "respond")
}

// OAuth is the hearth_oauth handler: the Mastodon-compatible OAuth
// authorization server for the site's members (handlers/oauth), plus the
// member pages. Requests for other paths go to the next handler.
type OAuth struct {
	// BaseURL is the public URL of the server (scheme://host[:port]).
	// Default: each request's scheme and host.
	BaseURL string `json:"base_url,omitempty"`
	// AccountDomain is the domain of account handles on a split-domain
	// installation. Default: the host of the base URL.
	AccountDomain string `json:"account_domain,omitempty"`
	// AllowHTTPRedirects allows plain-http redirect URIs on hosts other
	// than loopback.
	AllowHTTPRedirects bool `json:"allow_http_redirects,omitempty"`
	// RegistrationLimit app registrations per client IP per
	// RegistrationWindow (default 5 per 10m, as Mastodon).
	RegistrationLimit  int            `json:"registration_limit,omitempty"`
	RegistrationWindow caddy.Duration `json:"registration_window,omitempty"`
	// TokenLimit token and revocation requests per client IP per
	// TokenWindow (default 300 per 5m); -1 disables the limit.
	TokenLimit  int            `json:"token_limit,omitempty"`
	TokenWindow caddy.Duration `json:"token_window,omitempty"`
	// InstanceTitle, InstanceDescription and ContactEmail fill
	// /api/v1/instance and /api/v2/instance.
	InstanceTitle       string `json:"instance_title,omitempty"`
	InstanceDescription string `json:"instance_description,omitempty"`
	ContactEmail        string `json:"contact_email,omitempty"`

	server *oauth.Server
	pages  *account.Pages
}

// CaddyModule returns the Caddy module information.
func (OAuth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.hearth_oauth",
		New: func() caddy.Module { return new(OAuth) },
	}
}

// Provision builds the server on the hearth app's store and adds the
// authorized-applications page to the member settings.
func (h *OAuth) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	h.pages = app.Pages()
	h.server = oauth.New(app.Store(), oauth.Options{
		RateLimits:          app.RateLimits(),
		BaseURL:             h.BaseURL,
		AccountDomain:       h.AccountDomain,
		AllowHTTPRedirects:  h.AllowHTTPRedirects,
		RegistrationLimit:   h.RegistrationLimit,
		RegistrationWindow:  time.Duration(h.RegistrationWindow),
		TokenLimit:          h.TokenLimit,
		TokenWindow:         time.Duration(h.TokenWindow),
		InstanceTitle:       h.InstanceTitle,
		InstanceDescription: h.InstanceDescription,
		ContactEmail:        h.ContactEmail,
		OpenRegistration:    app.OpenRegistration,
		Pages:               h.pages,
		ClientIP:            clientIP,
		Logger:              ctx.Logger(),
		KeepOutOfAccessLog:  keepOutOfAccessLog,
	})
	h.pages.AddSettingsPage(account.SettingsPage{
		Path:    oauth.AuthorizedAppsPath,
		Title:   oauth.AuthorizedAppsTitle,
		Handler: h.server.AuthorizedAppsPage(),
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
// requests on.
func (h *OAuth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return serveOrNext(w, r, next, h.server, h.pages)
}

// parseOAuth reads the hearth_oauth directive:
//
//	hearth_oauth {
//	    base_url <url>
//	    account_domain <domain>
//	    allow_http_redirects
//	    registration_limit <n> <window>
//	    token_limit <n> <window> | off
//	    instance_title <text>
//	    instance_description <text>
//	    contact_email <address>
//	}
func parseOAuth(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	o := new(OAuth)
	err := o.UnmarshalCaddyfile(h.Dispenser)
	return o, err
}

// UnmarshalCaddyfile reads the directive's block.
func (h *OAuth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		name := d.Val()
		switch name {
		case "base_url", "account_domain", "instance_title", "instance_description", "contact_email":
			if !d.NextArg() {
				return d.ArgErr()
			}
			v := d.Val()
			switch name {
			case "base_url":
				h.BaseURL = v
			case "account_domain":
				h.AccountDomain = v
			case "instance_title":
				h.InstanceTitle = v
			case "instance_description":
				h.InstanceDescription = v
			default:
				h.ContactEmail = v
			}
		case "allow_http_redirects":
			h.AllowHTTPRedirects = true
		case "registration_limit", "token_limit":
			args := d.RemainingArgs()
			if name == "token_limit" && len(args) == 1 && args[0] == "off" {
				h.TokenLimit = -1
				continue
			}
			n, win, err := parseLimit(d, name, args)
			if err != nil {
				return err
			}
			if name == "registration_limit" {
				h.RegistrationLimit, h.RegistrationWindow = n, win
			} else {
				h.TokenLimit, h.TokenWindow = n, win
			}
			continue
		default:
			return d.Errf("unrecognized hearth_oauth subdirective '%s'", name)
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*OAuth)(nil)
	_ caddy.Validator             = (*OAuth)(nil)
	_ caddyhttp.MiddlewareHandler = (*OAuth)(nil)
	_ caddyfile.Unmarshaler       = (*OAuth)(nil)
)
