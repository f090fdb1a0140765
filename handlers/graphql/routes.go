package graphql

import (
	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
)

// What the routes of this package take (access.Route): every route and
// operation that acts for a member is declared here once, and
// TestEveryRouteHoldsItsScopes asks each with every kind of credential.
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
	// Omnivore's content endpoint reads items' content; its clients send
	// the API key alone. The download URLs it answers are capabilities of
	// their own (no credentials).
	routeContent = access.Route{Name: "POST " + ContentPath, AnyScope: []string{access.Read}, APITokens: true, BareAPIKey: true}
)

// Routes lists the declarations above.
func Routes() []access.Route {
	return []access.Route{routeGraphQL, routeQuery, routeMutation, routeMutationResult, importer.Route, routeContent, export.APIRoute, export.EPUBRoute, export.ImageRoute, export.FeedsRoute, export.FeedsChangeRoute}
}
