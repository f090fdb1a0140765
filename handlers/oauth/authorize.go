package oauth

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

//go:embed templates/*.html
var files embed.FS

var (
	consentTmpl        = parse("consent.html", "authorize_fields.html")
	codeTmpl           = parse("code.html")
	messageTmpl        = parse("message.html")
	authorizedAppsTmpl = parse("authorized_apps.html")
)

// parse parses the page template name with the shared blocks it calls.
func parse(name string, shared ...string) *template.Template {
	patterns := []string{"templates/" + name}
	for _, n := range shared {
		patterns = append(patterns, "templates/"+n)
	}
	return template.Must(template.New(name).ParseFS(files, patterns...))
}

type message struct{ Text, Detail string }

// authRequest is a validated authorization request.
type authRequest struct {
	ClientID            string
	RedirectURI         string
	Scope               string
	State               string
	CodeChallenge       string
	CodeChallengeMethod string

	app    *grants.App
	scopes []string
	oidc   *oidcRequest // operator clients only
}

// pageError is a problem with the client or redirect URI: shown on a page,
// never redirected (RFC 6749 section 4.1.2.1).
type pageError struct{ text string }

// readAuthRequest is parseAuthRequest answering its errors: a *pageError on a
// page, an *oauthErr on the client's redirect URI; ok is false when it
// answered.
func (s *Server) readAuthRequest(w http.ResponseWriter, r *http.Request, v url.Values) (req *authRequest, ok bool) {
	req, perr, oerr := s.parseAuthRequest(r.Context(), v)
	if perr != nil {
		s.errorPage(w, r, http.StatusBadRequest, perr.text)
		return nil, false
	}
	if oerr != nil {
		s.redirectError(w, r, req, oerr)
		return nil, false
	}
	return req, true
}

// parseAuthRequest validates the parameters of GET (query) or POST (form)
// /oauth/authorize. A *pageError must be shown to the member; an *oauthErr
// goes back to the client on its redirect URI with state.
func (s *Server) parseAuthRequest(ctx context.Context, v url.Values) (*authRequest, *pageError, *oauthErr) {
	for _, k := range []string{"client_id", "redirect_uri"} {
		if len(v[k]) > 1 || len(v.Get(k)) > maxParamLen {
			return nil, &pageError{"The authorization request is malformed: " + k + " must be sent once."}, nil
		}
	}
	req := &authRequest{
		ClientID:            v.Get("client_id"),
		RedirectURI:         v.Get("redirect_uri"),
		Scope:               v.Get("scope"),
		State:               v.Get("state"),
		CodeChallenge:       v.Get("code_challenge"),
		CodeChallengeMethod: v.Get("code_challenge_method"),
	}
	app, err := grants.Of(s.store).App(ctx, req.ClientID)
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			s.log.Error("look up app", zap.Error(err))
		}
		return nil, &pageError{"The application that sent you here is unknown to this server. Ask its developer to register it again."}, nil
	}
	req.app = app
	if req.RedirectURI == "" || !redirectRegistered(app.RedirectURIs, req.RedirectURI) {
		return nil, &pageError{"The redirect URI in this request is not registered for " + app.Name + ", so this server will not send you there."}, nil
	}
	for _, k := range []string{"response_type", "scope", "state", "code_challenge", "code_challenge_method"} {
		if len(v[k]) > 1 || len(v.Get(k)) > maxParamLen {
			return req, nil, invalidRequest("The parameter " + k + " is repeated or too long.")
		}
	}
	if v.Get("response_type") == "" {
		// Doorkeeper 5.8 PreAuthorization validates presence first.
		return req, nil, invalidRequest("Missing required parameter: response_type.")
	}
	if v.Get("response_type") != "code" {
		return req, nil, &oauthErr{Code: "unsupported_response_type", Description: "The authorization server does not support this response type."}
	}
	scope := req.Scope
	if strings.TrimSpace(scope) == "" {
		scope = "read"
	}
	scopes, ok := scopesFor(app, scope)
	if !ok {
		return req, nil, errInvalidScope
	}
	req.scopes = scopes
	req.Scope = strings.Join(scopes, " ")
	switch {
	case req.CodeChallenge == "" && req.CodeChallengeMethod == "":
	case req.CodeChallenge == "":
		return req, nil, invalidRequest("Missing required parameter: code_challenge.")
	case req.CodeChallengeMethod != "S256":
		return req, nil, invalidRequest("The code_challenge_method must be S256.")
	case !validChallenge(req.CodeChallenge):
		return req, nil, invalidRequest("The code_challenge must be the unpadded base64url SHA-256 of the verifier.")
	}
	if app.Client != nil {
		if oerr := parseOIDCRequest(req, v); oerr != nil {
			return req, nil, oerr
		}
	}
	return req, nil, nil
}

