package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// maxParamLen bounds every token-endpoint parameter.
const maxParamLen = 2048

// oauthErr is an RFC 6749 error response.
type oauthErr struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
	// status and retryAfter, when set, replace server_error's 500: the
	// store refused for now (storage.Unavailable: 503 or 507).
	status     int
	retryAfter time.Duration
	// limited, when set, is a refused rate-limit result: 429 with
	// Retry-After and the X-RateLimit-* headers.
	limited *ratelimit.Result
	// basic: invalid_client for a client that authenticated with HTTP
	// Basic, challenged in that scheme (errInvalidClientBasic).
	basic bool
}

// serverError is server_error for err: with storage.Unavailable's status
// and Retry-After, and a description saying so, when the store refused
// for now (disk full, a restore, a reload), else errServer.
func serverError(err error) *oauthErr {
	status, retry, ok := storage.Unavailable(err)
	if !ok {
		return errServer
	}
	return &oauthErr{Code: "server_error", Description: "The authorization server cannot store this now: " + err.Error(), status: status, retryAfter: retry}
}

func (e *oauthErr) Error() string { return e.Code }

// Error descriptions, in Doorkeeper's words.
var (
	errInvalidClient = &oauthErr{Code: "invalid_client", Description: "Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method."}
	errInvalidGrant  = &oauthErr{Code: "invalid_grant", Description: "The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client."}
	errInvalidScope  = &oauthErr{Code: "invalid_scope", Description: "The requested scope is invalid, unknown, or malformed."}
	errUnsupported   = &oauthErr{Code: "unsupported_grant_type", Description: "The authorization grant type is not supported by the authorization server."}
	errServer        = &oauthErr{Code: "server_error", Description: "The authorization server encountered an unexpected condition which prevented it from fulfilling the request."}
)

// errInvalidClientBasic is invalid_client for an operator client that sent
// HTTP Basic credentials: RFC 6749 section 5.2 wants the 401's
// WWW-Authenticate in the scheme the client used. (A Mastodon app gets
// Doorkeeper's Bearer challenge whatever it sent, as Mastodon answers.)
var errInvalidClientBasic = &oauthErr{Code: "invalid_client", Description: errInvalidClient.Description, basic: true}

func invalidRequest(desc string) *oauthErr {
	return &oauthErr{Code: "invalid_request", Description: desc}
}

// errTooLarge answers a body longer than allowed, with 413.
var errTooLarge = &oauthErr{Code: "invalid_request", Description: "The request body is too large."}

// bodyError is the answer to a body that could not be read or parsed: 413
// when it is longer than allowed, else invalid_request.
func bodyError(err error) *oauthErr {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errTooLarge
	}
	return invalidRequest("The request body could not be parsed.")
}

