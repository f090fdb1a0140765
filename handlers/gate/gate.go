// Package gate lets only the site's signed-in members through to a route
// (hearth_gate), or answers for another proxy whether a request may pass
// (forward-auth, for Caddy's forward_auth and nginx's auth_request). The
// member is read from Hearth's session cookie, from the store, at most
// SessionCacheTTL apart per session on each node: a session ended anywhere
// (sign-out, a password change, a suspension) stops passing within it, on
// every node.
//
// What passes upstream says who the member is, in Remote-User,
// Remote-Name, Remote-Email (an address the operator verified, never one
// the member set itself) and Remote-Groups; copies of those headers sent by
// the client are removed first (in every spelling a server might map to the
// same variable, underscores included), and so is Hearth's session cookie,
// so the app behind never holds a member's session.
package gate

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The headers that carry the member upstream.
const (
	HeaderUser   = "Remote-User"
	HeaderName   = "Remote-Name"
	HeaderEmail  = "Remote-Email"
	HeaderGroups = "Remote-Groups"
)

var identityHeaders = []string{HeaderUser, HeaderName, HeaderEmail, HeaderGroups}

// Options configure a gate.
type Options struct {
	// Members and Groups, when either is set, are who may pass: a member
	// named in Members or in one of Groups. Both empty: every member.
	Members []string
	Groups  []string
	// RequireTwoFactor lets only members who sign in with a second factor
	// through: the session signed in with two (its amr has "mfa"), or the
	// member has two-factor sign-in on (sessions from before the amr was
	// kept, and the browser that turned it on).
	RequireTwoFactor bool
	// RequirePasskey lets only sessions signed in with a passkey through
	// (alone or as the second factor: the session's amr has "hwk").
	RequirePasskey bool
	// SignInURL is where browsers are sent to sign in: the sign-in page of
	// the site serving Hearth's member pages. Default: account.SignInPath
	// on the same host.
	SignInURL string
	Logger    *zap.Logger
}

// Gate decides. Build it with New.
type Gate struct {
	store    *storage.Store
	opts     Options
	sessions sessionCache
}

// SessionCacheTTL is how long a node lets a session that passed pass again
// without reading the store: a busy route reads each session twice a
// second instead of on every request, and an ended session stops passing
// within it (the promise is a second).
const SessionCacheTTL = 500 * time.Millisecond

// maxCachedSessions bounds the cache (past it, it starts empty again).
const maxCachedSessions = 4096

type cachedSession struct {
	m     *members.Member
	amr   []string
	until time.Time
}

// sessionCache holds the sessions that passed lately, by cookie value.
type sessionCache struct {
	mu sync.RWMutex
	m  map[string]cachedSession
}

func (c *sessionCache) get(id string, now time.Time) (cachedSession, bool) {
	c.mu.RLock()
	e, ok := c.m[id]
	c.mu.RUnlock()
	return e, ok && now.Before(e.until)
}

func (c *sessionCache) put(id string, e cachedSession) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedSessions {
		c.m = make(map[string]cachedSession)
	}
	c.m[id] = e
	c.mu.Unlock()
}