// redirectRegistered reports whether uri is one of the registered redirect
// URIs (redirectMatches).
func redirectRegistered(registered []string, uri string) bool {
	for _, r := range registered {
		if redirectMatches(r, uri) {
			return true
		}
	}
	return false
}

// redirectMatches is the redirect URI rule: exact match, except that a
// plain-http URI on the loopback IP literals 127.0.0.1 and [::1] matches
// the same URI on any port (RFC 8252 section 7.3; Doorkeeper 5.8
// lib/doorkeeper/oauth/helpers/uri_checker.rb URIChecker.matches? drops
// both ports when both hosts are loopback). localhost stays exact, as RFC
// 8252 section 8.3 advises against it.
func redirectMatches(registered, uri string) bool {
	if registered == uri {
		return true
	}
	a, ok := loopbackWithoutPort(registered)
	if !ok {
		return false
	}
	b, ok := loopbackWithoutPort(uri)
	return ok && a == b
}

// loopbackWithoutPort is uri without its port if it is an http URI on
// 127.0.0.1 or [::1].
func loopbackWithoutPort(uri string) (string, bool) {
	const scheme = "http://"
	if !strings.HasPrefix(uri, scheme) {
		return "", false
	}
	rest := uri[len(scheme):]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	host := authority
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.HasSuffix(authority, "]") {
		host = authority[:i]
		port := authority[i+1:]
		if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return "", false
		}
	}
	if host != "127.0.0.1" && host != "[::1]" {
		return "", false
	}
	return scheme + host + rest[end:], true
}

func validChallenge(c string) bool {
	if len(c) != 43 {
		return false
	}
	for _, r := range c {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func truthy(s string) bool {
	switch strings.ToLower(s) {
	case "1", "true", "t", "on", "yes":
		return true
	}
	return false
}

func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	p := s.opts.Pages
	if p == nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("Sign-in is not available on this server.\n"))
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.showConsent(w, r)
	case http.MethodPost:
		p.Protect(http.HandlerFunc(s.decide)).ServeHTTP(w, r)
	default:
		s.refuseMethod(w, r)
	}
}

// refuseMethod answers 405 to a method other than GET, HEAD and POST on a
// page this package serves.
func (s *Server) refuseMethod(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "GET, POST")
	s.errorPage(w, r, http.StatusMethodNotAllowed, "This page can only be opened or submitted.")
}

// memberForm starts a settings page: the signed-in member (else the
// sign-in page), and whether a form was posted (and read); ok is false
// when it has answered r (sign-in, 405, a form it could not read).
func (s *Server) memberForm(w http.ResponseWriter, r *http.Request) (m *members.Member, posted, ok bool) {
	p := s.opts.Pages
	if m, ok = p.RequireMember(w, r); !ok {
		return nil, false, false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return m, false, true
	case http.MethodPost:
		return m, true, p.ParseForm(w, r)
	}
	s.refuseMethod(w, r)
	return nil, false, false
}

func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, status int, text string) {
	s.opts.Pages.Render(w, r, status, "An error has occurred", messageTmpl, message{Text: text})
}

func (s *Server) showConsent(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req, ok := s.readAuthRequest(w, r, q)
	if !ok {
		return
	}
	if req.app.Client != nil {
		s.authorizeOIDC(w, r, req, q)
		return
	}
	p := s.opts.Pages
	if truthy(q.Get("force_login")) {
		// The sign-in form, for any member (apps add or switch accounts
		// with force_login), coming back without force_login but with
		// prompt=consent: Mastodon shows the consent page after
		// force_login even when a grant matches (see skipConsent). The
		// form signs nobody out: a session is replaced only once the
		// sign-in completes, so a link from another site changes nothing.
		q.Del("force_login")
		q.Set("prompt", "consent")
		p.SignInForm(w, r, AuthorizePath+"?"+q.Encode())
		return
	}
	m, ok := p.RequireMember(w, r)
	if !ok {
		return
	}
	s.askConsent(w, r, q, req, m, "Authorize "+req.app.Name, consentTmpl, func(c consentPage) any {
		return struct {
			consentPage
			Website *url.URL
			Scopes  []scopeItem
			OOB     bool
		}{c, websiteOf(req.app), describeScopes(req.scopes), req.RedirectURI == OOBRedirectURI}
	})
}

