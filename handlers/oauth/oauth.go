// Package oauth is Hearth's OAuth 2.0 authorization server for social
// clients (specs/oauth-server.md), compatible with the client side of
// Mastodon 4.4 (Doorkeeper): application registration (POST /api/v1/apps),
// the authorization-code grant with optional PKCE, the client-credentials
// grant, revocation, token use (verify_credentials), the RFC 8414 metadata
// document and the minimal instance endpoints clients probe before signing
// in. Member sign-in and the consent page's layout come from the shared
// member pages (handlers/account).
package oauth

import (
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Paths served by Server.
const (
	AppsPath                  = "/api/v1/apps"
	AppsVerifyPath            = "/api/v1/apps/verify_credentials"
	AuthorizePath             = "/oauth/authorize"
	TokenPath                 = "/oauth/token"
	RevokePath                = "/oauth/revoke"
	VerifyCredentialsPath     = "/api/v1/accounts/verify_credentials"
	MetadataPath              = "/.well-known/oauth-authorization-server"
	InstanceV1Path            = "/api/v1/instance"
	InstanceV2Path            = "/api/v2/instance"
	AuthorizedAppsPath        = "/oauth/authorized_applications"
	OOBRedirectURI            = "urn:ietf:wg:oauth:2.0:oob"
	DefaultRegistrationLimit  = 5
	DefaultRegistrationWindow = 10 * time.Minute
	DefaultTokenLimit         = 300
	DefaultTokenWindow        = 5 * time.Minute
	DefaultFailedCodeLimit    = 10
	DefaultFailedCodeWindow   = 10 * time.Minute
	DefaultAuthorizeLimit     = 60
	DefaultAuthorizeWindow    = time.Minute
	DefaultInstanceTitle      = "Hearth"
	DefaultMaxBodyBytes       = 64 << 10
)

// Pages is what the server needs from the shared member pages
// (*account.Pages): who is signed in, the sign-in redirect, the sign-in
// form for force_login, the page layout and cross-origin form protection.
type Pages interface {
	CurrentMember(r *http.Request) *members.Member
	RequireMember(w http.ResponseWriter, r *http.Request) (*members.Member, bool)
	SignInForm(w http.ResponseWriter, r *http.Request, returnTo string)
	// SignOut, for RP-initiated logout confirmed by a POST from this site.
	SignOut(w http.ResponseWriter, r *http.Request)
	Render(w http.ResponseWriter, r *http.Request, status int, title string, content *template.Template, data any)
	Protect(h http.Handler) http.Handler
	ContentSecurityPolicy(formActions ...string) string
	ParseForm(w http.ResponseWriter, r *http.Request) bool
}

// Options configure the server. Zero values take the defaults above.
type Options struct {
	// RateLimits keeps the rate limiters' counts across rebuilds of the
	// handler (the Caddy app holds one per store); nil: private limiters.
	RateLimits *ratelimit.Registry
	// BaseURL is the server's public URL (scheme://host[:port]) used in
	// the metadata document and account URLs. Empty: taken from each
	// request's scheme and Host.
	BaseURL string
	// AccountDomain is the domain of account handles on a split-domain
	// installation (Mastodon's LOCAL_DOMAIN). Empty: the host of the base URL.
	AccountDomain string
	// AllowHTTPRedirects lets apps register plain-http redirect URIs on
	// hosts other than loopback.
	AllowHTTPRedirects bool
	// RegistrationLimit app registrations per client IP in
	// RegistrationWindow (Mastodon: 5 per 10 minutes).
	RegistrationLimit  int
	RegistrationWindow time.Duration
	// TokenLimit requests to /oauth/token and /oauth/revoke, and requests
	// with an unknown bearer token, per client IP in TokenWindow. Negative:
	// no limit.
	TokenLimit  int
	TokenWindow time.Duration
	// FailedCodeLimit failed exchanges of a member's authorization codes
	// (wrong client, redirect_uri or PKCE verifier, or a code used before)
	// in FailedCodeWindow; beyond it the member's codes are refused with 429
	// until the window has moved on. Sign-in is not affected. Negative: no
	// limit.
	FailedCodeLimit  int
	FailedCodeWindow time.Duration
	// AuthorizeLimit authorization codes issued to one member in
	// AuthorizeWindow (an OpenID code costs an ID token's signature when it
	// is issued); past it the authorization page answers 429 and issues
	// none until the window has moved on. Consent pages shown, which issue
	// no code, do not count. Negative: no limit.
	//
	// The default, 60 a minute, is far above what a person does: one
	// code per app signed in to, and after a session expires even a member
	// reopening a dozen tabs over a dozen gated apps needs a few dozen at
	// most. It still bounds what one member's session cookie (or an app
	// the member approved, which skips consent) can make the server sign:
	// 60 RS256 signatures, some 120 ms of one core, a minute.
	AuthorizeLimit  int
	AuthorizeWindow time.Duration
	// InstanceTitle, InstanceDescription and ContactEmail fill the instance
	// endpoints.
	InstanceTitle       string
	InstanceDescription string
	ContactEmail        string
	// OpenRegistration is reported by the instance endpoints.
	OpenRegistration bool
	// MaxBodyBytes limits request bodies.
	MaxBodyBytes int64
	// Pages are the member pages; without them the authorization page
	// answers that sign-in is unavailable.
	Pages Pages
	// ClientIP returns the client address for rate limits. Default: the
	// host of r.RemoteAddr.
	ClientIP func(r *http.Request) string
	// Logger receives events; never secrets.
	Logger *zap.Logger
	// The OpenID provider's lifetimes and key rotation (operator clients
	// only; Mastodon apps' tokens have no fixed expiry).
	IDTokenLifetime      time.Duration
	AccessTokenLifetime  time.Duration
	RefreshTokenLifetime time.Duration
	KeyRotation          time.Duration
	KeyPublishAhead      time.Duration
	// KeepOutOfAccessLog is called for a request whose URL or response
	// headers carry a secret (an RP-initiated logout's id_token_hint; an
	// approval's redirect, whose Location holds the authorization code),
	// so that the server hosting the handler leaves the request out of its
	// access log. Default: nothing.
	KeepOutOfAccessLog func(r *http.Request)
}

func (o Options) withDefaults() Options {
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.RegistrationLimit <= 0 {
		o.RegistrationLimit = DefaultRegistrationLimit
	}
	if o.RegistrationWindow <= 0 {
		o.RegistrationWindow = DefaultRegistrationWindow
	}
	if o.TokenLimit == 0 {
		o.TokenLimit = DefaultTokenLimit
	}
	if o.TokenWindow <= 0 {
		o.TokenWindow = DefaultTokenWindow
	}
	if o.FailedCodeLimit == 0 {
		o.FailedCodeLimit = DefaultFailedCodeLimit
	}
	if o.FailedCodeWindow <= 0 {
		o.FailedCodeWindow = DefaultFailedCodeWindow
	}
	if o.AuthorizeLimit == 0 {
		o.AuthorizeLimit = DefaultAuthorizeLimit
	}
	if o.AuthorizeWindow <= 0 {
		o.AuthorizeWindow = DefaultAuthorizeWindow
	}
	if o.InstanceTitle == "" {
		o.InstanceTitle = DefaultInstanceTitle
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.ClientIP == nil {
		o.ClientIP = ratelimit.RemoteIP
	}
	o = o.oidcDefaults()
	if o.KeepOutOfAccessLog == nil {
		o.KeepOutOfAccessLog = func(*http.Request) {}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// Server is the authorization server. Build it with New.
type Server struct {
	store         *storage.Store
	opts          Options
	registrations ratelimit.Counter
	tokens        ratelimit.Counter
	failedCodes   ratelimit.Counter // keyed by member ID; fails closed (code guesses)
	codesIssued   ratelimit.Counter // keyed by member ID; fails open (issuing a code needs the store anyway)
	auth          *access.Authenticator
	log           *zap.Logger
	mux           *http.ServeMux // routes
}

// New returns the server backed by store.
func New(store *storage.Store, opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		store:         store,
		opts:          opts,
		registrations: opts.RateLimits.Counter(ratelimit.Limit{Name: "oauth.registrations", N: opts.RegistrationLimit, Window: opts.RegistrationWindow}),
		auth:          &access.Authenticator{Store: store, Logger: opts.Logger},
		log:           opts.Logger,
	}
	s.mux = s.routes()
	if opts.TokenLimit > 0 {
		s.tokens = opts.RateLimits.Counter(ratelimit.Limit{Name: "oauth.token", N: opts.TokenLimit, Window: opts.TokenWindow})
	}
	if opts.FailedCodeLimit > 0 {
		s.failedCodes = opts.RateLimits.Counter(ratelimit.Limit{Name: "oauth.failed_codes.member", N: opts.FailedCodeLimit, Window: opts.FailedCodeWindow,
			Policy: ratelimit.FailClosed})
	}
	if opts.AuthorizeLimit > 0 {
		s.codesIssued = opts.RateLimits.Counter(ratelimit.Limit{Name: "oauth.codes_issued.member", N: opts.AuthorizeLimit, Window: opts.AuthorizeWindow})
	}
	return s
}

// routes declares the server's endpoints, each once: its path and the
// methods it answers (Go's method patterns; GET answers HEAD too), with or
// without one trailing slash (Rails routing ignores one, and clients send
// it: toot 0.34 opens /oauth/authorize/, Mastodon.py 1.8 reads
// /api/v1/instance/). Another method on a known path gets Mastodon's 405
// (allow); a route declared without methods checks them itself. A
// member's page, /@username, is no pattern Go's mux can say (a wildcard is
// a whole segment): Handles and ServeHTTP add it.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	route := func(path string, h http.HandlerFunc, methods ...string) {
		for _, p := range []string{path, path + "/{$}"} {
			if len(methods) == 0 {
				mux.HandleFunc(p, h)
				continue
			}
			for _, m := range methods {
				mux.HandleFunc(m+" "+p, h)
			}
			mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { allow(w, r, methods...) })
		}
	}
	get, post := http.MethodGet, http.MethodPost
	route(AppsPath, s.serveRegister, post)
	route(AppsVerifyPath, s.serveAppVerify, get)
	route(AuthorizePath, s.serveAuthorize)
	route(TokenPath, s.serveToken, post)
	route(RevokePath, s.serveRevoke, post)
	route(VerifyCredentialsPath, s.serveVerifyCredentials, get)
	route(MetadataPath, s.serveMetadata, get)
	route(InstanceV1Path, s.serveInstanceV1, get)
	route(InstanceV2Path, s.serveInstanceV2, get)
	route(MissingAvatarPath, servePlaceholder, get)
	route(MissingHeaderPath, servePlaceholder, get)
	route(UserinfoPath, s.serveUserinfo, get, post)
	for _, p := range []string{NodeInfoWellKnownPath, NodeInfo20Path, NodeInfo21Path} {
		route(p, func(w http.ResponseWriter, r *http.Request) { s.serveNodeInfo(w, r, p) }, get)
	}
	// The OpenID provider's own endpoints.
	route(DiscoveryPath, s.serveDiscovery, get)
	route(JWKSPath, s.serveJWKS, get)
	route(IntrospectPath, s.serveIntrospect, post)
	route(EndSessionPath, s.serveEndSession)
	return mux
}

