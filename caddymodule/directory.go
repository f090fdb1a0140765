package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/directory"
)

func init() {
	registerHandler[Directory](httpcaddyfile.Before, "handle")
	registerAdminEndpoint("/hearth/agents", adminMethods{http.MethodGet: adminListAgents})
	registerAdminEndpoint("/hearth/agents/{key}/ban", adminMethods{http.MethodPost: adminBanAgent(true)})
	registerAdminEndpoint("/hearth/agents/{key}/unban", adminMethods{http.MethodPost: adminBanAgent(false)})
	registerAdminEndpoint("/hearth/agents/names", adminMethods{http.MethodGet: adminListNames})
	registerAdminEndpoint("/hearth/agents/names/{name}/approve", adminMethods{http.MethodPost: adminName(true)})
	registerAdminEndpoint("/hearth/agents/names/{name}/release", adminMethods{http.MethodPost: adminName(false)})
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
	// Where the document is served.
	Path string `json:"path,omitempty" caddyfile:"path <path>" default:"/directory.json"`
	// The registration event kind.
	Kind int `json:"kind,omitempty" caddyfile:"kind <n>" default:"31339"`
	// Committed NIP-13 work (bits) for gates.pow_ok.
	PowMinBits int `json:"pow_min_bits,omitempty" caddyfile:"pow_min_bits <n>" default:"20"`
	// Refuse registrations with less committed work ("pow:"); 0: none required.
	PowRequiredBits int `json:"pow_required_bits,omitempty" caddyfile:"pow_required_bits <n>" default:"0"`
	// Maintainers' keys (npub or hex), marked maintainer: true; the subdirective is repeatable.
	Maintainers []string `json:"maintainers,omitempty" caddyfile:"maintainer <key>..." default:"none"`
	// Relays read for the kind-1 posts of registered agents.
	Relays []string `json:"relays,omitempty" caddyfile:"relays <url>..." default:"none"`
	// Serve /.well-known/nostr.json for name@<domain> claims.
	NIP05Domain string `json:"nip05_domain,omitempty" caddyfile:"nip05_domain <domain>" default:"none"`
	// Let a claim on a free, unreserved name under nip05_domain count as verified at once, without the operator's approval.
	NIP05OpenClaims bool `json:"nip05_open_claims,omitempty" caddyfile:"nip05_open_claims" default:"off (caddy hearth agent approve)"`
	// More names under nip05_domain that only maintainers may claim, beside the built-in reserved names and members' usernames; repeatable.
	NIP05Reserved []string `json:"nip05_reserved,omitempty" caddyfile:"nip05_reserved <name>..." default:"none"`
	// The port NIP-05 checks fetch on every domain; identifiers naming a port are refused.
	NIP05Port int `json:"nip05_port,omitempty" caddyfile:"nip05_port <n>" default:"443"`
	// How often a NIP-05 identifier is verified again.
	NIP05Recheck caddy.Duration `json:"nip05_recheck,omitempty" caddyfile:"nip05_recheck <duration>" default:"24h"`
	// How long a verdict is kept while checks fail for network reasons.
	NIP05Grace caddy.Duration `json:"nip05_grace,omitempty" caddyfile:"nip05_grace <duration>" default:"72h"`
	// Time limit of one NIP-05 fetch.
	NIP05Timeout caddy.Duration `json:"nip05_timeout,omitempty" caddyfile:"nip05_timeout <duration>" default:"5s"`
	// Let NIP-05 fetches and relays reach private and loopback addresses.
	AllowPrivate bool `json:"allow_private_addresses,omitempty" caddyfile:"allow_private_addresses" default:"off"`
	// Burst flag: more than this many posts within burst_window, in the last 24 h.
	BurstMaxPosts int `json:"burst_max_posts,omitempty" caddyfile:"burst_max_posts <n>" default:"30"`
	// The window of the burst flag.
	BurstWindow caddy.Duration `json:"burst_window,omitempty" caddyfile:"burst_window <duration>" default:"10m"`
	// Template flag: of the newest template_sample posts of 7 days, at least this many ...
	TemplateMinPosts int `json:"template_min_posts,omitempty" caddyfile:"template_min_posts <n>" default:"5"`
	// ... and this share have one skeleton.
	TemplateRatio float64 `json:"template_ratio,omitempty" caddyfile:"template_ratio <0..1>" default:"0.6"`
	// How many of the newest posts the template flag looks at.
	TemplateSample int `json:"template_sample,omitempty" caddyfile:"template_sample <n>" default:"20"`
	// Rebuild the document on this schedule (time-driven changes).
	RegenerateEvery caddy.Duration `json:"regenerate_every,omitempty" caddyfile:"regenerate_every <duration>" default:"1m"`
	// Rebuild this long after a change (debounce).
	RegenerateDelay caddy.Duration `json:"regenerate_delay,omitempty" caddyfile:"regenerate_delay <duration>" default:"1s"`
	// Cache-Control max-age of the document.
	MaxAge caddy.Duration `json:"max_age,omitempty" caddyfile:"max_age <duration>" default:"1m"`
	// Makes profile_url absolute.
	BaseURL string `json:"base_url,omitempty" caddyfile:"base_url <url>" default:"none (profile_url is a path)"`
	// Registrations per client IP.
	RegisterLimitIP *Limit `json:"register_limit_ip,omitempty" caddyfile:"register_limit_ip <n> <window>" default:"20 1h"`
	// Registrations per agent key.
	RegisterLimitPubkey *Limit `json:"register_limit_pubkey,omitempty" caddyfile:"register_limit_pubkey <n> <window>" default:"10 1h"`
	// Requests to the events endpoint per client IP.
	EventsLimitIP *Limit `json:"events_limit_ip,omitempty" caddyfile:"events_limit_ip <n> <window>" default:"120 1m"`
	// Events per agent key.
	EventsLimitPubkey *Limit `json:"events_limit_pubkey,omitempty" caddyfile:"events_limit_pubkey <n> <window>" default:"600 10m"`
	// Events per POST to the events endpoint.
	MaxBatch int `json:"max_batch,omitempty" caddyfile:"max_batch <n>" default:"500"`

	dir *directory.Directory
	app *App

	siteHome
}

