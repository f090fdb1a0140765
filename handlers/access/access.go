// Package access says who a request acts for and what it may do there, the
// same way on every route that takes credentials: the one parser of bearer
// tokens, the one lookup of a request's caller (an OAuth access token of
// hearth_oauth, an API token of hearth_graphql, or the member's session
// cookie), and the one scope check.
//
// A route declares what it takes in a Route: the kinds of credentials, and
// the scopes an OAuth token needs there. Authenticate applies the
// declaration; each service then answers a refusal in its own protocol's
// format. Sessions and API tokens act with all their member's rights; an
// OAuth token only within the scopes its member approved (docs/security.md
// lists what each scope allows on each route).
package access

import (
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The scopes of hearth_oauth that give access to a member's library: read
// for anything that shows saved content, write for anything that changes
// it. The granular read:… and write:… scopes name Mastodon's resources,
// which Hearth does not hold, so they give no access to the library.
const (
	Read  = "read"
	Write = "write"
)

// A Route is what one route (or one kind of operation on it) declares
// about the credentials it takes.
type Route struct {
	// Name is the route as the docs name it ("POST /api/import").
	Name string
	// AnyScope lists the scopes of which an OAuth token needs one here;
	// nil lets any OAuth token in (the route then checks no scope).
	// Sessions and API tokens hold every scope.
	AnyScope []string
	// APITokens, Sessions and AppTokens say which credentials besides a
	// member's OAuth token the route takes: API tokens (app_…), the
	// session cookie (from this site's own pages only), and an
	// application's token without a member (client_credentials).
	APITokens, Sessions, AppTokens bool
	// BareAPIKey also takes an API token sent alone, without "Bearer "
	// (barekey.go).
	BareAPIKey bool
}

// Caller is who a request acts for.
type Caller struct {
	// Member is nil only for an application's token (client_credentials)
	// on a route that takes those.
	Member   *members.Member
	APIToken *apitokens.Token    // set for an API token
	OAuth    *grants.AccessToken // set for an OAuth access token
	Session  bool                // signed in with the session cookie
	// Key names the credential for rate limits; never the secret itself.
	Key string
}

// Allows reports whether the caller holds scope: an OAuth token when its
// scopes cover it (grants.ScopesCover), a session or an API token always.
func (c *Caller) Allows(scope string) bool {
	if c.OAuth != nil {
		return c.OAuth.Allows(scope)
	}
	return true
}

// May reports whether the caller holds one of the scopes route needs
// (nil error), or says which it lacks (a *ScopeError).
func (c *Caller) May(route Route) error {
	if len(route.AnyScope) == 0 {
		return nil
	}
	for _, s := range route.AnyScope {
		if c.Allows(s) {
			return nil
		}
	}
	return &ScopeError{Route: route}
}

// Errors of Authenticate; their messages are safe to show.
var (
	// ErrMalformed: an Authorization header that is not "Bearer <token>".
	ErrMalformed = errors.New("the Authorization header must be Bearer <token>")
	// ErrInvalidToken: a token that is unknown, expired or revoked, or
	// of a kind the route does not take. A suspended member's token is
	// this error and members.ErrSuspended too.
	ErrInvalidToken = errors.New("the token is unknown, expired or revoked")
	// ErrNoMember: an application's token (client_credentials) where a
	// member's is needed.
	ErrNoMember = errors.New("an application token cannot read saved content: use a member's token")
	// ErrCrossOrigin: a request without a token that a browser sent from
	// another site, to a route that takes the session cookie.
	ErrCrossOrigin = errors.New("cross-origin request refused: a session may only be used from this site's own pages")
)

// ScopeError is an OAuth token lacking every scope of a route's AnyScope.
type ScopeError struct{ Route Route }

func (e *ScopeError) Error() string {
	return "this token lacks the " + strings.Join(e.Route.AnyScope, " or ") + " scope"
}

// IsScopeError reports whether err is a *ScopeError.
func IsScopeError(err error) bool {
	var se *ScopeError
	return errors.As(err, &se)
}

// Bearer returns the token of r's Authorization header, "Bearer <token>"
// with the scheme in any case (RFC 6750 section 2.1): present is false
// without the header, err is ErrMalformed with another one. Tokens are
// taken from this header only, never from a URL or a form, so that they
// stay out of access logs.
func Bearer(r *http.Request) (token string, present bool, err error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false, nil
	}
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", true, ErrMalformed
	}
	return token, true, nil
}