// writeOAuthError writes e as RFC 6749 JSON: invalid_client is 401 with a
// WWW-Authenticate challenge, server_error 500, everything else 400.
func writeOAuthError(w http.ResponseWriter, e *oauthErr) {
	status := http.StatusBadRequest
	switch e.Code {
	case "invalid_client":
		status = http.StatusUnauthorized
		if e.basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="OAuth client", charset="UTF-8"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="Doorkeeper", error="invalid_client", error_description="`+e.Description+`"`)
		}
	case "server_error":
		status = http.StatusInternalServerError
		if e.status != 0 {
			status = e.status
			w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(e.retryAfter)))
		}
	}
	if e == errTooLarge {
		status = http.StatusRequestEntityTooLarge
	}
	if e.limited != nil {
		status = http.StatusTooManyRequests
		rateLimitHeaders(w, *e.limited)
	}
	noStore(w)
	writeJSON(w, status, e)
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

// tokenResponse is the spec's token response: no refresh_token, no expires_in.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	Scope       string `json:"scope"`
	CreatedAt   int64  `json:"created_at"`
}

// decodeParams reads a form-encoded (or, as Rails accepts, JSON) body into
// single-valued parameters. A parameter sent twice is invalid_request
// (RFC 6749 section 3.2); so is a body that can't be parsed.
func decodeParams(r *http.Request, maxBytes int64) (map[string]string, *oauthErr) {
	body := http.MaxBytesReader(nil, r.Body, maxBytes)
	ct := r.Header.Get("Content-Type")
	if ct != formType {
		ct, _, _ = mime.ParseMediaType(ct)
	}
	out := make(map[string]string, 8)
	if ct == formType && r.URL.RawQuery == "" {
		// The usual token request: read without building url.Values twice
		// (r.Form, r.PostForm).
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, bodyError(err)
		}
		if perr := parseForm(string(b), out); perr != nil {
			return nil, perr
		}
	} else if ct == "multipart/form-data" {
		// Rails parses multipart bodies too (Mastodon.py posts files this
		// way, some clients every form). Files are no parameters: refused.
		r.Body = body
		if err := r.ParseMultipartForm(maxBytes); err != nil {
			return nil, invalidRequest("The request body could not be parsed.")
		}
		if len(r.MultipartForm.File) > 0 {
			_ = r.MultipartForm.RemoveAll()
			return nil, invalidRequest("The request body could not be parsed.")
		}
		if perr := singleValues(r.MultipartForm.Value, out); perr != nil {
			return nil, perr
		}
	} else if ct == "application/json" {
		var raw map[string]json.RawMessage
		if err := json.NewDecoder(body).Decode(&raw); err != nil {
			return nil, bodyError(err)
		}
		for k, v := range raw {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, invalidRequest("The parameter " + safeName(k) + " must be a string.")
			}
			out[k] = s
		}
	} else {
		// Other content types (no parameters) and a query string (whose
		// syntax ParseForm checks too) take net/http's way.
		r.Body = body
		if err := r.ParseForm(); err != nil {
			return nil, bodyError(err)
		}
		if perr := singleValues(r.PostForm, out); perr != nil {
			return nil, perr
		}
	}
	for k, v := range out {
		if len(v) > maxParamLen {
			return nil, invalidRequest("The parameter " + safeName(k) + " is too long.")
		}
	}
	return out, nil
}

const formType = "application/x-www-form-urlencoded"

// parseForm reads form-encoded parameters into out (url.ParseQuery's
// syntax and limits).
func parseForm(form string, out map[string]string) *oauthErr {
	vals, err := url.ParseQuery(form)
	if err != nil {
		return invalidRequest("The request body could not be parsed.")
	}
	return singleValues(vals, out)
}

// singleValues copies vals into out; a parameter sent twice is an error.
func singleValues(vals url.Values, out map[string]string) *oauthErr {
	for k, v := range vals {
		if len(v) != 1 {
			return invalidRequest("The parameter " + safeName(k) + " was sent more than once.")
		}
		out[k] = v[0]
	}
	return nil
}

// safeName is a parameter name fit to echo in an error description.
func safeName(k string) string {
	for _, c := range k {
		if !(c == '_' || c == '[' || c == ']' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') || len(k) > 40 {
			return "(unnamed)"
		}
	}
	return k
}

// clientAuth authenticates the client from client_id and client_secret in
// the body. HTTP Basic authentication is not supported (spec), so a Basic
// header is invalid_client. Any other Authorization header (a Bearer token:
// Mastodon.py 1.8 authentication.py revoke_access_token and megalodon 10.3
// mastodon.ts revokeToken send the app's token along) is not client
// authentication at all and is ignored, as Doorkeeper 5.8's
// ClientAuthentication only reads Basic credentials from the header.
func (s *Server) clientAuth(r *http.Request, p map[string]string) (*grants.App, *oauthErr) {
	if _, _, basic, _ := basicCredentials(r); basic {
		return nil, errInvalidClient
	}
	id, secret := p["client_id"], p["client_secret"]
	if id == "" || secret == "" {
		return nil, errInvalidClient
	}
	return s.clientFound(grants.Of(s.store).AuthenticateClient(r.Context(), id, secret))
}

// clientFound turns a client lookup's result into the token endpoint's
// answer: an unknown client or wrong secret is invalid_client.
func (s *Server) clientFound(app *grants.App, err error) (*grants.App, *oauthErr) {
	if errors.Is(err, storage.ErrNotFound) {
		return nil, errInvalidClient
	}
	if err != nil {
		s.log.Error("authenticate client", zap.Error(err))
		return nil, serverError(err)
	}
	return app, nil
}

// limitedParams are the parameters of a request to an endpoint under the
// token limit (revocation, introspection); ok is false once it has
// answered a request over the limit or with unreadable parameters.
func (s *Server) limitedParams(w http.ResponseWriter, r *http.Request) (map[string]string, bool) {
	if !s.limitTokens(w, r) {
		return nil, false
	}
	p, perr := decodeParams(r, s.opts.MaxBodyBytes)
	if perr != nil {
		writeOAuthError(w, perr)
		return nil, false
	}
	return p, true
}

func (s *Server) limitTokens(w http.ResponseWriter, r *http.Request) bool {
	if s.tokens == nil {
		return true
	}
	if res := s.tokens.Allow(r.Context(), ratelimit.AddressKey(s.opts.ClientIP(r))); !res.Allowed {
		metrics.RateLimited(metrics.LimitOAuthToken)
		tooMany(w, res)
		return false
	}
	return true
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if !s.limitTokens(w, r) {
		return
	}
	fail := func(e *oauthErr) {
		metrics.TokenError(e.Code)
		writeOAuthError(w, e)
	}
	p, perr := decodeParams(r, s.opts.MaxBodyBytes)
	if perr != nil {
		fail(perr)
		return
	}
	if s.isOperatorClient(r, p) {
		s.serveOIDCToken(w, r, p)
		return
	}
	grant := p["grant_type"]
	if grant != "authorization_code" && grant != "client_credentials" {
		fail(errUnsupported)
		return
	}
	app, cerr := s.clientAuth(r, p)
	if cerr != nil {
		fail(cerr)
		return
	}
	var tok *grants.AccessToken
	var secret string
	var oerr *oauthErr
	if grant == "authorization_code" {
		tok, secret, oerr = s.exchangeCode(r.Context(), app, p)
	} else {
		tok, secret, oerr = s.clientCredentials(r.Context(), app, p)
	}
	if oerr != nil {
		fail(oerr)
		return
	}
	metrics.TokenIssued(grant)
	s.log.Debug("issued token", zap.String("grant_type", grant), zap.String("app_id", app.ID),
		zap.String("token_id", tok.ID), zap.Bool("member", tok.MemberID != ""))
	noStore(w)
	writeJSON(w, http.StatusOK, tokenResponse{
		AccessToken: secret,
		TokenType:   "Bearer",
		Scope:       strings.Join(tok.Scopes, " "),
		CreatedAt:   tok.CreatedAt.Unix(),
	})
}

// exchangeCode exchanges an authorization code. A failed exchange of an
// existing code (another client, another redirect_uri, a wrong or missing
// PKCE verifier, a code used before) burns the code (storage) and counts
// against the member who granted it: past FailedCodeLimit in
// FailedCodeWindow, that member's codes are refused with 429 (and burnt
// too) until the window has moved on; see docs/security.md.
func (s *Server) exchangeCode(ctx context.Context, app *grants.App, p map[string]string) (*grants.AccessToken, string, *oauthErr) {
	code, redirectURI, verifier := p["code"], p["redirect_uri"], p["code_verifier"]
	if code == "" {
		return nil, "", invalidRequest("Missing required parameter: code.")
	}
	if redirectURI == "" {
		return nil, "", invalidRequest("Missing required parameter: redirect_uri.")
	}
	// reserved: one failure was counted for the code's member before the
	// checks (so concurrent attempts stay within the limit); it is given
	// back unless the exchange fails them.
	reserved := ""
	// uncounted: the shared count could not be made; the limit fails
	// closed (503 as a store failure, the code burnt as after any refusal).
	var uncounted error
	tok, secret, err := grants.Of(s.store).ExchangeCode(ctx, code, func(c *grants.Code) error {
		// Counted once, also when the store runs the check again (a
		// transaction retried after a conflict).
		if s.failedCodes != nil && reserved == "" {
			res := s.failedCodes.Allow(ctx, c.MemberID)
			if !res.Allowed && res.Err != nil { // the limit fails closed
				uncounted = res.Err
				return res.Err
			}
			if !res.Allowed {
				return errTooManyFailedCodes(res)
			}
			reserved = c.MemberID
		}
		if subtle.ConstantTimeCompare([]byte(c.ClientID), []byte(app.ClientID)) != 1 || !redirectMatches(c.RedirectURI, redirectURI) {
			return errInvalidGrant
		}
		if c.CodeChallenge == "" {
			if verifier != "" {
				return errInvalidGrant
			}
			return nil
		}
		if verifier == "" {
			return invalidRequest("Missing required parameter: code_verifier.")
		}
		if !verifierMatches(verifier, c.CodeChallenge) {
			return errInvalidGrant
		}
		return nil
	})
	// A code counts at most twice: when a failed check burns it, and when
	// its first reuse revokes the token issued from it (refused.First);
	// further uses of a burnt code change nothing and count nothing, so one
	// leaked code cannot use up its member's limit.
	var refused *grants.CodeRefusal
	failed := errors.As(err, &refused) && refused.First
	var oe *oauthErr
	if failed && (errors.As(err, &oe) && oe.limited != nil || uncounted != nil) {
		failed = false // refused by the limit: not a failure of its own
	}
	switch {
	case reserved != "" && !failed:
		s.failedCodes.Undo(ctx, reserved)
	case reserved == "" && failed && s.failedCodes != nil:
		s.failedCodes.Allow(ctx, refused.MemberID) // a code used before: check never ran
	}
	switch {
	case err == nil:
		return tok, secret, nil
	case errors.As(err, &oe):
		if oe.limited != nil {
			metrics.RateLimited(metrics.LimitOAuthFailedCode)
			s.log.Warn("refused an authorization code: too many failed exchanges for its member",
				zap.String("app_id", app.ID), zap.String("member_id", refused.MemberID))
		}
		return nil, "", oe
	case errors.Is(err, grants.ErrCodeUsed):
		s.log.Warn("authorization code used twice; revoked the token issued from it", zap.String("app_id", app.ID))
		return nil, "", errInvalidGrant
	default:
		return nil, "", s.grantRefused(err, "exchange code")
	}
}

// grantRefused answers an error of the store for a grant, past the refusals
// particular to the grant type: a grant or member gone or suspended is
// invalid_grant, anything else a server error.
func (s *Server) grantRefused(err error, doing string) *oauthErr {
	if errors.Is(err, storage.ErrNotFound) || errors.Is(err, members.ErrSuspended) {
		return errInvalidGrant
	}
	s.log.Error(doing, zap.Error(err))
	return serverError(err)
}

// errTooManyFailedCodes is the answer to a code whose member is over the
// failed-exchange limit: invalid_grant (the code is burnt, as after any
// failed exchange) with 429 and Retry-After, so that the client starts a
// new authorization once the wait is over.
func errTooManyFailedCodes(res ratelimit.Result) *oauthErr {
	return &oauthErr{
		Code: "invalid_grant",
		Description: "Too many failed authorization code exchanges for this account; this code is revoked. " +
			"Authorize again after " + strconv.Itoa(ratelimit.RetryAfterSeconds(res.RetryAfter)) + " seconds.",
		limited: &res,
	}
}

// verifierMatches checks an RFC 7636 S256 verifier against its challenge.
func verifierMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	for _, c := range verifier {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

func (s *Server) clientCredentials(ctx context.Context, app *grants.App, p map[string]string) (*grants.AccessToken, string, *oauthErr) {
	scopes := app.Scopes
	if sc, ok := p["scope"]; ok && strings.TrimSpace(sc) != "" {
		req, ok := parseScopes(sc)
		if !ok || !covered(req, app.Scopes) {
			return nil, "", errInvalidScope
		}
		scopes = req
	}
	tok, secret, err := grants.Of(s.store).CreateAppToken(ctx, app.ClientID, scopes)
	if errors.Is(err, storage.ErrNotFound) {
		// Removed since it authenticated (an unused app, a day on).
		return nil, "", errInvalidClient
	}
	if err != nil {
		s.log.Error("issue app token", zap.Error(err))
		return nil, "", serverError(err)
	}
	return tok, secret, nil
}

// serveRevoke is POST /oauth/revoke (RFC 7009): 200 {} for any token value
// once the client is authenticated; only that client's tokens are revoked.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	p, ok := s.limitedParams(w, r)
	if !ok {
		return
	}
	if s.isOperatorClient(r, p) {
		s.serveOIDCRevoke(w, r, p)
		return
	}
	app, cerr := s.clientAuth(r, p)
	if cerr != nil {
		writeOAuthError(w, cerr)
		return
	}
	if err := grants.Of(s.store).RevokeToken(r.Context(), app.ClientID, p["token"]); err != nil {
		s.log.Error("revoke token", zap.Error(err))
		writeOAuthError(w, serverError(err))
		return
	}
	noStore(w)
	writeJSON(w, http.StatusOK, struct{}{})
}

// bearer authenticates the request's bearer token (access.Bearer: the
// Authorization header only, tokens are kept out of URLs) and checks the
// scopes route needs. On failure it has answered as Mastodon does.
func (s *Server) bearer(w http.ResponseWriter, r *http.Request, route access.Route) (*grants.AccessToken, *members.Member, bool) {
	c, err := s.auth.Authenticate(r, route)
	switch {
	case err == nil && c != nil:
		return c.OAuth, c.Member, true
	case err == nil, errors.Is(err, access.ErrMalformed):
		unauthorized(w)
	case errors.Is(err, members.ErrSuspended):
		forbidden(w, "invalid_token", "Your login is currently disabled")
	case errors.Is(err, access.ErrInvalidToken):
		// An unknown token names no member (it is looked up by the digest
		// of all of it): it counts against the client address's token
		// limit, and past it the answer is 429.
		if s.tokens != nil {
			if res := s.tokens.Allow(r.Context(), ratelimit.AddressKey(s.opts.ClientIP(r))); !res.Allowed {
				metrics.RateLimited(metrics.LimitOAuthToken)
				tooMany(w, res)
				return nil, nil, false
			}
		}
		unauthorized(w)
	case access.IsScopeError(err):
		forbidden(w, "insufficient_scope", "This action is outside the authorized scopes")
	default:
		writeStoreFailure(w, err, "Something went wrong; try again later")
	}
	return nil, nil, false
}

func unauthorized(w http.ResponseWriter) {
	challenge(w, http.StatusUnauthorized, "invalid_token", "The access token is invalid")
}

// forbidden answers 403 for a valid token that may not do this: too few
// scopes (insufficient_scope) or a disabled login (invalid_token).
func forbidden(w http.ResponseWriter, code, message string) {
	challenge(w, http.StatusForbidden, code, message)
}

// challenge answers a protected resource's 401/403 with Mastodon's JSON
// error and the RFC 6750 section 3 challenge carrying error=, as
// Doorkeeper's ErrorResponse#headers does.
func challenge(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="Doorkeeper", error="`+code+`", error_description="`+message+`"`)
	writeJSON(w, status, map[string]string{"error": message})
}

// redirectWith adds params to a registered redirect URI, keeping the URI
// (and its own query string) exactly as registered.
func redirectWith(redirectURI string, params url.Values) string {
	sep := "?"
	if strings.Contains(redirectURI, "?") {
		sep = "&"
		if strings.HasSuffix(redirectURI, "?") || strings.HasSuffix(redirectURI, "&") {
			sep = ""
		}
	}
	return redirectURI + sep + params.Encode()
}
