// Package account serves the member web pages every Hearth service shares:
// sign-in, sign-out, the optional sign-up page, the settings shell that
// other services add their pages to (authorized applications, export,
// import), and the API Tokens page (apitokens.go: API tokens, the
// newsletter address, the feed URLs), which hearth_graphql adds with the
// addresses of its routes.
// It owns the session cookie, the sign-in rate limits, the security headers
// and the cross-origin form protection of those pages, so that a site with
// only one Hearth service still has working member pages.
package account

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Paths of the pages this package serves.
const (
	SignInPath   = "/auth/sign_in"
	SignOutPath  = "/auth/sign_out"
	SignUpPath   = "/auth/sign_up"
	SettingsPath = "/settings"
	// CopyScriptPath is the copy-button script every page loads.
	CopyScriptPath = "/auth/copy.js"
)

// CookieName is the name of the session cookie.
const CookieName = "hearth_session"

// Defaults of Options.
const (
	DefaultSessionLifetime           = 14 * 24 * time.Hour
	DefaultFailuresPerUsername       = 10
	DefaultFailuresPerIP             = 30
	DefaultFailureWindow             = 5 * time.Minute
	DefaultSignUpsPerIP              = 10
	DefaultSignUpWindow              = time.Hour
	DefaultMaxFormBytes        int64 = 16 << 10
	DefaultSiteName                  = "Hearth"
	// AccountChangesPerMember bounds the account page's forms a member can
	// post within AccountChangesWindow (display name, sessions, password,
	// two-factor, deletion), on top of the failure limits of the forms that
	// check a password or code.
	AccountChangesPerMember = 30
	AccountChangesWindow    = 5 * time.Minute
)

// Options configure the member pages. Zero values take the defaults above.
type Options struct {
	// RateLimits keeps the rate limiters' counts across rebuilds of the
	// handler (the Caddy app holds one per store); nil: private limiters.
	RateLimits *ratelimit.Registry
	// OpenRegistration enables the sign-up page; without it /auth/sign_up
	// answers 404.
	OpenRegistration bool
	// SessionLifetime is how long a sign-in lasts.
	SessionLifetime time.Duration
	// SessionTouchInterval is how stale a session's last-seen time may
	// get before a request records it again; default
	// SessionTouchInterval.
	SessionTouchInterval time.Duration
	// FailuresPerUsername and FailuresPerIP bound failed sign-ins per
	// username and per client IP within FailureWindow; beyond them the
	// sign-in form answers 429 with Retry-After.
	FailuresPerUsername int
	FailuresPerIP       int
	FailureWindow       time.Duration
	// SignUpsPerIP bounds accounts created from one client IP within
	// SignUpWindow, and sign-ups refused for a username taken (which
	// have hashed the password all the same).
	SignUpsPerIP int
	SignUpWindow time.Duration
	// MaxFormBytes limits the body of every form post.
	MaxFormBytes int64
	// SiteName is shown in page titles and the header.
	SiteName string
	// ClientIP returns the client address used for rate limits. Default: the
	// host of r.RemoteAddr. Behind a proxy, pass one that trusts only the
	// proxy's forwarding headers (Caddy's client_ip variable does).
	ClientIP func(r *http.Request) string
	// TrustedOrigins are extra origins (scheme://host[:port]) allowed to post
	// forms, for sites whose pages are served under another host name.
	TrustedOrigins []string
	// CookieDomain, when set, makes the session cookie valid for that
	// domain and its subdomains (one sign-in for the apps of several
	// subdomains, behind hearth_gate), and lets sign-in return to pages on
	// them.
	CookieDomain string
	// Logger receives sign-in events (never passwords or session ids).
	Logger *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.SessionLifetime <= 0 {
		o.SessionLifetime = DefaultSessionLifetime
	}
	if o.SessionTouchInterval <= 0 {
		o.SessionTouchInterval = SessionTouchInterval
	}
	if o.FailuresPerUsername <= 0 {
		o.FailuresPerUsername = DefaultFailuresPerUsername
	}
	if o.FailuresPerIP <= 0 {
		o.FailuresPerIP = DefaultFailuresPerIP
	}
	if o.FailureWindow <= 0 {
		o.FailureWindow = DefaultFailureWindow
	}
	if o.SignUpsPerIP <= 0 {
		o.SignUpsPerIP = DefaultSignUpsPerIP
	}
	if o.SignUpWindow <= 0 {
		o.SignUpWindow = DefaultSignUpWindow
	}
	if o.MaxFormBytes <= 0 {
		o.MaxFormBytes = DefaultMaxFormBytes
	}
	if o.SiteName == "" {
		o.SiteName = DefaultSiteName
	}
	if o.ClientIP == nil {
		o.ClientIP = ratelimit.RemoteIP
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// SettingsPage is a page of the member's settings, added by another service.
type SettingsPage struct {
	// Path is where the page lives, e.g. "/settings/api_tokens".
	Path string
	// Subpaths routes Path+"/..." to Handler too (a download beside the
	// page); without it those paths are left to the site, whose answer is
	// its "Page not found", never the page again.
	Subpaths bool
	// Title is the page's name in the settings menu.
	Title string
	// Handler serves the page. It runs only for a signed-in member (get it
	// with CurrentMember) and behind cross-origin form protection.
	Handler http.Handler
}

// MemberPage is a settings page at path, named title in the menu, that
// serve answers for the signed-in member (the one the pages found before
// running it; without one, RequireMember's answer: sign in).
func (p *Pages) MemberPage(path, title string, serve func(w http.ResponseWriter, r *http.Request, m *members.Member)) SettingsPage {
	return SettingsPage{
		Path:  path,
		Title: title,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if m, ok := p.RequireMember(w, r); ok {
				serve(w, r, m)
			}
		}),
	}
}

