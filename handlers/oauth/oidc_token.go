package oauth

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// basicCredentials reads HTTP Basic client credentials (RFC 6749 section
// 2.3.1: each form-encoded, then joined by a colon). ok is false without a
// Basic header; bad is true for a Basic header that cannot be read.
func basicCredentials(r *http.Request) (id, secret string, ok, bad bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 6 || !strings.EqualFold(h[:6], "basic ") {
		return "", "", false, false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[6:]))
	if err != nil || len(raw) > 2*maxParamLen {
		return "", "", true, true
	}
	i := strings.IndexByte(string(raw), ':')
	if i < 0 {
		return "", "", true, true
	}
	id, err1 := url.QueryUnescape(string(raw[:i]))
	secret, err2 := url.QueryUnescape(string(raw[i+1:]))
	if err1 != nil || err2 != nil {
		return "", "", true, true
	}
	return id, secret, true, false
}

// isOperatorClient reports whether the token or revocation request comes
// from an operator client (by the client_id of its Basic credentials or of
// its body). Everything else takes the Mastodon paths, unchanged.
func (s *Server) isOperatorClient(r *http.Request, p map[string]string) bool {
	id := p["client_id"]
	if bid, _, ok, bad := basicCredentials(r); ok && !bad {
		id = bid
	}
	app, err := grants.Of(s.store).App(r.Context(), id)
	return err == nil && app.Client != nil
}

// operatorClientAuth authenticates an operator client by
// client_secret_basic, client_secret_post, or (a public client) its
// client_id alone. Using two methods at once is refused (RFC 6749
// section 2.3). A client refused after sending Basic credentials gets
// the Basic challenge (errInvalidClientBasic).
func (s *Server) operatorClientAuth(r *http.Request, p map[string]string) (*grants.App, *oauthErr) {
	app, e := s.operatorClient(r, p)
	if e == errInvalidClient {
		if _, _, basic, _ := basicCredentials(r); basic {
			return nil, errInvalidClientBasic
		}
	}
	return app, e
}

// operatorClient is operatorClientAuth but for the challenge.
func (s *Server) operatorClient(r *http.Request, p map[string]string) (*grants.App, *oauthErr) {
	id, secret := p["client_id"], p["client_secret"]
	if bid, bsecret, ok, bad := basicCredentials(r); ok {
		if bad {
			return nil, errInvalidClient
		}
		if secret != "" || (id != "" && id != bid) {
			return nil, invalidRequest("Authenticate the client one way only: HTTP Basic or client_secret in the body.")
		}
		id, secret = bid, bsecret
		if secret == "" {
			return nil, errInvalidClient
		}
	}
	return s.clientFound(grants.Of(s.store).AuthenticateOperatorClient(r.Context(), id, secret))
}

// oidcTokenResponse is the token response for operator clients (RFC 6749
// section 5.1, Core section 3.1.3.3).
type oidcTokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
	RefreshToken string `json:"refresh_token,omitempty"`
	IDToken      string `json:"id_token,omitempty"`
}

// serveOIDCToken is the token endpoint for an operator client: the code
// grant (with an ID token for openid) and the refresh-token grant.
func (s *Server) serveOIDCToken(w http.ResponseWriter, r *http.Request, p map[string]string) {
	fail := func(e *oauthErr) {
		metrics.TokenError(e.Code)
		writeOAuthError(w, e)
	}
	app, cerr := s.operatorClientAuth(r, p)
	if cerr != nil {
		fail(cerr)
		return
	}
	ctx := r.Context()
	var tok *grants.AccessToken
	var secret string
	grant := p["grant_type"]
	switch grant {
	case "authorization_code":
		var oerr *oauthErr
		if tok, secret, oerr = s.exchangeCode(ctx, app, p); oerr != nil {
			fail(oerr)
			return
		}
	case "refresh_token":
		var oerr *oauthErr
		if tok, secret, oerr = s.refresh(ctx, app, p); oerr != nil {
			fail(oerr)
			return
		}
	default:
		fail(errUnsupported)
		return
	}
	resp := oidcTokenResponse{
		AccessToken:  secret,
		TokenType:    "Bearer",
		ExpiresIn:    int64(time.Until(tok.ExpiresAt).Seconds()),
		Scope:        strings.Join(tok.Scopes, " "),
		RefreshToken: tok.Refresh,
	}
	if contains(tok.Scopes, "openid") && tok.Grant != nil {
		var err error
		if resp.IDToken, err = s.issuedIDToken(r, app, tok, secret); err != nil {
			s.log.Error("sign an ID token", zap.Error(err))
			fail(serverError(err))
			return
		}
	}
	metrics.TokenIssued(grant)
	s.log.Debug("issued token", zap.String("grant_type", grant), zap.String("app_id", app.ID),
		zap.String("token_id", tok.ID), zap.Bool("refresh", tok.Refresh != ""), zap.Bool("id_token", resp.IDToken != ""))
	noStore(w)
	writeJSON(w, http.StatusOK, resp)
}

