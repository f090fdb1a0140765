package caddymodule

import (
	"net"
	"net/http"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	registerHandler[UnknownHost](httpcaddyfile.Before, "respond")
}

// UnknownHost is the hearth_unknown_host handler, for a catch-all site
// block (`http://:8080 { hearth_unknown_host }`): a request for a host name
// no site block names gets a page saying which site address to add to the
// Caddyfile, and the log says it once per name. Without it Caddy answers
// such a request with an empty 200 and logs nothing, and a newcomer who
// opens the site by the machine's name sees a blank page.
type UnknownHost struct {
	app    *App
	logger *zap.Logger
	// logged are the host names already logged (at most maxLoggedHosts:
	// a client sending made-up names cannot grow it or the log forever).
	logged *loggedHosts
}

type loggedHosts struct {
	mu    sync.Mutex
	names map[string]bool
}

const maxLoggedHosts = 64

// CaddyModule returns the Caddy module information.
func (UnknownHost) CaddyModule() caddy.ModuleInfo {
	return handlerInfo[UnknownHost]("hearth_unknown_host")
}

// Provision takes the site's member pages (for the page's look).
func (h *UnknownHost) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	h.app, h.logger, h.logged = app, ctx.Logger(), &loggedHosts{names: map[string]bool{}}
	return nil
}

// ServeHTTP answers every request with the page; next is never called.
func (h *UnknownHost) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if err := h.app.start(); err != nil {
		return caddyhttp.Error(http.StatusServiceUnavailable, err)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	address := scheme + "://" + r.Host
	h.logged.mu.Lock()
	first := !h.logged.names[host] && len(h.logged.names) < maxLoggedHosts
	if first {
		h.logged.names[host] = true
	}
	h.logged.mu.Unlock()
	if first {
		h.logger.Warn("request for a host name no site block names; to serve the site under this name too, add its address to the site block's addresses in the Caddyfile",
			zap.String("host", host), zap.String("add_site_address", address))
	}
	h.app.Pages().UnknownHost(w, r, address)
	return nil
}

// UnmarshalCaddyfile reads `hearth_unknown_host`, which takes no arguments.
func (h *UnknownHost) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return readBlock(d, "", func(name string) error {
		return d.Errf("hearth_unknown_host: unknown subdirective %q", name)
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*UnknownHost)(nil)
	_ caddyhttp.MiddlewareHandler = (*UnknownHost)(nil)
	_ caddyfile.Unmarshaler       = (*UnknownHost)(nil)
)