// CaddyModule returns the Caddy module information.
func (Directory) CaddyModule() caddy.ModuleInfo { return handlerInfo[Directory]("hearth_directory") }

// Provision prepares the directory on the hearth app's store; the app's
// Start builds the document and starts NIP-05 checks and relay
// subscriptions.
func (h *Directory) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	d, err := directory.Prepare(app.Store(), directory.Options{
		Pages:               app.Pages(),
		RateLimits:          app.RateLimits(),
		Path:                h.Path,
		Kind:                h.Kind,
		PowMinBits:          h.PowMinBits,
		PowRequiredBits:     h.PowRequiredBits,
		Maintainers:         h.Maintainers,
		Relays:              h.Relays,
		NIP05Domain:         h.NIP05Domain,
		NIP05OpenClaims:     h.NIP05OpenClaims,
		NIP05Reserved:       h.NIP05Reserved,
		NIP05Port:           h.NIP05Port,
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
	app.onCleanup(d.Close)
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
	if err := h.app.start(); err != nil {
		return caddyhttp.Error(http.StatusServiceUnavailable, err)
	}
	r = h.withHome(r)
	if isLanding(r) {
		svc := directoryService
		if svc.Path = h.Path; svc.Path == "" {
			svc.Path = directory.DefaultPath
		}
		svc.Page = h.dir.BrowsePath()
		return serveLanding(w, r, next, h.app.Pages(), svc)
	}
	return serveOrNext(w, r, orNotFound{next, h.app.Pages()}, h.dir)
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

func adminListAgents(w http.ResponseWriter, r *http.Request, app *App) error {
	dirs := app.directories()
	if len(dirs) == 0 {
		return errNoDirectory()
	}
	agents, err := dirs[0].Agents(r.Context())
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
			pk, err = dirs[0].Ban(r.Context(), key, req.Reason)
		} else {
			pk, err = dirs[0].Unban(r.Context(), key)
		}
		switch {
		case errors.Is(err, directory.ErrInvalidPubkey):
			return apiError(http.StatusBadRequest, "%v: give an npub or 64 hex characters", err)
		case errors.Is(err, directory.ErrNotBanned):
			return apiError(http.StatusNotFound, "agent %s is not banned", directory.Npub(pk))
		case err != nil:
			return apiError(http.StatusBadRequest, "%v", err)
		}
		return writeJSON(w, http.StatusOK, map[string]any{"pubkey": pk, "npub": directory.Npub(pk), "banned": ban})
	}
}

