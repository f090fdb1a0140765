package account

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

type memberKey struct{}

// withMember remembers the signed-in member on r, so that a settings page
// calling CurrentMember doesn't look the session up again.
func withMember(r *http.Request, m *members.Member) *http.Request {
	return WithMember(r, m)
}

// WithMember is r remembering m, the member RequireMember found on it: the
// page's layout then names the member without a second session lookup.
func WithMember(r *http.Request, m *members.Member) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), memberKey{}, m))
}

// CurrentMember returns the member signed in on r, or nil when r has no
// valid session (none, expired, ended, or the member is suspended or gone).
func (p *Pages) CurrentMember(r *http.Request) *members.Member {
	m, _ := p.sessionMember(r)
	return m
}

// sessionMember is CurrentMember with the store's refusal (a restore, a
// reload, a full disk: storage.Unavailable), which is not "signed out".
func (p *Pages) sessionMember(r *http.Request) (*members.Member, error) {
	if m, ok := r.Context().Value(memberKey{}).(*members.Member); ok && m != nil {
		return m, nil
	}
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	m, sess, err := members.Of(p.store).SessionAndMember(r.Context(), c.Value)
	if _, _, busy := storage.Unavailable(err); busy {
		return nil, err
	}
	if err != nil || m == nil || m.Suspended {
		return nil, nil
	}
	// Last seen is kept to the nearest few minutes: a page view does not
	// write, one every SessionTouchInterval does (asynchronously).
	if time.Since(sess.LastSeen()) >= p.opts.SessionTouchInterval {
		// A store refusing writes for now (a full disk) logs that
		// itself; a line here would come at every page view meanwhile.
		err := members.Of(p.store).TouchSession(r.Context(), c.Value, p.opts.ClientIP(r))
		if _, _, refused := storage.Unavailable(err); err != nil && !refused {
			p.opts.Logger.Warn("record session last seen", zap.Error(err))
		}
	}
	return m, nil
}

// SessionTouchInterval is the default of Options.SessionTouchInterval.
const SessionTouchInterval = 5 * time.Minute

// RequireMember returns the signed-in member. When r has none, it answers
// with a 303 redirect to the sign-in page, which comes back to r's path and
// query after signing in, and returns false. When the store refuses for now,
// it answers 503/507 with Retry-After instead: the member is not signed out.
func (p *Pages) RequireMember(w http.ResponseWriter, r *http.Request) (*members.Member, bool) {
	m, err := p.sessionMember(r)
	if err != nil {
		p.renderStoreFailure(w, r, err, "")
		return nil, false
	}
	if m != nil {
		return m, true
	}
	http.Redirect(w, r, SignInURL(r.URL.RequestURI()), http.StatusSeeOther)
	return nil, false
}

// SignInURL is the sign-in page that comes back to returnTo afterwards (a
// path and query on this site; anything else is dropped).
func SignInURL(returnTo string) string {
	if rt, ok := localPath(returnTo); ok {
		return SignInPath + "?return_to=" + url.QueryEscape(rt)
	}
	return SignInPath
}

// CheckCrossOrigin refuses (with an error) an unsafe request a browser sent
// from another origin, by the same rule (and trusted origins) as Protect:
// for APIs that accept the session cookie and answer in their own format.
func (p *Pages) CheckCrossOrigin(r *http.Request) error {
	return p.cop.Check(r)
}

// RefuseCrossOrigin answers a form a browser sent from another site as
// Protect refuses one: a 403 page saying so. For the routes that take a
// page's form outside Protect (the Import page posts its file to the
// import API, whose body Protect's form limit would cut), so that their
// browser forms are refused as every other page's are.
func (p *Pages) RefuseCrossOrigin(w http.ResponseWriter, r *http.Request) {
	p.renderError(w, r, http.StatusForbidden, "Request refused",
		"This form was sent from another site, so it was refused. Go back, reload the page and try again.")
}

// SignInForm answers r with the sign-in form, whoever is signed in,
// coming back to returnTo (a local path) once signed in: OAuth's
// force_login, with which Mastodon apps add or switch accounts. Showing it
// changes nothing (a link from another site to it signs nobody out); a
// session r has is replaced only when the sign-in completes
// (startSession), and stays if the member goes back.
func (p *Pages) SignInForm(w http.ResponseWriter, r *http.Request, returnTo string) {
	rt, _ := localPath(returnTo)
	d := signInData{ReturnTo: rt}
	if m := p.CurrentMember(r); m != nil {
		d.SignedInAs = m.Username
	}
	p.renderSignIn(w, r, http.StatusOK, d)
}

// SignOut ends the session of r, if any, and clears the cookie. Callers
// answer only a POST from this site (Protect, CheckCrossOrigin): signing
// out is a change a link from another site must not make.
func (p *Pages) SignOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		if err := members.Of(p.store).DeleteSession(r.Context(), c.Value); err != nil {
			p.opts.Logger.Error("end session: " + err.Error())
		}
	}
	http.SetCookie(w, p.cookie(r, "", -1))
}