// askConsent grants at once a GET the member's grants already cover
// (skipConsent), else shows the consent page tmpl with data(what both
// consent pages show).
func (s *Server) askConsent(w http.ResponseWriter, r *http.Request, q url.Values, req *authRequest, m *members.Member, title string, tmpl *template.Template, data func(consentPage) any) {
	if r.Method == http.MethodGet && s.skipConsent(r.Context(), q, m, req) {
		s.grant(w, r, req, m)
		return
	}
	p := s.opts.Pages
	// The approval answers with a redirect to the client; browsers apply
	// form-action to it, so the client's origin must be allowed.
	w.Header().Set("Content-Security-Policy", p.ContentSecurityPolicy(formActionSource(req.RedirectURI)))
	p.Render(w, r, http.StatusOK, title, tmpl, data(s.consentPage(req, m)))
}

// consentPage is what both consent pages (Mastodon apps' and operator
// clients') show of the request.
type consentPage struct {
	App            *grants.App
	Member         *members.Member
	SiteName       string
	Req            *authRequest
	RedirectTarget string
}

func (s *Server) consentPage(req *authRequest, m *members.Member) consentPage {
	return consentPage{req.app, m, s.opts.InstanceTitle, req, redirectTarget(req.RedirectURI)}
}

// skipConsent reports whether the member already granted this app every
// scope it asks for, with a token still live: then, as Mastodon does
// (mastodon/mastodon app/controllers/oauth/authorizations_controller.rb
// render_success @ 002d505: skip when matching_token? unless force_login;
// Doorkeeper d0cd44a app/controllers/doorkeeper/authorizations_controller.rb
// matching_token?), the code is issued without asking again. Doorkeeper
// matches a token with the same scopes; a grant that covers them is
// enough here (read covers read:statuses). prompt=consent (OpenID Connect,
// and what force_login comes back with) always asks.
func (s *Server) skipConsent(ctx context.Context, q url.Values, m *members.Member, req *authRequest) bool {
	if q.Get("prompt") == "consent" {
		return false
	}
	ok, err := grants.Of(s.store).Covers(ctx, m.ID, req.app.ClientID, req.scopes)
	if err != nil {
		// The consent page still works: ask instead.
		s.log.Error("look up the member's grant", zap.Error(err))
		return false
	}
	return ok
}

// websiteOf is the app's website when it is an http(s) URL with a host.
func websiteOf(app *grants.App) *url.URL {
	u, err := url.Parse(app.Website)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil
	}
	return u
}

// redirectTarget names where the member goes after deciding.
func redirectTarget(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	if u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + ":"
}

// formActionSource is the CSP source expression for a redirect URI.
func formActionSource(uri string) string {
	if uri == OOBRedirectURI {
		return ""
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return ""
	}
	if u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		return u.Scheme + "://" + u.Host
	}
	return strings.ToLower(u.Scheme) + ":"
}

// decide handles the consent form.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "The form could not be read. Go back and try again.")
		return
	}
	req, ok := s.readAuthRequest(w, r, r.PostForm)
	if !ok {
		return
	}
	p := s.opts.Pages
	m := p.CurrentMember(r)
	if m == nil {
		// Signed out meanwhile: sign in and come back to the consent page.
		back := r.Clone(r.Context())
		back.Method = http.MethodGet
		back.URL.RawQuery = r.PostForm.Encode()
		p.RequireMember(w, back)
		return
	}
	switch r.PostForm.Get("decision") {
	case "approve":
	case "deny":
		s.log.Debug("authorization declined", zap.String("app_id", req.app.ID), zap.String("member_id", m.ID))
		s.redirectError(w, r, req, &oauthErr{Code: "access_denied", Description: "The resource owner or authorization server denied the request."})
		return
	default:
		s.errorPage(w, r, http.StatusBadRequest, "Choose Authorize or Deny.")
		return
	}
	s.grant(w, r, req, m)
}