func adminListNames(w http.ResponseWriter, r *http.Request, app *App) error {
	dirs := app.directories()
	if len(dirs) == 0 {
		return errNoDirectory()
	}
	names, err := dirs[0].Names(r.Context())
	if err != nil {
		return storeError(err, "NIP-05 names")
	}
	return writeJSON(w, http.StatusOK, names)
}

// adminName approves or releases a NIP-05 name under nip05_domain.
func adminName(approve bool) adminFunc {
	return func(w http.ResponseWriter, r *http.Request, app *App) error {
		dirs := app.directories()
		if len(dirs) == 0 {
			return errNoDirectory()
		}
		var c directory.NameClaim
		var err error
		if approve {
			c, err = dirs[0].ApproveName(r.Context(), r.PathValue("name"))
		} else {
			c, err = dirs[0].ReleaseName(r.Context(), r.PathValue("name"))
		}
		switch {
		case errors.Is(err, directory.ErrNoClaim):
			return apiError(http.StatusNotFound, "no agent claims %s", c.ID)
		case errors.Is(err, directory.ErrInvalidName):
			return apiError(http.StatusBadRequest, "%v", err)
		case err != nil:
			return storeError(err, "NIP-05 name")
		}
		return writeJSON(w, http.StatusOK, c)
	}
}

// UnmarshalCaddyfile reads the directive's block.
func (h *Directory) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	limit := func(name string) (*Limit, error) {
		n, win, err := argLimit(d, name)
		if err != nil {
			return nil, err
		}
		return &Limit{N: n, Window: win}, nil
	}
	return readBlock(d, "hearth_directory subdirective", func(name string) (err error) {
		var more []string
		switch name {
		case "path":
			h.Path, err = argString(d)
		case "kind":
			h.Kind, err = argInt(d, name, 1)
		case "pow_min_bits":
			h.PowMinBits, err = argInt(d, name, 1)
		case "pow_required_bits":
			h.PowRequiredBits, err = argInt(d, name, 1)
		case "maintainer":
			more, err = argStrings(d)
			h.Maintainers = append(h.Maintainers, more...)
		case "relays":
			more, err = argStrings(d)
			h.Relays = append(h.Relays, more...)
		case "nip05_domain":
			h.NIP05Domain, err = argString(d)
		case "nip05_open_claims":
			h.NIP05OpenClaims, err = true, argNone(d)
		case "nip05_reserved":
			more, err = argStrings(d)
			h.NIP05Reserved = append(h.NIP05Reserved, more...)
		case "nip05_port":
			h.NIP05Port, err = argInt(d, name, 1)
		case "nip05_recheck":
			h.NIP05Recheck, err = argDuration(d, name)
		case "nip05_grace":
			h.NIP05Grace, err = argDuration(d, name)
		case "nip05_timeout":
			h.NIP05Timeout, err = argDuration(d, name)
		case "allow_private_addresses":
			h.AllowPrivate, err = true, argNone(d)
		case "burst_max_posts":
			h.BurstMaxPosts, err = argInt(d, name, 1)
		case "burst_window":
			h.BurstWindow, err = argDuration(d, name)
		case "template_min_posts":
			h.TemplateMinPosts, err = argInt(d, name, 1)
		case "template_ratio":
			h.TemplateRatio, err = argRatio(d, name)
		case "template_sample":
			h.TemplateSample, err = argInt(d, name, 1)
		case "regenerate_every":
			h.RegenerateEvery, err = argDuration(d, name)
		case "regenerate_delay":
			h.RegenerateDelay, err = argDuration(d, name)
		case "max_age":
			h.MaxAge, err = argDuration(d, name)
		case "base_url":
			h.BaseURL, err = argString(d)
		case "register_limit_ip":
			h.RegisterLimitIP, err = limit(name)
		case "register_limit_pubkey":
			h.RegisterLimitPubkey, err = limit(name)
		case "events_limit_ip":
			h.EventsLimitIP, err = limit(name)
		case "events_limit_pubkey":
			h.EventsLimitPubkey, err = limit(name)
		case "max_batch":
			h.MaxBatch, err = argInt(d, name, 1)
		default:
			err = errUnrecognized
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Directory)(nil)
	_ caddy.CleanerUpper          = (*Directory)(nil)
	_ caddyhttp.MiddlewareHandler = (*Directory)(nil)
	_ caddyfile.Unmarshaler       = (*Directory)(nil)
)