// match is the handler of r's route, or nil. A path that is not clean
// (//, /./, /../) is no route of ours: Go's mux would answer it with a
// redirect.
func (s *Server) match(r *http.Request) http.Handler {
	if p := r.URL.Path; path.Clean(p) != strings.TrimSuffix(p, "/") {
		return nil
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		return nil
	}
	return h
}

// Handles reports whether r is for one of the server's endpoints (routes),
// with or without a trailing slash.
func (s *Server) Handles(r *http.Request) bool {
	return s.match(r) != nil || (r.Method != http.MethodOptions && strings.HasPrefix(r.URL.Path, ProfilePathPrefix))
}

// endpoint is path without one trailing slash.
func endpoint(path string) string {
	if len(path) > 1 && path[len(path)-1] == '/' {
		return path[:len(path)-1]
	}
	return path
}

// IsAPIPath reports whether path lies under /api/v1/, /api/v2/ or /oauth/,
// where Mastodon answers an unknown path with a JSON 404 (NotFound).
func IsAPIPath(path string) bool {
	for _, prefix := range []string{"/api/v1", "/api/v2", "/oauth"} {
		if strings.HasPrefix(path, prefix) && (len(path) == len(prefix) || path[len(prefix)] == '/') {
			return true
		}
	}
	return false
}

