package graphql

import (
	"github.com/hearthkit/caddy-hearth/handlers/access"
)

// What the GraphQL endpoint takes (access.Route): every operation that
// acts for a member is declared here once, and
// TestEveryRouteHoldsItsScopes asks each with every kind of credential.
// The routes beside it declare theirs in their packages.
var (
	// routeGraphQL authenticates a GraphQL request; the scope is checked
	// per operation (checkScope).
	// Omnivore's clients send the API key alone (BareAPIKey).
	routeGraphQL = access.Route{Name: "POST " + Path, APITokens: true, Sessions: true, BareAPIKey: true}
	// A query reads; a mutation writes, and what its result selects
	// beyond the ids and success of what it changed is read too: a token
	// without read gets no content through any answer.
	routeQuery          = access.Route{Name: "POST " + Path + " query", AnyScope: []string{access.Read}, APITokens: true, Sessions: true}
	routeMutation       = access.Route{Name: "POST " + Path + " mutation", AnyScope: []string{access.Write}, APITokens: true, Sessions: true}
	routeMutationResult = access.Route{Name: "POST " + Path + " mutation result", AnyScope: []string{access.Read}, APITokens: true, Sessions: true}
)

// Routes lists the declarations above.
func Routes() []access.Route {
	return []access.Route{routeGraphQL, routeQuery, routeMutation, routeMutationResult}
}