// New returns the gate backed by store.
func New(store *storage.Store, opts Options) *Gate {
	if opts.SignInURL == "" {
		opts.SignInURL = account.SignInPath
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Gate{store: store, opts: opts}
}

// Verdict is the gate's answer for a request.
type Verdict int

const (
	// Pass: a member who may pass (Member is set).
	Pass Verdict = iota
	// SignIn: nobody signed in; a browser goes to sign in, an API client
	// gets 401.
	SignIn
	// Forbidden: a member who may not pass (not allowed, or without the
	// second factor the route requires).
	Forbidden
	// Unavailable: the store cannot answer now (a restore, a full disk).
	Unavailable
)

// Check reads the member of r's session and applies the rules.
func (g *Gate) Check(r *http.Request) (Verdict, *members.Member, error) {
	c, err := r.Cookie(account.CookieName)
	if err != nil || c.Value == "" {
		return SignIn, nil, nil
	}
	now := time.Now()
	e, ok := g.sessions.get(c.Value, now)
	if !ok {
		m, sess, err := members.Of(g.store).SessionAndMember(r.Context(), c.Value)
		switch {
		case err == nil:
		case errors.Is(err, storage.ErrNotFound), errors.Is(err, members.ErrSuspended):
			return SignIn, nil, nil
		default:
			if _, _, busy := storage.Unavailable(err); busy {
				return Unavailable, nil, err
			}
			g.opts.Logger.Error("read a session at the gate", zap.Error(err))
			return Unavailable, nil, err
		}
		e = cachedSession{m: m, amr: sess.AMR, until: now.Add(SessionCacheTTL)}
		g.sessions.put(c.Value, e)
	}
	m := e.m
	if !g.allowed(m) ||
		(g.opts.RequireTwoFactor && !m.TwoFactor && !slices.Contains(e.amr, "mfa")) ||
		(g.opts.RequirePasskey && !slices.Contains(e.amr, "hwk")) {
		return Forbidden, m, nil
	}
	return Pass, m, nil
}

func (g *Gate) allowed(m *members.Member) bool {
	if len(g.opts.Members) == 0 && len(g.opts.Groups) == 0 {
		return true
	}
	if slices.ContainsFunc(g.opts.Members, func(u string) bool { return strings.EqualFold(u, m.Username) }) {
		return true
	}
	for _, grp := range m.Groups {
		if slices.Contains(g.opts.Groups, grp) {
			return true
		}
	}
	return false
}

// StripIdentity removes from h every header a client could send to pose
// as a member: Remote-User and the others, in any case, and with '_' for
// '-' (CGI and PHP map both to HTTP_REMOTE_USER).
func StripIdentity(h http.Header) {
	for k := range h {
		n := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		for _, id := range identityHeaders {
			if n == strings.ToLower(id) {
				delete(h, k)
			}
		}
	}
}

// SetIdentity puts m's identity in h (after StripIdentity).
func SetIdentity(h http.Header, m *members.Member) {
	name := m.DisplayName
	if name == "" {
		name = m.Username
	}
	h.Set(HeaderUser, m.Username)
	h.Set(HeaderName, headerSafe(name))
	// Only an address the operator vouched for. A member may set any
	// address as its own (unverified, on the e-mail settings page), and no
	// header tells the app behind which kind it got: an app that finds
	// its accounts by Remote-Email would hand the member someone else's.
	if m.Email != "" && m.EmailVerified {
		h.Set(HeaderEmail, m.Email)
	}
	if len(m.Groups) > 0 {
		h.Set(HeaderGroups, strings.Join(m.Groups, ","))
	}
}

// headerSafe keeps a display name within what a header value may hold.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// StripSessionCookie removes Hearth's session cookie from r's Cookie
// headers, keeping the app's own cookies.
func StripSessionCookie(r *http.Request) {
	cookies := r.Cookies()
	r.Header.Del("Cookie")
	var kept []string
	for _, c := range cookies {
		if c.Name != account.CookieName {
			kept = append(kept, c.Name+"="+c.Value)
		}
	}
	if len(kept) > 0 {
		r.Header.Set("Cookie", strings.Join(kept, "; "))
	}
}

// Prepare makes r fit to go upstream for m: identity headers replaced,
// the session cookie removed.
func Prepare(r *http.Request, m *members.Member) {
	StripIdentity(r.Header)
	SetIdentity(r.Header, m)
	StripSessionCookie(r)
}

// wantsHTML reports whether r comes from a browser navigating (which is
// sent to sign in) rather than an API client (which gets 401).
func wantsHTML(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if r.Header.Get("Sec-Fetch-Mode") == "navigate" {
		return true
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// Refuse answers a request that may not pass: browsers without a session
// go to sign in and come back to back (the URL they asked for), API
// clients get 401 with a challenge, members not allowed 403.
func (g *Gate) Refuse(w http.ResponseWriter, r *http.Request, v Verdict, back string) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	switch v {
	case SignIn:
		if wantsHTML(r) {
			to := g.opts.SignInURL
			sep := "?"
			if strings.Contains(to, "?") {
				sep = "&"
			}
			http.Redirect(w, r, to+sep+"return_to="+url.QueryEscape(back), http.StatusSeeOther)
			return
		}
		h.Set("WWW-Authenticate", `Cookie realm="hearth", form="`+g.opts.SignInURL+`"`)
		http.Error(w, "Sign in to this site first.", http.StatusUnauthorized)
	case Forbidden:
		msg := "Your account may not open this page."
		if g.opts.RequirePasskey {
			msg += " If it may, sign out and sign in again with your passkey: this page needs one."
		}
		http.Error(w, msg, http.StatusForbidden)
	default:
		h.Set("Retry-After", "5")
		http.Error(w, "The site cannot check your sign-in now; try again in a moment.", http.StatusServiceUnavailable)
	}
}

// ServeForwardAuth answers a forward-auth subrequest: 200 with the
// member's headers, or the refusal (a browser's redirect to sign in comes
// back to the URL the proxy names in X-Forwarded-Proto, -Host and -Uri).
func (g *Gate) ServeForwardAuth(w http.ResponseWriter, r *http.Request) {
	v, m, _ := g.Check(r)
	if v != Pass {
		g.Refuse(w, r, v, ForwardedURL(r))
		return
	}
	h := w.Header()
	SetIdentity(h, m)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// ForwardedURL is the URL a forward-auth subrequest is about (the
// X-Forwarded-* headers Caddy's forward_auth and nginx set), or the
// request's own path.
func ForwardedURL(r *http.Request) string {
	host, uri := r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Forwarded-Uri")
	if host == "" || uri == "" || !strings.HasPrefix(uri, "/") {
		return r.URL.RequestURI()
	}
	proto := r.Header.Get("X-Forwarded-Proto")
	if proto != "http" {
		proto = "https"
	}
	return proto + "://" + host + uri
}
