package oauth

// OpenID Connect on the authorization server, for the clients the operator
// registers (grants.App.Client): Core 1.0's authorization-code flow with
// ID tokens, Discovery 1.0, a JWKS that rotates, userinfo, refresh tokens,
// introspection (RFC 7662) and RP-initiated logout. Apps registered through
// /api/v1/apps never reach this code: their requests take the Mastodon
// paths unchanged.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-jose/go-jose/v4"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Paths of the OpenID provider.
const (
	DiscoveryPath  = "/.well-known/openid-configuration"
	JWKSPath       = "/oauth/jwks"
	IntrospectPath = "/oauth/introspect"
	EndSessionPath = "/oauth/logout"
)

// Defaults of the OpenID provider's options.
const (
	DefaultIDTokenLifetime      = time.Hour
	DefaultAccessTokenLifetime  = time.Hour
	DefaultRefreshTokenLifetime = 30 * 24 * time.Hour
	DefaultKeyRotation          = 30 * 24 * time.Hour
	DefaultKeyPublishAhead      = 24 * time.Hour
)

func (o Options) oidcDefaults() Options {
	if o.IDTokenLifetime <= 0 {
		o.IDTokenLifetime = DefaultIDTokenLifetime
	}
	if o.AccessTokenLifetime <= 0 {
		o.AccessTokenLifetime = DefaultAccessTokenLifetime
	}
	if o.RefreshTokenLifetime <= 0 {
		o.RefreshTokenLifetime = DefaultRefreshTokenLifetime
	}
	if o.KeyRotation <= 0 {
		o.KeyRotation = DefaultKeyRotation
	}
	if o.KeyPublishAhead <= 0 {
		o.KeyPublishAhead = DefaultKeyPublishAhead
	}
	if o.KeyPublishAhead > o.KeyRotation {
		o.KeyPublishAhead = o.KeyRotation
	}
	return o
}

// keyPolicy is the signing keys' rotation: a key stays published for an
// ID token's lifetime after its last signature. An ID token signed with
// its code counts its lifetime from that signature too, so the time until
// the exchange needs no more.
func (s *Server) keyPolicy() grants.KeyPolicy {
	return grants.KeyPolicy{Rotation: s.opts.KeyRotation, PublishAhead: s.opts.KeyPublishAhead, Retain: s.opts.IDTokenLifetime + time.Minute}
}

// issuer is the issuer identifier: the same string as the RFC 8414
// document's, trailing slash included, which relying parties compare
// byte for byte.
func (s *Server) issuer(r *http.Request) string { return s.baseURL(r) + "/" }

// serveDiscovery is the OpenID Provider Metadata (Discovery 1.0 section 3).
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	base := s.baseURL(r)
	w.Header().Set("Cache-Control", "public, max-age=3600")
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                        s.issuer(r),
		"authorization_endpoint":                        base + AuthorizePath,
		"token_endpoint":                                base + TokenPath,
		"userinfo_endpoint":                             base + UserinfoPath,
		"jwks_uri":                                      base + JWKSPath,
		"revocation_endpoint":                           base + RevokePath,
		"introspection_endpoint":                        base + IntrospectPath,
		"end_session_endpoint":                          base + EndSessionPath,
		"scopes_supported":                              grants.OIDCScopes,
		"response_types_supported":                      []string{"code"},
		"response_modes_supported":                      []string{"query"},
		"grant_types_supported":                         []string{"authorization_code", "refresh_token"},
		"subject_types_supported":                       []string{"public", "pairwise"},
		"id_token_signing_alg_values_supported":         []string{"RS256", "ES256"},
		"token_endpoint_auth_methods_supported":         []string{"client_secret_basic", "client_secret_post", "none"},
		"revocation_endpoint_auth_methods_supported":    []string{"client_secret_basic", "client_secret_post", "none"},
		"introspection_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"code_challenge_methods_supported":              []string{"S256"},
		"prompt_values_supported":                       []string{"none", "login", "consent"},
		"claims_supported": []string{"iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "amr", "azp", "at_hash",
			"name", "preferred_username", "email", "email_verified", "groups"},
		"claims_parameter_supported":       false,
		"request_parameter_supported":      false,
		"request_uri_parameter_supported":  false,
		"require_request_uri_registration": false,
	})
}

// serveJWKS is the key set: every key published, the one about to sign
// included. Its cache lifetime stays well under the time a new key is
// published before it signs.
func (s *Server) serveJWKS(w http.ResponseWriter, r *http.Request) {
	keys, err := grants.Of(s.store).SigningKeys(r.Context(), s.keyPolicy())
	if err != nil {
		s.log.Error("read the OpenID signing keys", zap.Error(err))
		writeStoreFailure(w, err, "The key set cannot be read now; try again later")
		return
	}
	set := jose.JSONWebKeySet{}
	for _, k := range keys.Published {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.Private().PublicKey, KeyID: k.ID, Algorithm: string(jose.RS256), Use: "sig"})
		if ec := k.ECPrivate(); ec != nil {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &ec.PublicKey, KeyID: k.ECKeyID(), Algorithm: string(jose.ES256), Use: "sig"})
		}
	}
	maxAge := min(time.Hour, s.opts.KeyPublishAhead/4)
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(int(maxAge.Seconds())))
	w.Header().Set("Content-Type", "application/jwk-set+json")
	b, err := json.Marshal(set)
	if err != nil {
		writeStoreFailure(w, err, "The key set cannot be read now; try again later")
		return
	}
	_, _ = w.Write(b)
}