// Pages serves the member pages. Build it with New; it is safe for
// concurrent use.
type Pages struct {
	store *storage.Store
	opts  Options

	byUsername ratelimit.Counter // fails closed: guesses
	byIP       ratelimit.Counter // fails closed: guesses
	signUps    ratelimit.Counter
	changes    ratelimit.Counter
	ceremonies ratelimit.Counter
	cop        *http.CrossOriginProtection

	mu       sync.RWMutex
	settings []SettingsPage
	siteName atomic.Pointer[string]
	reason   atomic.Pointer[SignInReason]
}

// New returns the member pages backed by store.
func New(store *storage.Store, opts Options) *Pages {
	opts = opts.withDefaults()
	p := &Pages{
		store:      store,
		opts:       opts,
		byUsername: opts.RateLimits.Counter(ratelimit.Limit{Name: "account.failures.username", N: opts.FailuresPerUsername, Window: opts.FailureWindow, Policy: ratelimit.FailClosed}),
		byIP:       opts.RateLimits.Counter(ratelimit.Limit{Name: "account.failures.ip", N: opts.FailuresPerIP, Window: opts.FailureWindow, Policy: ratelimit.FailClosed}),
		signUps:    opts.RateLimits.Counter(ratelimit.Limit{Name: "account.signups", N: opts.SignUpsPerIP, Window: opts.SignUpWindow}),
		changes:    opts.RateLimits.Counter(ratelimit.Limit{Name: "account.changes", N: AccountChangesPerMember, Window: AccountChangesWindow}),
		ceremonies: opts.RateLimits.Counter(ratelimit.Limit{Name: "account.passkey.ceremonies", N: CeremoniesPerIP, Window: CeremonyWindow}),
		cop:        http.NewCrossOriginProtection(),
	}
	for _, o := range opts.TrustedOrigins {
		if err := p.cop.AddTrustedOrigin(o); err != nil {
			opts.Logger.Warn("ignoring trusted origin", zap.String("origin", o), zap.Error(err))
		}
	}
	p.cop.SetDenyHandler(http.HandlerFunc(p.RefuseCrossOrigin))
	return p
}

// AddSettingsPage adds a page to the settings menu. Adding a page with the
// Path of an existing one replaces it.
func (p *Pages) AddSettingsPage(sp SettingsPage) {
	sp.Path = "/" + strings.Trim(sp.Path, "/")
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.settings {
		if p.settings[i].Path == sp.Path {
			p.settings[i] = sp
			return
		}
	}
	p.settings = append(p.settings, sp)
}

