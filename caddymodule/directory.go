package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/directory"
)

func init() {
	caddy.RegisterModule(Directory{})
	httpcaddyfile.RegisterHandlerDirective("hearth_directory", parseDirectory)
	httpcaddyfile.RegisterDirectiveOrder("hearth_directory", httpcaddyfile.Before, "respond")
	registerAdminEndpoint("/hearth/agents", adminMethods{http.MethodGet: adminListAgents})
	registerAdminEndpoint("/hearth/agents/{key}/ban", adminMethods{http.MethodPost: adminBanAgent(true)})
	registerAdminEndpoint("/hearth/agents/{key}/unban", adminMethods{http.MethodPost: adminBanAgent(false)})
}

// Limit is a rate limit: N events per Window.
type Limit struct {
	N      int            `json:"n"`
	Window caddy.Duration `json:"window"`
}

func (l *Limit) limit() directory.Limit {
	if l == nil {
		return directory.Limit{}
	}
	return directory.Limit{N: l.N, Window: time.Duration(l.Window)}
}

// Directory is the hearth_directory handler: the agent directory document,
// registration and events endpoints, profile pages and (with nip05_domain)
// /.well-known/nostr.json (handlers/directory). Other requests go to the
// next handler.
type Directory struct {
	Path                string         `json:"path,omitempty"`
	Kind                int            `json:"kind,omitempty"`
	PowMinBits          int            `json:"pow_min_bits,omitempty"`
	PowRequiredBits     int            `json:"pow_required_bits,omitempty"`
	Maintainers         []string       `json:"maintainers,omitempty"`
	Relays              []string       `json:"relays,omitempty"`
	NIP05Domain         string         `json:"nip05_domain,omitempty"`
	NIP05Recheck        caddy.Duration `json:"nip05_recheck,omitempty"`
	NIP05Grace          caddy.Duration `json:"nip05_grace,omitempty"`
	NIP05Timeout        caddy.Duration `json:"nip05_timeout,omitempty"`
	AllowPrivate        bool           `json:"allow_private_addresses,omitempty"`
	BurstMaxPosts       int            `json:"burst_max_posts,omitempty"`
	BurstWindow         caddy.Duration `json:"burst_window,omitempty"`
	TemplateMinPosts    int            `json:"template_min_posts,omitempty"`
	TemplateRatio       float64        `json:"template_ratio,omitempty"`
	TemplateSample      int            `json:"template_sample,omitempty"`
	RegenerateEvery     caddy.Duration `json:"regenerate_every,omitempty"`
	RegenerateDelay     caddy.Duration `json:"regenerate_delay,omitempty"`
	MaxAge              caddy.Duration `json:"max_age,omitempty"`
	BaseURL             string         `json:"base_url,omitempty"`
	RegisterLimitIP     *Limit         `json:"register_limit_ip,omitempty"`
	RegisterLimitPubkey *Limit         `json:"register_limit_pubkey,omitempty"`
	EventsLimitIP       *Limit         `json:"events_limit_ip,omitempty"`
	EventsLimitPubkey   *Limit         `json:"events_limit_pubkey,omitempty"`
	MaxBatch            int            `json:"max_batch,omitempty"`

	dir *directory.Directory
	app *App
}

// CaddyModule returns the Caddy module information.
func (Directory) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.hearth_directory",
		New: func() caddy.Module { return new(Directory) },
	}
}

