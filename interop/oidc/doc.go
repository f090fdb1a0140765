// Package oidc runs openid-client (npm, the version in package-lock.json)
// as a second, independent relying party of Hearth's OpenID provider,
// against Caddy started in-process from a Caddyfile: discovery, the code
// flow with client_secret_basic, PKCE, nonce and state, ID token
// verification against the JWKS, userinfo, refresh with rotation and reuse
// detection, introspection and RP-initiated logout.
//
// The test file has the build tag oidcinterop, so `go test ./...` leaves it
// out (it needs Node.js and this folder's npm packages); run it with
//
//	(cd interop/oidc && npm ci) && go test -tags nobadger,nomysql,nopgx,oidcinterop -count=1 ./interop/oidc/
//
// (.ci/run stage interop-oidc). Ports: site localhost:9080, admin
// localhost:2999, as caddymodule's tests (run it under their lock).
package oidc