// SettingsPages lists the registered settings pages in the order they were added.
func (p *Pages) SettingsPages() []SettingsPage {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return append([]SettingsPage(nil), p.settings...)
}

func (p *Pages) settingsPageFor(path string) (SettingsPage, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, sp := range p.settings {
		if path == sp.Path || sp.Subpaths && strings.HasPrefix(path, sp.Path+"/") {
			return sp, true
		}
	}
	return SettingsPage{}, false
}

// Handles reports whether r is for one of the member pages.
func (p *Pages) Handles(r *http.Request) bool {
	switch r.URL.Path {
	case SignInPath, SignOutPath, SignUpPath, SettingsPath, SettingsPath + "/", TwoFactorPath, CopyScriptPath,
		PasskeyScriptPath, PasskeySignInOptionsPath, PasskeySignInPath, TwoFactorPasskeyOptionsPath, TwoFactorPasskeyPath:
		return true
	}
	if r.URL.Path == AccountPath || strings.HasPrefix(r.URL.Path, AccountPath+"/") || IsResetPath(r.URL.Path) {
		return true
	}
	_, ok := p.settingsPageFor(r.URL.Path)
	return ok
}

// ServeHTTP serves the member pages.
func (p *Pages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serve, ok := protectedPages[r.URL.Path]; ok {
		p.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(p, w, r) })).ServeHTTP(w, r)
		return
	}
	switch r.URL.Path {
	case SignUpPath:
		if !p.opts.OpenRegistration {
			p.renderError(w, r, http.StatusNotFound, "Not found", "Sign-up is closed on this site. Ask its administrator for an account.")
			return
		}
		p.Protect(http.HandlerFunc(p.serveSignUp)).ServeHTTP(w, r)
	case SettingsPath, SettingsPath + "/":
		p.serveSettings(w, r)
	case CopyScriptPath:
		serveCopyScript(w, r)
	case PasskeyScriptPath:
		servePasskeyScript(w, r)
	default:
		if IsResetPath(r.URL.Path) {
			p.Protect(http.HandlerFunc(p.serveReset)).ServeHTTP(w, r)
			return
		}
		if r.URL.Path == AccountPath || strings.HasPrefix(r.URL.Path, AccountPath+"/") {
			p.serveAccountPages(w, r)
			return
		}
		sp, ok := p.settingsPageFor(r.URL.Path)
		if !ok {
			p.renderError(w, r, http.StatusNotFound, "Not found", "There is no page here.")
			return
		}
		m, ok := p.RequireMember(w, r)
		if !ok {
			return
		}
		p.Protect(sp.Handler).ServeHTTP(w, withMember(r, m))
	}
}

// protectedPages are the sign-in pages and their passkey endpoints, each
// served through Protect with no more to check first.
var protectedPages = map[string]func(*Pages, http.ResponseWriter, *http.Request){
	SignInPath:                  (*Pages).serveSignIn,
	SignOutPath:                 (*Pages).serveSignOut,
	TwoFactorPath:               (*Pages).serveTwoFactor,
	PasskeySignInOptionsPath:    (*Pages).postPasskeySignInOptions,
	PasskeySignInPath:           (*Pages).postPasskeySignIn,
	TwoFactorPasskeyOptionsPath: (*Pages).postTwoFactorPasskeyOptions,
	TwoFactorPasskeyPath:        (*Pages).postTwoFactorPasskey,
}

// Protect wraps h with cross-origin form protection: unsafe requests
// (POST, PUT, DELETE ...) sent by a browser from another origin are refused
// with a 403 page, and every POST body is limited in size.
func (p *Pages) Protect(h http.Handler) http.Handler {
	return p.cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, p.opts.MaxFormBytes)
		}
		h.ServeHTTP(w, r)
	}))
}

// allowed reports whether method is one of methods; otherwise it answers 405.
func (p *Pages) allowed(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	p.renderError(w, r, http.StatusMethodNotAllowed, "Method not allowed", "This page can't be used that way.")
	return false
}