// issuedIDToken is the ID token of the token response for tok (secret):
// the one signed when its code was issued (preparedIDToken), or else, for
// a refresh or a code without one, a new signature.
func (s *Server) issuedIDToken(r *http.Request, app *grants.App, tok *grants.AccessToken, secret string) (string, error) {
	if jwt := s.preparedIDToken(r, tok.Grant); jwt != "" {
		return jwt, nil
	}
	m, err := members.Of(s.store).MemberByID(r.Context(), tok.MemberID)
	if err != nil {
		return "", err
	}
	idt, err := s.idToken(r, app, m, tok.Scopes, idTokenGrant{Nonce: tok.Grant.Nonce, AuthTime: tok.Grant.AuthTime, AMR: tok.Grant.AMR}, secret)
	if err != nil {
		return "", err
	}
	return idt.JWT, nil
}

// refresh is the refresh-token grant. A refresh token presented a second
// time ends its family; that is logged, as a code used twice is.
func (s *Server) refresh(ctx context.Context, app *grants.App, p map[string]string) (*grants.AccessToken, string, *oauthErr) {
	rt := p["refresh_token"]
	if rt == "" {
		return nil, "", invalidRequest("Missing required parameter: refresh_token.")
	}
	var scopes []string
	if sc := p["scope"]; strings.TrimSpace(sc) != "" {
		var ok bool
		if scopes, ok = scopesFor(app, sc); !ok {
			return nil, "", errInvalidScope
		}
	}
	tok, secret, _, err := grants.Of(s.store).Refresh(ctx, app.ClientID, rt, scopes)
	switch {
	case err == nil:
		return tok, secret, nil
	case errors.Is(err, grants.ErrScopeNotGranted):
		return nil, "", errInvalidScope
	case errors.Is(err, grants.ErrRefreshReused):
		s.log.Warn("refresh token used twice; revoked its grant", zap.String("app_id", app.ID))
		return nil, "", errInvalidGrant
	default:
		return nil, "", s.grantRefused(err, "refresh a token")
	}
}

// serveOIDCRevoke is RFC 7009 revocation for an operator client: a
// refresh token ends its family (and the family's access tokens), an access
// token ends alone; 200 {} whatever the token was.
func (s *Server) serveOIDCRevoke(w http.ResponseWriter, r *http.Request, p map[string]string) {
	app, cerr := s.operatorClientAuth(r, p)
	if cerr != nil {
		writeOAuthError(w, cerr)
		return
	}
	g := grants.Of(s.store)
	found, err := g.RevokeRefresh(r.Context(), app.ClientID, p["token"])
	if err == nil && !found {
		err = g.RevokeToken(r.Context(), app.ClientID, p["token"])
	}
	if err != nil {
		s.log.Error("revoke token", zap.Error(err))
		writeOAuthError(w, serverError(err))
		return
	}
	noStore(w)
	writeJSON(w, http.StatusOK, struct{}{})
}

// serveIntrospect is RFC 7662 introspection, for resource servers
// registered as confidential operator clients: whether a token is live,
// and for whom. Anything not live is {"active": false}.
func (s *Server) serveIntrospect(w http.ResponseWriter, r *http.Request) {
	p, ok := s.limitedParams(w, r)
	if !ok {
		return
	}
	app, cerr := s.operatorClientAuth(r, p)
	if cerr == nil && app.Client.Public {
		cerr = errInvalidClient // no Basic: a public client has no secret to send
	}
	if cerr != nil {
		writeOAuthError(w, cerr)
		return
	}
	noStore(w)
	ctx := r.Context()
	g := grants.Of(s.store)
	token := p["token"]
	out := map[string]any{"active": false}
	var clientID, memberID string
	var scopes []string
	var iat, exp time.Time
	tokenType := "Bearer"
	if tok, m, err := g.Token(ctx, token); err == nil {
		clientID, scopes, iat, exp = tok.ClientID, tok.Scopes, tok.CreatedAt, tok.ExpiresAt
		if m != nil {
			memberID = m.ID
		}
	} else if rec, err := g.RefreshRecord(ctx, token); err == nil {
		clientID, memberID, scopes, iat, exp = rec.ClientID, rec.MemberID, rec.Scopes, rec.CreatedAt, rec.ExpiresAt
		tokenType = "refresh_token"
	} else {
		writeJSON(w, http.StatusOK, out)
		return
	}
	out = map[string]any{"active": true, "client_id": clientID, "scope": strings.Join(scopes, " "), "iat": iat.Unix(), "token_type": tokenType, "iss": s.issuer(r)}
	if !exp.IsZero() {
		out["exp"] = exp.Unix()
	}
	if memberID != "" {
		m, err := members.Of(s.store).MemberByID(ctx, memberID)
		if err != nil || m.Suspended {
			writeJSON(w, http.StatusOK, map[string]any{"active": false})
			return
		}
		keys, err := g.SigningKeys(ctx, s.keyPolicy())
		if err != nil {
			writeOAuthError(w, serverError(err))
			return
		}
		owner, _ := g.App(ctx, clientID)
		out["sub"] = subject(keys.Salt, owner, m.ID)
		out["username"] = m.Username
	}
	writeJSON(w, http.StatusOK, out)
}