// Provision starts the directory (document builder, NIP-05 checks, relay
// subscriptions) on the hearth app's store.
func (h *Directory) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	d, err := directory.New(app.Store(), directory.Options{
		RateLimits:          app.RateLimits(),
		Path:                h.Path,
		Kind:                h.Kind,
		PowMinBits:          h.PowMinBits,
		PowRequiredBits:     h.PowRequiredBits,
		Maintainers:         h.Maintainers,
		Relays:              h.Relays,
		NIP05Domain:         h.NIP05Domain,
		NIP05Recheck:        time.Duration(h.NIP05Recheck),
		NIP05Grace:          time.Duration(h.NIP05Grace),
		NIP05Timeout:        time.Duration(h.NIP05Timeout),
		AllowPrivate:        h.AllowPrivate,
		BurstMaxPosts:       h.BurstMaxPosts,
		BurstWindow:         time.Duration(h.BurstWindow),
		TemplateMinPosts:    h.TemplateMinPosts,
		TemplateRatio:       h.TemplateRatio,
		TemplateSample:      h.TemplateSample,
		RegenerateEvery:     time.Duration(h.RegenerateEvery),
		RegenerateDelay:     time.Duration(h.RegenerateDelay),
		MaxAge:              time.Duration(h.MaxAge),
		BaseURL:             h.BaseURL,
		RegisterLimitIP:     h.RegisterLimitIP.limit(),
		RegisterLimitPubkey: h.RegisterLimitPubkey.limit(),
		EventsLimitIP:       h.EventsLimitIP.limit(),
		EventsLimitPubkey:   h.EventsLimitPubkey.limit(),
		MaxBatch:            h.MaxBatch,
		ClientIP:            clientIP,
		Logger:              ctx.Logger(),
	})
	if err != nil {
		return fmt.Errorf("hearth_directory: %w", err)
	}
	h.dir, h.app = d, app
	app.addDirectory(d)
	return nil
}

// Cleanup stops the directory's background work.
func (h *Directory) Cleanup() error {
	if h.dir == nil {
		return nil
	}
	h.app.removeDirectory(h.dir)
	return h.dir.Close()
}

// ServeHTTP serves the directory's paths and passes other requests on.
func (h *Directory) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return serveOrNext(w, r, next, h.dir)
}

// directories are the running hearth_directory handlers of one app, for
// the admin routes (a ban rebuilds every document at once).
type directories struct {
	mu   sync.Mutex
	list []*directory.Directory
}

func (a *App) addDirectory(d *directory.Directory) {
	a.dirs.mu.Lock()
	defer a.dirs.mu.Unlock()
	a.dirs.list = append(a.dirs.list, d)
}

func (a *App) removeDirectory(d *directory.Directory) {
	a.dirs.mu.Lock()
	defer a.dirs.mu.Unlock()
	for i, x := range a.dirs.list {
		if x == d {
			a.dirs.list = append(a.dirs.list[:i], a.dirs.list[i+1:]...)
			return
		}
	}
}

func (a *App) directories() []*directory.Directory {
	a.dirs.mu.Lock()
	defer a.dirs.mu.Unlock()
	return append([]*directory.Directory(nil), a.dirs.list...)
}

func errNoDirectory() error {
	return apiError(http.StatusNotFound, "no hearth_directory is configured in the running config")
}

func adminListAgents(w http.ResponseWriter, _ *http.Request, app *App) error {
	dirs := app.directories()
	if len(dirs) == 0 {
		return errNoDirectory()
	}
	agents, err := dirs[0].Agents()
	if err != nil {
		return storeError(err, "agents")
	}
	if agents == nil {
		agents = []directory.AgentStatus{}
	}
	return writeJSON(w, http.StatusOK, agents)
}

type banRequest struct {
	Reason string `json:"reason"`
}

func adminBanAgent(ban bool) adminFunc {
	return func(w http.ResponseWriter, r *http.Request, app *App) error {
		dirs := app.directories()
		if len(dirs) == 0 {
			return errNoDirectory()
		}
		var req banRequest
		if ban && r.ContentLength != 0 {
			if err := decodeJSONBody(w, r, &req); err != nil {
				return err
			}
		}
		key := r.PathValue("key")
		var pk string
		var err error
		if ban {
			pk, err = dirs[0].Ban(key, req.Reason)
		} else {
			pk, err = dirs[0].Unban(key)
		}
		switch {
		case errors.Is(err, directory.ErrInvalidPubkey):
			return apiError(http.StatusBadRequest, "%v: give an npub or 64 hex characters", err)
		case errors.Is(err, directory.ErrNotBanned):
			return apiError(http.StatusNotFound, "agent %s is not banned", directory.Npub(pk))
		case err != nil:
			return apiError(http.StatusBadRequest, "%v", err)
		}
		for _, d := range dirs[1:] {
			d.AuthorsChanged()
		}
		return writeJSON(w, http.StatusOK, map[string]any{"pubkey": pk, "npub": directory.Npub(pk), "banned": ban})
	}
}

