// megalodon 10.3.0 and masto 8.0.0 (npm, pinned in package-lock.json)
// against Hearth, unmodified: each registers an app, the member approves in
// a browser (member_browser.py drives Hearth's real sign-in and consent
// forms), the client exchanges the code, verifies credentials, runs its
// instance detection, revokes, and sees the revoked token refused.
//
//   node node_clients.mjs BASE_URL   (HEARTH_USER/PASSWORD set)
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import generator, { detector } from 'megalodon'
import { createRestAPIClient, createOAuthAPIClient } from 'masto'

const here = path.dirname(fileURLToPath(import.meta.url))
const base = process.argv[2]
const user = process.env.HEARTH_USER

function fail(client, msg) {
  throw new Error(`${client}: FAIL: ${msg}`)
}

// approve opens url in the member's browser and returns the code from the
// redirect to the client's callback, checking the state came back.
function approve(client, url, callback, state) {
  let out
  try {
    out = execFileSync(process.env.HEARTH_INTEROP_PYTHON || 'python3', [path.join(here, 'member_browser.py'), url], { encoding: 'utf8' })
  } catch (e) {
    fail(client, `approving in the browser: ${e.stderr || e}`)
  }
  if (!out.startsWith('redirect ')) fail(client, `approval gave ${out}`)
  const loc = new URL(out.slice('redirect '.length).trim())
  if (`${loc.origin}${loc.pathname}` !== callback) fail(client, `redirected to ${loc}, want ${callback}`)
  if (state !== undefined && loc.searchParams.get('state') !== state) fail(client, `state ${loc.searchParams.get('state')}`)
  const code = loc.searchParams.get('code')
  if (!code) fail(client, `no code in ${loc}`)
  return code
}

async function megalodon() {
  const c = 'megalodon'
  // Whalebird adds an account by asking the detector what the server is.
  const sns = await detector(base)
  if (sns !== 'mastodon') fail(c, `detector says ${sns}`)
  console.log(`${c}: detector ok (${sns})`)
  const anon = generator(sns, base)
  const callback = 'http://127.0.0.1/callback'
  const app = await anon.registerApp('hearth-interop megalodon', { scopes: ['read', 'write'], redirect_uris: callback })
  if (!app.url || !app.client_id) fail(c, `registerApp: ${JSON.stringify(app)}`)
  const code = approve(c, app.url, callback)
  const tok = await anon.fetchAccessToken(app.client_id, app.client_secret, code, callback)
  console.log(`${c}: authorization code exchanged ok`)
  const client = generator(sns, base, tok.access_token)
  const me = await client.verifyAccountCredentials()
  if (me.data.username !== user) fail(c, `verifyAccountCredentials: ${JSON.stringify(me.data)}`)
  console.log(`${c}: verifyAccountCredentials ok`)
  const inst = await client.getInstance()
  if (!String(inst.data.version).startsWith('4.4.0')) fail(c, `getInstance: ${JSON.stringify(inst.data)}`)
  console.log(`${c}: getInstance ok (${inst.data.version})`)
  // revokeToken sends the user's token as Authorization: Bearer too.
  const res = await client.revokeToken(app.client_id, app.client_secret, tok.access_token)
  if (res.status !== 200) fail(c, `revokeToken: HTTP ${res.status}`)
  console.log(`${c}: revokeToken ok`)
  try {
    await client.verifyAccountCredentials()
  } catch (e) {
    if (e.response?.status === 401) {
      console.log(`${c}: revoked token refused ok`)
      return
    }
    fail(c, `after revoke: ${e}`)
  }
  fail(c, 'the revoked token still works')
}

async function masto() {
  const c = 'masto'
  const anon = createRestAPIClient({ url: base })
  // Registered without a port; a native app listens on any free port
  // (RFC 8252 section 7.3).
  const registered = 'http://127.0.0.1/callback'
  const callback = 'http://127.0.0.1:45678/callback'
  const app = await anon.v1.apps.create({ clientName: 'hearth-interop masto', redirectUris: registered, scopes: 'read write' })
  const v1 = await anon.v1.instance.fetch()
  const v2 = await anon.v2.instance.fetch()
  if (!v1.version.startsWith('4.4.0') || !v2.version.startsWith('4.4.0') || typeof v2.configuration.urls.streaming !== 'string') {
    fail(c, `instance: ${JSON.stringify(v2)}`)
  }
  console.log(`${c}: v1 and v2 instance ok (${v2.version})`)
  const state = 'masto-state'
  const q = new URLSearchParams({ client_id: app.clientId, redirect_uri: callback, response_type: 'code', scope: 'read write', state })
  const code = approve(c, `${base}/oauth/authorize?${q}`, callback, state)
  const oauth = createOAuthAPIClient({ url: base })
  const tok = await oauth.token.create({
    grantType: 'authorization_code', clientId: app.clientId, clientSecret: app.clientSecret,
    redirectUri: callback, code, scope: 'read write'
  })
  console.log(`${c}: authorization code exchanged ok`)
  const client = createRestAPIClient({ url: base, accessToken: tok.accessToken })
  const me = await client.v1.accounts.verifyCredentials()
  if (me.username !== user) fail(c, `verifyCredentials: ${JSON.stringify(me)}`)
  console.log(`${c}: verifyCredentials ok`)
  await oauth.revoke({ clientId: app.clientId, clientSecret: app.clientSecret, token: tok.accessToken })
  console.log(`${c}: revoke ok`)
  try {
    await client.v1.accounts.verifyCredentials()
  } catch (e) {
    if (e.statusCode === 401) {
      console.log(`${c}: revoked token refused ok`)
      return
    }
    fail(c, `after revoke: ${e}`)
  }
  fail(c, 'the revoked token still works')
}

let failed = false
for (const [name, run] of [['megalodon', megalodon], ['masto', masto]]) {
  try {
    await run()
  } catch (e) {
    failed = true
    console.error(String(e.message || e).includes('FAIL') ? e.message : `${name}: FAIL: ${e.stack || e}`)
  }
}
process.exit(failed ? 1 : 0)
