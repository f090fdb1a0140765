package inboxtapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
)

// A Gate says who a request to the library's API acts for (Auth, per
// route) and holds the API's rate limits: per token (per client address
// for a request without one, as Inboxt's guest limit) and per member. The
// GraphQL endpoint and the REST routes of one site share one Gate, so they
// count against the same budgets.
type Gate struct {
	Auth *access.Authenticator
	// Tokens and Members count requests per token and per member; nil
	// turns a limit off.
	Tokens, Members ratelimit.Counter
	// ClientIP is the client address of a request without a token.
	ClientIP func(r *http.Request) string
}

// Limit applies the per-token and per-member rate limits (per client
// address for requests without a token) and sets the X-RateLimit headers
// of the tighter one in h. When either is exhausted it also sets
// Retry-After and returns its seconds and false; each route then answers in
// its own format.
func (g *Gate) Limit(h http.Header, r *http.Request, c *access.Caller) (retryAfter int, ok bool) {
	var results []ratelimit.Result
	if g.Tokens != nil {
		key := ratelimit.AddressKey(g.ClientIP(r))
		if c != nil {
			key = c.Key
		}
		results = append(results, g.Tokens.Allow(r.Context(), key))
	}
	if g.Members != nil && c != nil {
		results = append(results, g.Members.Allow(r.Context(), c.Member.ID))
	}
	if len(results) == 0 {
		return 0, true
	}
	shown := results[0]
	for _, res := range results[1:] {
		if !res.Allowed && shown.Allowed || res.Allowed == shown.Allowed && res.Remaining < shown.Remaining {
			shown = res
		}
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(shown.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(shown.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(shown.Reset.Unix(), 10))
	for _, res := range results {
		if !res.Allowed {
			secs := ratelimit.RetryAfterSeconds(res.RetryAfter)
			h.Set("Retry-After", strconv.Itoa(secs))
			metrics.RateLimited(metrics.LimitGraphQL)
			return secs, false
		}
	}
	return 0, true
}

// Guests says what Admit does with a request whose credentials were
// refused or that carries none.
type Guests bool

const (
	// GuestsUncounted: such a request is refused without counting it
	// (the REST routes answer it 401 at once).
	GuestsUncounted Guests = false
	// GuestsCounted: such a request counts against its client address's
	// budget (Limit), so that guessing tokens costs a place in it; past
	// the budget it is a *LimitError (GraphQL, Omnivore's content).
	GuestsCounted Guests = true
)

// LimitError is a request past one of the rate limits (Limit): Retry-After
// and the X-RateLimit headers are set.
type LimitError struct{ RetryAfter int }

func (e *LimitError) Error() string {
	return "too many requests; retry after " + strconv.Itoa(e.RetryAfter) + " s"
}

// Admit is how every route of the library's API takes its caller: who r
// acts for on route (Auth.Authenticate), counted against the rate limits
// (Limit, headers set in h). It returns the caller, or nil and why not,
// for each route to answer in its own format:
//   - the authenticator's error when the store refused for now, the
//     request came from another site (access.ErrCrossOrigin), the token
//     lacks the route's scope, or the client went away: nothing counted;
//   - a refused token (the authenticator's error), or nil and nil for a
//     request without credentials: counted by client address with
//     GuestsCounted, else not;
//   - a *LimitError past a limit.
func (g *Gate) Admit(h http.Header, r *http.Request, route access.Route, guests Guests) (*access.Caller, error) {
	c, err := g.Auth.Authenticate(r, route)
	if err != nil {
		if _, _, busy := storage.Unavailable(err); busy || r.Context().Err() != nil ||
			errors.Is(err, access.ErrCrossOrigin) || access.IsScopeError(err) {
			return nil, err
		}
	}
	if c == nil && guests == GuestsUncounted {
		return nil, err
	}
	if retry, ok := g.Limit(h, r, c); !ok {
		return nil, &LimitError{RetryAfter: retry}
	}
	return c, err
}

// RESTCaller authenticates a request to one of the REST routes (route)
// and applies the rate limits (Admit), answering a refusal in Inboxt's
// REST shape (WriteREST, naming path; what says what the store could not
// do now); nil when it answered.
func (g *Gate) RESTCaller(w http.ResponseWriter, r *http.Request, route access.Route, what, path string) *access.Caller {
	c, err := g.Admit(w.Header(), r, route, GuestsUncounted)
	var limited *LimitError
	if status, _, ok := Refusal(w, err); ok {
		WriteREST(w, status, "the store cannot "+what+" now ("+err.Error()+"); try again later", path)
		return nil
	}
	switch {
	case errors.As(err, &limited):
		WriteREST(w, http.StatusTooManyRequests, err.Error(), path)
		return nil
	case errors.Is(err, access.ErrCrossOrigin), access.IsScopeError(err):
		WriteREST(w, http.StatusForbidden, err.Error(), path)
		return nil
	case err != nil:
		WriteREST(w, http.StatusUnauthorized, TokenMessage(err), path)
		return nil
	case c == nil:
		WriteREST(w, http.StatusUnauthorized, "sign in, or send an API token as Authorization: Bearer <token>", path)
		return nil
	}
	return c
}

// TokenMessage is what a refused token is told: the authenticator's own
// errors say why; a store failure (logged by it) names nothing more than
// an unknown token would.
func TokenMessage(err error) string {
	if errors.Is(err, access.ErrMalformed) || errors.Is(err, access.ErrNoMember) || access.IsScopeError(err) {
		return err.Error()
	}
	return access.ErrInvalidToken.Error()
}