// Sessions is what Authenticate needs of the member pages
// (account.Pages).
type Sessions interface {
	CurrentMember(r *http.Request) *members.Member
	CheckCrossOrigin(r *http.Request) error
}

// Authenticator finds the callers of requests in one store.
type Authenticator struct {
	Store *storage.Store
	// Sessions, when set, lets routes that take sessions act for the
	// member signed in with the session cookie.
	Sessions Sessions
	// Logger is told of lookups that failed for another reason than the
	// token (never the token itself).
	Logger *zap.Logger
}

// Authenticate returns who r acts for on route, checking the scopes route
// needs: the bearer token's caller, or without one the session's member
// (when route takes sessions), or nil when r carries neither. Errors are
// the ones above, a *ScopeError, members.ErrSuspended (with
// ErrInvalidToken), or the store's own (storage.Unavailable tells a
// refusal for now).
func (a *Authenticator) Authenticate(r *http.Request, route Route) (*Caller, error) {
	c, err := a.caller(r, route)
	if err != nil || c == nil {
		return nil, err
	}
	if err := c.May(route); err != nil {
		return nil, err
	}
	return c, nil
}

func (a *Authenticator) caller(r *http.Request, route Route) (*Caller, error) {
	token, present, err := Bearer(r)
	if err != nil && route.BareAPIKey {
		token, err = bareAPIKey(r, err)
	}
	if err != nil {
		return nil, err
	}
	if !present {
		if !route.Sessions || a.Sessions == nil {
			return nil, nil
		}
		// A browser may send the cookie, or a request that signs in, from
		// another site: only this site's own pages may.
		if err := a.Sessions.CheckCrossOrigin(r); err != nil {
			return nil, ErrCrossOrigin
		}
		if m := a.Sessions.CurrentMember(r); m != nil {
			return &Caller{Member: m, Session: true, Key: "session:" + m.ID}, nil
		}
		return nil, nil
	}
	if apitokens.LooksLike(token) {
		if !route.APITokens {
			return nil, ErrInvalidToken
		}
		m, t, err := apitokens.Of(a.Store).Member(r.Context(), token)
		if err != nil {
			return nil, a.lookupFailed(r, "API", err)
		}
		return &Caller{Member: m, APIToken: t, Key: "api:" + t.ID}, nil
	}
	if !strings.HasPrefix(token, grants.TokenPrefix) {
		// Neither kind: nothing to look up.
		return nil, ErrInvalidToken
	}
	t, m, err := grants.Of(a.Store).Token(r.Context(), token)
	if err != nil {
		return nil, a.lookupFailed(r, "OAuth", err)
	}
	if m == nil && !route.AppTokens {
		return nil, ErrNoMember
	}
	return &Caller{Member: m, OAuth: t, Key: "oauth:" + t.ID}, nil
}

// lookupFailed is the error of a failed token lookup: ErrInvalidToken for
// a token that names nobody (or a suspended member, wrapped with
// members.ErrSuspended), the store's error otherwise (logged unless the
// store refused for now or the client went away).
func (a *Authenticator) lookupFailed(r *http.Request, kind string, err error) error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return ErrInvalidToken
	case errors.Is(err, members.ErrSuspended):
		return suspended{}
	}
	if _, _, busy := storage.Unavailable(err); !busy && r.Context().Err() == nil && a.Logger != nil {
		a.Logger.Error("look up "+kind+" token", zap.Error(err))
	}
	return err
}

// suspended is a suspended member's token: ErrInvalidToken (with its
// message) and members.ErrSuspended.
type suspended struct{}

func (suspended) Error() string { return ErrInvalidToken.Error() }

func (suspended) Is(target error) bool {
	return target == ErrInvalidToken || target == members.ErrSuspended
}