// parseDirectory reads the hearth_directory directive; see README.md for
// every subdirective.
func parseDirectory(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	d := new(Directory)
	err := d.UnmarshalCaddyfile(h.Dispenser)
	return d, err
}

// UnmarshalCaddyfile reads the directive's block.
func (h *Directory) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		name := d.Val()
		args := d.RemainingArgs()
		one := func() (string, error) {
			if len(args) != 1 {
				return "", d.ArgErr()
			}
			return args[0], nil
		}
		positive := func(min int) (int, error) {
			v, err := one()
			if err != nil {
				return 0, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < min {
				return 0, d.Errf("%s: want an integer of at least %d, got %q", name, min, v)
			}
			return n, nil
		}
		duration := func() (caddy.Duration, error) {
			v, err := one()
			if err != nil {
				return 0, err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return 0, d.Errf("%s: want a positive duration such as 10m, got %q", name, v)
			}
			return caddy.Duration(dur), nil
		}
		limit := func() (*Limit, error) {
			n, win, err := parseLimit(d, name, args)
			if err != nil {
				return nil, err
			}
			return &Limit{N: n, Window: win}, nil
		}
		var err error
		switch name {
		case "path":
			h.Path, err = one()
		case "base_url":
			h.BaseURL, err = one()
		case "nip05_domain":
			h.NIP05Domain, err = one()
		case "maintainer":
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.Maintainers = append(h.Maintainers, args...)
		case "relays":
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.Relays = append(h.Relays, args...)
		case "allow_private_addresses":
			if len(args) != 0 {
				return d.ArgErr()
			}
			h.AllowPrivate = true
		case "kind":
			h.Kind, err = positive(1)
		case "pow_min_bits":
			h.PowMinBits, err = positive(1)
		case "pow_required_bits":
			h.PowRequiredBits, err = positive(1)
		case "burst_max_posts":
			h.BurstMaxPosts, err = positive(1)
		case "template_min_posts":
			h.TemplateMinPosts, err = positive(1)
		case "template_sample":
			h.TemplateSample, err = positive(1)
		case "max_batch":
			h.MaxBatch, err = positive(1)
		case "template_ratio":
			var v string
			if v, err = one(); err == nil {
				r, perr := strconv.ParseFloat(v, 64)
				if perr != nil || r <= 0 || r > 1 {
					return d.Errf("template_ratio: want a number in (0, 1], got %q", v)
				}
				h.TemplateRatio = r
			}
		case "nip05_recheck":
			h.NIP05Recheck, err = duration()
		case "nip05_grace":
			h.NIP05Grace, err = duration()
		case "nip05_timeout":
			h.NIP05Timeout, err = duration()
		case "burst_window":
			h.BurstWindow, err = duration()
		case "regenerate_every":
			h.RegenerateEvery, err = duration()
		case "regenerate_delay":
			h.RegenerateDelay, err = duration()
		case "max_age":
			h.MaxAge, err = duration()
		case "register_limit_ip":
			h.RegisterLimitIP, err = limit()
		case "register_limit_pubkey":
			h.RegisterLimitPubkey, err = limit()
		case "events_limit_ip":
			h.EventsLimitIP, err = limit()
		case "events_limit_pubkey":
			h.EventsLimitPubkey, err = limit()
		default:
			return d.Errf("unrecognized hearth_directory subdirective '%s'", name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Directory)(nil)
	_ caddy.CleanerUpper          = (*Directory)(nil)
	_ caddyhttp.MiddlewareHandler = (*Directory)(nil)
	_ caddyfile.Unmarshaler       = (*Directory)(nil)
)
