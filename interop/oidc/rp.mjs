// openid-client 6.8.9 (package-lock.json) as a relying party of Hearth's
// OpenID provider, driven by oidc_test.go: it discovers the provider,
// prints the authorization URL (the test's browser signs in and approves),
// reads the callback URL on standard input, then exchanges the code
// (client_secret_basic, PKCE, nonce and state checked by openid-client),
// reads userinfo, refreshes, replays the old refresh token, introspects,
// and prints what it saw as one JSON line. Every check openid-client makes
// (oauth4webapi: issuer, audience, signature against the JWKS, nonce, at
// iat/exp) happens inside these calls; a failure exits non-zero.
import * as client from 'openid-client';
import * as readline from 'node:readline';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const issuer = new URL(env('HEARTH_ISSUER'));
const redirect_uri = env('HEARTH_REDIRECT_URI');
const config = await client.discovery(issuer, env('HEARTH_CLIENT_ID'), undefined,
  client.ClientSecretBasic(env('HEARTH_CLIENT_SECRET')), { execute: [client.allowInsecureRequests] });

const code_verifier = client.randomPKCECodeVerifier();
const nonce = client.randomNonce();
const state = client.randomState();
const authURL = client.buildAuthorizationUrl(config, {
  redirect_uri, scope: 'openid profile email groups offline_access', nonce, state,
  code_challenge: await client.calculatePKCECodeChallenge(code_verifier), code_challenge_method: 'S256',
});
console.log(JSON.stringify({ authorize: authURL.href }));

const rl = readline.createInterface({ input: process.stdin });
const callback = await new Promise((resolve) => rl.once('line', resolve));
rl.close();

const tokens = await client.authorizationCodeGrant(config, new URL(callback),
  { pkceCodeVerifier: code_verifier, expectedNonce: nonce, expectedState: state, idTokenExpected: true });
const claims = tokens.claims();
const userinfo = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token);
let reuse = 'accepted';
try {
  await client.refreshTokenGrant(config, tokens.refresh_token);
} catch (e) {
  reuse = e.error ?? String(e);
}
const afterReuse = await client.tokenIntrospection(config, refreshed.access_token);
const endSession = client.buildEndSessionUrl(config, {
  id_token_hint: tokens.id_token, post_logout_redirect_uri: env('HEARTH_POST_LOGOUT_URI'), state: 'bye',
});
console.log(JSON.stringify({
  sub: claims.sub, nonce: claims.nonce, username: claims.preferred_username, email: userinfo.email,
  groups: userinfo.groups, userinfo_sub: userinfo.sub,
  rotated: refreshed.refresh_token !== tokens.refresh_token && !!refreshed.refresh_token,
  refreshed_id_token_sub: refreshed.claims()?.sub,
  reuse, active_after_reuse: afterReuse.active, end_session: endSession.href,
}));
