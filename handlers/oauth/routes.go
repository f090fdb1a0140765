package oauth

import "github.com/hearthkit/caddy-hearth/handlers/access"

// What the Mastodon routes that take a bearer token take (access.Route):
// OAuth access tokens only, an application's own (client_credentials)
// included; the routes that need a member answer 422 for those, after the
// scope check, as Mastodon does.
var (
	// Mastodon: doorkeeper_for :profile, :read, :'read:accounts' (read
	// covers read:accounts).
	routeVerifyCredentials = access.Route{Name: "GET " + VerifyCredentialsPath, AnyScope: []string{"profile", "read:accounts"}, AppTokens: true}
	// Mastodon 4.4 app/controllers/oauth/userinfo_controller.rb:
	// doorkeeper_authorize! :profile; or openid, which only the operator's
	// OpenID clients can hold (OpenID Connect Core section 5.3).
	routeUserinfo = access.Route{Name: "GET " + UserinfoPath, AnyScope: []string{"profile", "openid"}, AppTokens: true}
	// Any valid token names its application.
	routeAppVerify = access.Route{Name: "GET " + AppsVerifyPath, AppTokens: true}
)

// Routes lists the declarations above.
func Routes() []access.Route {
	return []access.Route{routeVerifyCredentials, routeUserinfo, routeAppVerify}
}
