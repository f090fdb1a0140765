package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

// service is what every handlers/ package offers: a plain http.Handler that
// also says which requests are its own, so that the Caddy handler can pass
// everything else on to the next handler of the route.
type service interface {
	http.Handler
	Handles(r *http.Request) bool
}

// serveOrNext serves r with the first of svcs that handles it, or passes it
// to next.
func serveOrNext(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, svcs ...service) error {
	for _, s := range svcs {
		if s != nil && s.Handles(r) {
			if account.IsResetPath(r.URL.Path) {
				// A reset link's token is in its path.
				keepOutOfAccessLog(r)
			}
			s.ServeHTTP(w, r)
			return nil
		}
	}
	return next.ServeHTTP(w, r)
}
