package caddymodule

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
)

// newPages builds the member pages from the app's settings. Handler modules
// reach them through App.Pages and serve them with serveOrNext.
func (a *App) newPages() *account.Pages {
	return account.New(a.store, account.Options{
		OpenRegistration: a.OpenRegistration,
		SessionLifetime:  time.Duration(a.SessionLifetime),
		CookieDomain:     a.CookieDomain,
		ClientIP:         clientIP,
		Logger:           a.logger.Named("account"),
		RateLimits:       a.RateLimits(),
	})
}

// clientIP is the client address Caddy determined for r: the connection's
// address, or the forwarded one when the request came through a proxy listed
// in the server's trusted_proxies. Rate limits key on it.
// keepOutOfAccessLog leaves the request out of the site's access log
// (Caddy's log_skip), for a response whose headers carry a secret.
func keepOutOfAccessLog(r *http.Request) {
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
}

func clientIP(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	return ratelimit.RemoteIP(r)
}