// NotFound is Mastodon's answer to an API path it has no route for
// (Api::BaseController#not_found: 404 {"error":"Record not found"}).
func NotFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "Record not found"})
}

// ServeHTTP serves the endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := endpoint(r.URL.Path)
	if path != AuthorizePath {
		// The API endpoints are called by browser-based clients from other
		// origins, as on Mastodon; none of them uses cookies.
		if s.cors(w, r) {
			return
		}
	}
	if h := s.match(r); h != nil {
		h.ServeHTTP(w, r)
		return
	}
	if strings.HasPrefix(path, ProfilePathPrefix) {
		s.serveProfile(w, r)
		return
	}
	NotFound(w)
}

// cors answers preflight requests and adds CORS headers the way Mastodon's
// rack-cors configuration does. It reports whether the request is done.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Origin") == "" {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", "Link, X-RateLimit-Reset, X-RateLimit-Limit, X-RateLimit-Remaining, Retry-After")
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
			h.Set("Access-Control-Allow-Headers", req)
		}
		h.Set("Access-Control-Max-Age", "7200")
		w.WriteHeader(http.StatusOK)
		return true
	}
	return false
}

func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, method := range methods {
		if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "This method is not allowed here"})
	return false
}

// baseURL is the configured base URL or the request's scheme and host.
func (s *Server) baseURL(r *http.Request) string {
	if s.opts.BaseURL != "" {
		return s.opts.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if host == "" || strings.ContainsAny(host, "/\\@ ") {
		host = "localhost"
	}
	return scheme + "://" + host
}

// accountDomain is the domain of account handles.
func (s *Server) accountDomain(r *http.Request) string {
	if s.opts.AccountDomain != "" {
		return s.opts.AccountDomain
	}
	b := s.baseURL(r)
	b = b[strings.Index(b, "://")+3:]
	if h, _, err := net.SplitHostPort(b); err == nil {
		return h
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// tooMany answers 429 for a refused rate-limit result, as Mastodon's
// rack-attack does, plus Retry-After.
func tooMany(w http.ResponseWriter, res ratelimit.Result) {
	rateLimitHeaders(w, res)
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "Too many requests"})
}

// rateLimitHeaders sets Retry-After and Mastodon's X-RateLimit-* headers
// for a refused rate-limit result.
func rateLimitHeaders(w http.ResponseWriter, res ratelimit.Result) {
	h := w.Header()
	// X-RateLimit-Reset is when a request will be allowed again, the same
	// instant as Retry-After (rounded up to whole seconds), not the end of
	// the limiter's fixed window: Mastodon.py 1.8 (internals.py
	// __api_request, ratelimit_method "wait") sleeps until Reset and
	// retries once. Mastodon writes it as ISO 8601 with fractions.
	secs := ratelimit.RetryAfterSeconds(res.RetryAfter)
	reset := time.Now().Add(time.Duration(secs) * time.Second).UTC().Truncate(time.Second).Add(time.Second)
	h.Set("Retry-After", strconv.Itoa(secs))
	h.Set("X-RateLimit-Limit", strconv.Itoa(res.Limit))
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", reset.Format("2006-01-02T15:04:05.000000Z"))
	h.Set("Cache-Control", "no-store")
}