// grant issues an authorization code to the app for the member and sends
// it: shown on a page for the out-of-band redirect URI, else on the
// redirect with state.
func (s *Server) grant(w http.ResponseWriter, r *http.Request, req *authRequest, m *members.Member) {
	p := s.opts.Pages
	// Counted before the code exists, so that past the limit nothing is
	// signed or stored; given back when no code came of it.
	if s.codesIssued != nil {
		if res := s.codesIssued.Allow(r.Context(), m.ID); !res.Allowed {
			s.tooManyCodes(w, r, req, m, res)
			return
		}
	}
	code, err := s.createCode(r, req, m)
	if err != nil && s.codesIssued != nil {
		s.codesIssued.Undo(r.Context(), m.ID)
	}
	if errors.Is(err, members.ErrCredentialsChanged) || errors.Is(err, members.ErrSuspended) {
		// The member's credentials changed since its session was read:
		// that session is over. Sign in again and come back.
		back := r.Clone(r.Context())
		if r.Method == http.MethodPost {
			back.Method = http.MethodGet
			back.URL.RawQuery = r.PostForm.Encode()
		}
		back.Header.Del("Cookie")
		p.RequireMember(w, back)
		return
	}
	if err != nil {
		s.storeFailurePage(w, r, err, "create authorization code", "The authorization could not be saved. Try again later.")
		return
	}
	s.log.Debug("authorization granted", zap.String("app_id", req.app.ID), zap.String("member_id", m.ID), zap.Strings("scopes", req.scopes))
	if req.RedirectURI == OOBRedirectURI {
		p.Render(w, r, http.StatusOK, "Authorization code", codeTmpl, struct{ AppName, Code string }{req.app.Name, code})
		return
	}
	params := url.Values{"code": {code}}
	if req.State != "" {
		params.Set("state", req.State)
	}
	s.opts.KeepOutOfAccessLog(r)
	redirect(w, redirectWith(req.RedirectURI, params))
}

// tooManyCodes answers an authorization past AuthorizeLimit: a page of
// the member pages with 429 and Retry-After, issuing nothing. A person is
// at the browser here (the code is issued on a consent page's approval or
// when the consent is skipped), and a page tells them what happened and to
// wait, which error=temporarily_unavailable on the redirect URI (RFC 6749
// section 4.1.2.1, meant for an overloaded server) would not: the app
// would show its own words for it, or start the authorization over at
// once, asking again. Mastodon has no limit on this page (rack-attack's
// throttles, config/initializers/rack_attack.rb @ 020228d, and Doorkeeper
// has the error's text but nothing that sends it). The exception is
// prompt=none: no page may be shown then (OpenID Connect Core section
// 3.1.2.6; the relying party often waits in a hidden frame for the
// redirect), so the error goes back on the redirect URI as the
// specification's temporarily_unavailable.
func (s *Server) tooManyCodes(w http.ResponseWriter, r *http.Request, req *authRequest, m *members.Member, res ratelimit.Result) {
	s.log.Warn("authorization refused: too many codes issued to the member", zap.String("app_id", req.app.ID), zap.String("member_id", m.ID))
	if req.oidc != nil && req.oidc.Prompt == "none" {
		s.redirectError(w, r, req, &oauthErr{Code: "temporarily_unavailable", Description: "Too many authorizations for this member in a short time; try again later."})
		return
	}
	metrics.RateLimited(metrics.LimitOAuthAuthorize)
	rateLimitHeaders(w, res)
	s.opts.Pages.Render(w, r, http.StatusTooManyRequests, "Too many authorizations", messageTmpl, message{
		Text:   "You have authorized apps here many times in a short time, so this site is not issuing more for now. " + req.app.Name + " got nothing.",
		Detail: "Wait a little and try again.",
	})
}

// redirectError sends an OAuth error back to the client with state, or
// shows it for the out-of-band redirect URI.
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, req *authRequest, e *oauthErr) {
	if req.RedirectURI == OOBRedirectURI {
		// A person reads this page: plain words, not the protocol's code.
		status, text, detail := http.StatusBadRequest, req.app.Name+" sent a request this site cannot accept.", "Tell its developer: "+e.Description
		switch e.Code {
		case "access_denied":
			status, text, detail = http.StatusOK, "You denied "+req.app.Name+" access to your account.", "It got nothing. You can close this page."
		case "invalid_scope":
			detail = "It asked for access it did not register for, or that this site does not know. Tell its developer."
		}
		s.opts.Pages.Render(w, r, status, "Authorization ended", messageTmpl, message{Text: text, Detail: detail})
		return
	}
	params := url.Values{"error": {e.Code}, "error_description": {e.Description}}
	if req.State != "" {
		params.Set("state", req.State)
	}
	redirect(w, redirectWith(req.RedirectURI, params))
}

func redirect(w http.ResponseWriter, to string) {
	h := w.Header()
	h.Set("Location", to)
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusFound)
}
