package oauth

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// oidcRequest is what an operator client's authorization request adds.
type oidcRequest struct {
	Nonce  string
	Prompt string // "", "none", "login" or "consent"
	// MaxAge is the max_age parameter in seconds; -1 when absent.
	MaxAge int
}

// Nonce is the request's nonce, for the consent form.
func (r *authRequest) Nonce() string {
	if r.oidc == nil {
		return ""
	}
	return r.oidc.Nonce
}

// scopesFor parses a requested scope string for app: Mastodon's scopes,
// covered by the registration, for an app of /api/v1/apps; the OpenID
// scopes the operator registered for an operator client.
func scopesFor(app *grants.App, scope string) ([]string, bool) {
	if app.Client == nil {
		scopes, ok := parseScopes(scope)
		return scopes, ok && covered(scopes, app.Scopes)
	}
	if len(scope) > maxScopeLen {
		return nil, false
	}
	var out []string
	for _, sc := range strings.Fields(scope) {
		if !grants.IsOIDCScope(sc) || !contains(app.Scopes, sc) {
			return nil, false
		}
		if !contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, len(out) > 0
}

// parseOIDCRequest checks what an operator client's authorization request
// adds to Mastodon's, after the common checks passed.
func parseOIDCRequest(req *authRequest, v url.Values) *oauthErr {
	for _, k := range []string{"nonce", "prompt", "max_age", "response_mode"} {
		if len(v[k]) > 1 || len(v.Get(k)) > maxParamLen {
			return invalidRequest("The parameter " + k + " is repeated or too long.")
		}
	}
	// Request objects are not supported (Core section 6); say so in the
	// words the specification gives.
	if v.Get("request") != "" {
		return &oauthErr{Code: "request_not_supported", Description: "Request objects (the request parameter) are not supported."}
	}
	if v.Get("request_uri") != "" {
		return &oauthErr{Code: "request_uri_not_supported", Description: "The request_uri parameter is not supported."}
	}
	if m := v.Get("response_mode"); m != "" && m != "query" {
		return invalidRequest("The only response_mode is query.")
	}
	if req.app.Client.Public && req.CodeChallenge == "" {
		return invalidRequest("A public client must send a PKCE code_challenge (S256).")
	}
	o := &oidcRequest{Nonce: v.Get("nonce"), MaxAge: -1}
	for _, p := range strings.Fields(v.Get("prompt")) {
		switch p {
		case "none", "login", "consent":
		default:
			return invalidRequest("The prompt value " + safeName(p) + " is not supported; use none, login or consent.")
		}
		if o.Prompt != "" && o.Prompt != p {
			return invalidRequest("The prompt none cannot be combined with another value.")
		}
		o.Prompt = p
	}
	if ma := v.Get("max_age"); ma != "" {
		n, err := strconv.Atoi(ma)
		if err != nil || n < 0 {
			return invalidRequest("The max_age must be a non-negative number of seconds.")
		}
		o.MaxAge = n
	}
	req.oidc = o
	return nil
}

// signedIn is the member signed in on r and when the session began (the
// sign-in's auth_time), or nil.
func (s *Server) signedIn(r *http.Request) (*members.Member, time.Time) {
	m, sess := s.signedInSession(r)
	if sess == nil {
		return nil, time.Time{}
	}
	return m, sess.CreatedAt
}

// signedInSession is the member and session of r's cookie, or nils.
func (s *Server) signedInSession(r *http.Request) (*members.Member, *members.Session) {
	c, err := r.Cookie(account.CookieName)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	m, sess, err := members.Of(s.store).SessionAndMember(r.Context(), c.Value)
	if err != nil || m == nil || m.Suspended {
		return nil, nil
	}
	return m, sess
}

// authorizeOIDC is the authorization page for an operator client:
// prompt and max_age decide whether the member signs in again, prompt=none
// answers at once (Core section 3.1.2.6 errors), and the consent page is
// skipped when the member's grant already covers the request.
func (s *Server) authorizeOIDC(w http.ResponseWriter, r *http.Request, req *authRequest, q url.Values) {
	p := s.opts.Pages
	o := req.oidc
	m, authTime := s.signedIn(r)
	tooOld := m != nil && o.MaxAge >= 0 && time.Since(authTime) > time.Duration(o.MaxAge)*time.Second
	if o.Prompt == "none" {
		switch {
		case m == nil || tooOld:
			s.redirectError(w, r, req, &oauthErr{Code: "login_required", Description: "The member is not signed in (recently enough)."})
		case !s.skipConsent(r.Context(), q, m, req):
			s.redirectError(w, r, req, &oauthErr{Code: "consent_required", Description: "The member has not granted this client what it asks for."})
		default:
			s.grant(w, r, req, m)
		}
		return
	}
	if o.Prompt == "login" || tooOld || m == nil {
		// The sign-in form, then back here without what asked for it, so
		// the fresh sign-in is not asked for once more. As for
		// force_login, showing the form signs nobody out: the session is
		// replaced only when the sign-in completes.
		q = cloneValues(q)
		q.Del("max_age")
		if o.Prompt == "login" {
			q.Del("prompt")
		}
		p.SignInForm(w, r, AuthorizePath+"?"+q.Encode())
		return
	}
	s.askConsent(w, r, q, req, m, "Sign in to "+req.app.Name, oidcConsentTmpl, func(c consentPage) any {
		return struct {
			consentPage
			Claims  []string
			Offline bool
		}{c, claimWords(req.scopes), contains(req.scopes, "offline_access")}
	})
}

var oidcConsentTmpl = parse("oidc_consent.html", "authorize_fields.html")

// claimWords says what the requested scopes show the client.
func claimWords(scopes []string) []string {
	var out []string
	for _, sc := range scopes {
		switch sc {
		case "openid":
			out = append(out, "that you are signed in here (an identifier of your account, not your username)")
		case "profile":
			out = append(out, "your username and display name")
		case "email":
			out = append(out, "your e-mail address")
		case "groups":
			out = append(out, "the groups the site's operator put you in")
		}
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// amr is how the member signed in (RFC 8176): as the session records it
// (a password, a one-time code, a passkey: "hwk"), or for sessions from
// before it was recorded, a password, and a one-time code when two-factor
// sign-in is on.
func amr(m *members.Member, sess *members.Session) []string {
	if sess != nil && len(sess.AMR) > 0 {
		return sess.AMR
	}
	if m.TwoFactor {
		return []string{"pwd", "otp", "mfa"}
	}
	return []string{"pwd"}
}

// createCode records the authorization code: with what its ID token and
// tokens need for an operator client.
func (s *Server) createCode(r *http.Request, req *authRequest, m *members.Member) (string, error) {
	g := grants.Of(s.store)
	if req.app.Client == nil {
		return g.CreateCode(r.Context(), req.app.ClientID, m, req.RedirectURI, req.scopes, req.CodeChallenge)
	}
	_, sess := s.signedInSession(r)
	var authTime time.Time
	if sess != nil {
		authTime = sess.CreatedAt
	}
	if authTime.IsZero() {
		authTime = time.Now()
		s.log.Warn("no session start for an OpenID authorization; auth_time is now", zap.String("member_id", m.ID))
	}
	o := &grants.CodeOIDC{
		Nonce:      req.oidc.Nonce,
		AuthTime:   authTime.UTC().Truncate(time.Second),
		AMR:        amr(m, sess),
		AccessTTL:  s.opts.AccessTokenLifetime,
		RefreshTTL: s.opts.RefreshTokenLifetime,
	}
	var sign grants.IDTokenSigner
	if contains(req.scopes, "openid") {
		// The ID token is signed now, not at the exchange: an RS256
		// signature costs several whole exchanges, and the relying party's
		// server waits on the exchange while the member's browser is
		// being redirected anyway.
		sign = func(accessToken string) (*grants.PreparedIDToken, error) {
			return s.idToken(r, req.app, m, req.scopes, idTokenGrant{Nonce: o.Nonce, AuthTime: o.AuthTime, AMR: o.AMR}, accessToken)
		}
	}
	return g.CreateCodeOIDC(r.Context(), req.app.ClientID, m, req.RedirectURI, req.scopes, req.CodeChallenge, o, sign)
}
