package caddymodule

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/reader"
)

// A site's home is the page its signed-in members land on: the library on
// a site whose route has hearth_graphql, the settings elsewhere. The member
// pages are one per app, shared by every site of the configuration, so
// each Hearth handler learns its own site's home once the http app is
// provisioned (setSiteHomes) and tells the pages on each request
// (account.WithHome), whichever of the site's handlers serves them.

// siteHome is embedded by the handlers that serve member pages.
type siteHome struct{ home string }

func (s *siteHome) setSiteHome(path string) { s.home = path }

// withHome is r carrying its site's home, for the pages. API requests
// render no page and skip the copy of the request.
func (s *siteHome) withHome(r *http.Request) *http.Request {
	if s.home == "" || strings.HasPrefix(r.URL.Path, "/api/") {
		return r
	}
	return account.WithHome(r, s.home)
}

type siteHomeSetter interface{ setSiteHome(path string) }

// setSiteHomes walks the http app's routes: each top-level route is a site
// (a Caddyfile site block), and the Hearth handlers anywhere inside it,
// through subroutes (handle, route), share its home. It runs once, before
// the app serves (start), when every handler has been provisioned.
func (a *App) setSiteHomes() {
	v, err := a.ctx.AppIfConfigured("http")
	if err != nil {
		return
	}
	httpApp, ok := v.(*caddyhttp.App)
	if !ok {
		return
	}
	for _, srv := range httpApp.Servers {
		for _, rt := range srv.Routes {
			var handlers []siteHomeSetter
			home := siteHandlers(rt, &handlers)
			for _, h := range handlers {
				h.setSiteHome(home)
			}
		}
	}
}

// siteHandlers adds rt's Hearth handlers to list and returns the home they
// make: the library if one of them is hearth_graphql.
func siteHandlers(rt caddyhttp.Route, list *[]siteHomeSetter) string {
	home := ""
	for _, h := range rt.Handlers {
		switch h := h.(type) {
		case *caddyhttp.Subroute:
			for _, sub := range h.Routes {
				if siteHandlers(sub, list) != "" {
					home = reader.Path
				}
			}
		case siteHomeSetter:
			*list = append(*list, h)
			if _, ok := h.(*GraphQL); ok {
				home = reader.Path
			}
		}
	}
	return home
}