// subject is the member's sub for app: opaque and stable (a digest of the
// member's id keyed by the keyring's salt), and for a pairwise client one
// of its own.
func subject(salt string, app *grants.App, memberID string) string {
	sector := "public"
	if app != nil && app.Client != nil && app.Client.Pairwise {
		sector = "pairwise:" + app.ClientID
	}
	sum := sha256.Sum256([]byte(salt + "\x00" + sector + "\x00" + memberID))
	return hex.EncodeToString(sum[:16])
}

// memberClaims are the claims the scopes give, in the ID token and at
// userinfo alike.
func memberClaims(claims map[string]any, scopes []string, m *members.Member) {
	if slices.Contains(scopes, "profile") {
		name := m.DisplayName
		if name == "" {
			name = m.Username
		}
		claims["name"] = name
		claims["preferred_username"] = m.Username
	}
	if slices.Contains(scopes, "email") && m.Email != "" {
		claims["email"] = m.Email
		claims["email_verified"] = m.EmailVerified
	}
	if slices.Contains(scopes, "groups") {
		groups := m.Groups
		if groups == nil {
			groups = []string{}
		}
		claims["groups"] = groups
	}
}

// idTokenGrant is what an ID token states about the sign-in.
type idTokenGrant struct {
	Nonce    string
	AuthTime time.Time
	AMR      []string
}

// idToken signs the ID token for m, issued to app along with accessToken:
// RS256, or ES256 for a client registered for it. Nothing else is ever
// issued: no "none", no symmetric algorithm. Its lifetime starts now:
// iat is the time of signing, when the code is issued or refreshed.
func (s *Server) idToken(r *http.Request, app *grants.App, m *members.Member, scopes []string, g idTokenGrant, accessToken string) (*grants.PreparedIDToken, error) {
	keys, err := grants.Of(s.store).SigningKeys(r.Context(), s.keyPolicy())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	exp := now.Add(s.opts.IDTokenLifetime)
	iss := s.issuer(r)
	claims := map[string]any{
		"iss":       iss,
		"sub":       subject(keys.Salt, app, m.ID),
		"aud":       app.ClientID,
		"azp":       app.ClientID,
		"iat":       now.Unix(),
		"exp":       exp.Unix(),
		"auth_time": g.AuthTime.Unix(),
	}
	if g.Nonce != "" {
		claims["nonce"] = g.Nonce
	}
	if len(g.AMR) > 0 {
		claims["amr"] = g.AMR
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["at_hash"] = base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
	}
	memberClaims(claims, scopes, m)
	payload, err := json.Marshal(claims)
	if err != nil {
		return nil, err
	}
	key := jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: keys.Signer.Private(), KeyID: keys.Signer.ID}}
	if app.Client != nil && app.Client.IDTokenAlg == "ES256" && keys.Signer.ECPrivate() != nil {
		key = jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: keys.Signer.ECPrivate(), KeyID: keys.Signer.ECKeyID()}}
	}
	signer, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return nil, err
	}
	jwt, err := obj.CompactSerialize()
	if err != nil {
		return nil, err
	}
	return &grants.PreparedIDToken{JWT: jwt, Issuer: iss, Expires: time.Unix(exp.Unix(), 0).UTC()}, nil
}

// preparedIDToken is the ID token signed when the code was issued, if the
// exchange may return it: issued for this request's issuer (the same
// unless the provider is reached under another host name without
// base_url), and with at least half its lifetime left (always with the
// default lifetime of an hour, as codes live ten minutes at most). Else
// the exchange signs one.
func (s *Server) preparedIDToken(r *http.Request, g *grants.CodeOIDC) string {
	p := g.IDToken
	if p == nil || p.Issuer != s.issuer(r) || time.Until(p.Expires) < s.opts.IDTokenLifetime/2 {
		return ""
	}
	return p.JWT
}

// serveOIDCUserinfo is userinfo (Core section 5.3) for a token with the
// openid scope: sub as in the ID token, and the claims of its scopes.
func (s *Server) serveOIDCUserinfo(w http.ResponseWriter, r *http.Request, tok *grants.AccessToken, m *members.Member) {
	app, err := grants.Of(s.store).App(r.Context(), tok.ClientID)
	if err != nil {
		unauthorized(w)
		return
	}
	keys, err := grants.Of(s.store).SigningKeys(r.Context(), s.keyPolicy())
	if err != nil {
		s.log.Error("read the OpenID signing keys", zap.Error(err))
		writeStoreFailure(w, err, "Something went wrong; try again later")
		return
	}
	claims := map[string]any{"sub": subject(keys.Salt, app, m.ID)}
	memberClaims(claims, tok.Scopes, m)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, claims)
}