// startSession signs m in on w, ending any session r already had (so a
// session id planted before sign-in is never promoted). m is the member as
// read when its password (and code) were checked: when its credentials
// changed since, no session is made (members.ErrCredentialsChanged). amr
// says how the member signed in (members.Session.AMR).
func (p *Pages) startSession(w http.ResponseWriter, r *http.Request, m *members.Member, amr ...string) error {
	p.endPlantedSession(r)
	id, err := members.Of(p.store).CreateSessionWith(r.Context(), m, p.opts.SessionLifetime, p.sessionInfo(r, amr))
	if err != nil {
		return err
	}
	p.setSessionCookie(w, r, id)
	return nil
}

// endPlantedSession ends the session of the cookie the browser brought to
// a sign-in, which someone else may have planted there.
func (p *Pages) endPlantedSession(r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		_ = members.Of(p.store).DeleteSession(r.Context(), c.Value)
	}
}

// sessionInfo is what a new session records of the browser of r.
func (p *Pages) sessionInfo(r *http.Request, amr []string) members.SessionInfo {
	return members.SessionInfo{Device: DeviceSummary(r.UserAgent()), Address: p.opts.ClientIP(r), AMR: amr}
}

// setSessionCookie gives the browser the cookie of session id.
func (p *Pages) setSessionCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, p.cookie(r, id, int(p.opts.SessionLifetime.Seconds())))
}

// cookie builds the session cookie. It is Secure unless the page is served
// over plain HTTP on a loopback host (local development), where a Secure
// cookie would never come back.
func (p *Pages) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name:     CookieName,
		Value:    value,
		Path:     "/",
		Domain:   p.opts.CookieDomain,
		MaxAge:   maxAge,
		Secure:   r.TLS != nil || !isLoopbackHost(r.Host),
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	}
}

// cookieDropped reports whether the browser that posted r would drop the
// session cookie: its Origin is a page served over plain HTTP under a name
// other than a loopback one, where cookie makes the cookie Secure, and
// browsers keep a Secure cookie only from HTTPS pages (and localhost). A
// sign-in there would seem to do nothing but show the sign-in page again.
// The Origin is what the browser sees, so a site behind a proxy that ends
// TLS (r.TLS nil, the browser on https) is not taken for one; nor is a
// proxy on the LAN that passes the request on as to localhost (nginx's
// default Host with proxy_pass), for which the cookie is not Secure and
// the browser keeps it. SignIn and SignUp ask it, for every form that
// signs in (the site's pages and the GraphQL signIn and createAccount).
func (p *Pages) cookieDropped(r *http.Request) bool {
	if !p.cookie(r, "", 0).Secure {
		return false
	}
	origin := r.Header.Get("Origin")
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || isLoopbackHost(u.Host) {
		return false
	}
	p.opts.Logger.Warn("sign-in refused: the browser is on a plain-HTTP page under a name other than localhost, "+
		"where it drops the Secure session cookie; serve this name over HTTPS (tls internal on a LAN)", zap.String("origin", origin))
	return true
}

// ErrCookieWouldBeDropped is SignIn's and SignUp's answer to a browser
// that would drop the session cookie (cookieDropped): no password is
// checked, no member made, no session started. CookieDroppedMessage says
// so to the member.
var ErrCookieWouldBeDropped = errors.New("the browser is on a plain-HTTP page under a name other than localhost, where it drops the Secure session cookie")

// CookieDroppedMessage is what a sign-in or sign-up form, the site's or
// the GraphQL API's, tells the member after ErrCookieWouldBeDropped.
const CookieDroppedMessage = "This browser would not stay signed in: the site is open over plain HTTP under a name " +
	"other than localhost, and browsers keep the sign-in cookie only over HTTPS. Open the site at its https:// " +
	"address (its operator can give this name a site block with tls internal), or as http://localhost on the " +
	"machine that runs it."

func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	host = strings.ToLower(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// returnTo is the page to go to after signing in: the form's or query's
// return_to when it is a local path or a page on the cookie domain, else
// "" (the settings page).
func (p *Pages) returnTo(r *http.Request) string {
	rt := r.FormValue("return_to")
	if s, ok := localPath(rt); ok {
		return s
	}
	if p.OnCookieDomain(rt) {
		return rt
	}
	return ""
}

// OnCookieDomain reports whether s is an absolute http(s) URL on the
// cookie domain or one of its subdomains (never when no cookie domain is
// set): a page the session cookie reaches, fit to return to.
func (p *Pages) OnCookieDomain(s string) bool {
	d := strings.ToLower(strings.TrimPrefix(p.opts.CookieDomain, "."))
	if d == "" || len(s) > 2048 || strings.ContainsAny(s, "\\\x00\r\n\t") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil || u.Opaque != "" {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == d || strings.HasSuffix(h, "."+d)
}

// localPath returns s when it is a path on this site that is safe to
// redirect to after signing in: it starts with a single "/", has no scheme
// or host, no backslash and no control characters. Anything else (including
// "//evil.example" and "/\evil.example", which browsers treat as other
// hosts) is refused.
func localPath(s string) (string, bool) {
	if s == "" || len(s) > 2048 || s[0] != '/' {
		return "", false
	}
	if len(s) > 1 && (s[1] == '/' || s[1] == '\\') {
		return "", false
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return "", false
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	// A percent-encoded slash or backslash right after the first "/" is
	// decoded by some browsers and proxies into a scheme-relative URL.
	if p := u.Path; len(p) > 1 && (p[1] == '/' || p[1] == '\\') {
		return "", false
	}
	return s, true
}
