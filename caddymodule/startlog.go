package caddymodule

import (
	"net"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/directory"
	"github.com/hearthkit/caddy-hearth/handlers/graphql"
)

// hearthSite is one site of the running config that has Hearth services,
// with the URLs to open, for the start-up log line.
type hearthSite struct {
	URL       string   `json:"url"`
	Services  []string `json:"services"`
	SignIn    string   `json:"sign_in"`
	Settings  string   `json:"settings"`
	Directory string   `json:"directory,omitempty"`
	GraphQL   string   `json:"graphql,omitempty"`
}

// logStarted writes Hearth's start-up line: the storage engine and path, and
// per site the services and the URLs to open.
func (a *App) logStarted(ctx caddy.Context) {
	var sites []hearthSite
	if v, err := ctx.AppIfConfigured("http"); err == nil && v != nil {
		if httpApp, ok := v.(*caddyhttp.App); ok {
			sites = hearthSites(httpApp)
		}
	}
	a.logger.Info("hearth started",
		zap.String("storage_engine", a.store.Engine()),
		zap.String("storage_dir", a.path),
		zap.Bool("open_registration", a.OpenRegistration),
		zap.Any("sites", sites))
}

// hearthSites finds the Hearth handlers in the http app's routes (site
// blocks become host-matched routes holding subroutes) and gives each site
// (server address and host) its services and URLs.
func hearthSites(app *caddyhttp.App) []hearthSite {
	names := make([]string, 0, len(app.Servers))
	for name := range app.Servers {
		names = append(names, name)
	}
	slices.Sort(names)
	var sites []hearthSite
	for _, name := range names {
		srv := app.Servers[name]
		scheme, port := "http", ""
		if len(srv.TLSConnPolicies) > 0 {
			scheme = "https"
		}
		if len(srv.Listen) > 0 {
			if _, p, err := net.SplitHostPort(srv.Listen[0]); err == nil {
				port = p
			}
		}
		bySite := map[string]*hearthSite{}
		var order []string
		walkRoutes(srv.Routes, nil, func(hosts []string, h caddyhttp.MiddlewareHandler) {
			host := "localhost"
			if len(hosts) > 0 {
				host = hosts[0]
			}
			base := scheme + "://" + host
			if port != "" && !(scheme == "https" && port == "443") && !(scheme == "http" && port == "80") {
				base = scheme + "://" + net.JoinHostPort(host, port)
			}
			s := bySite[base]
			if s == nil {
				s = &hearthSite{URL: base, SignIn: base + account.SignInPath, Settings: base + account.SettingsPath}
				bySite[base] = s
				order = append(order, base)
			}
			switch h := h.(type) {
			case *OAuth:
				s.Services = append(s.Services, "hearth_oauth")
			case *GraphQL:
				s.Services = append(s.Services, "hearth_graphql")
				s.GraphQL = base + graphql.Path
			case *Directory:
				s.Services = append(s.Services, "hearth_directory")
				path := h.Path
				if path == "" {
					path = directory.DefaultPath
				}
				s.Directory = base + path
			}
		})
		for _, base := range order {
			sites = append(sites, *bySite[base])
		}
	}
	return sites
}

// walkRoutes calls found for every Hearth handler in routes and their
// subroutes, with the hosts of the nearest host matcher above it.
func walkRoutes(routes caddyhttp.RouteList, hosts []string, found func([]string, caddyhttp.MiddlewareHandler)) {
	for _, r := range routes {
		h := hosts
		for _, set := range r.MatcherSets {
			for _, m := range set {
				switch m := m.(type) {
				case caddyhttp.MatchHost:
					h = m
				case *caddyhttp.MatchHost:
					h = *m
				}
			}
		}
		for _, handler := range r.Handlers {
			switch handler := handler.(type) {
			case *OAuth, *GraphQL, *Directory:
				found(h, handler)
			case *caddyhttp.Subroute:
				walkRoutes(handler.Routes, h, found)
			}
		}
	}
}
