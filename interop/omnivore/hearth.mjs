// What run.mjs and plugins/run.mjs share: the site and the member's API key
// from run.sh, the tally of checks, and Hearth's own GraphQL API (Inboxt's
// operations) called with that key as a Bearer token.
export const SITE = process.env.SITE
export const TOKEN = process.env.TOKEN
export const ENDPOINT = `${SITE}/api/graphql` // what a member enters as "API endpoint"

let failed = 0
export const check = (name, ok, detail = '') => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok || !detail ? '' : `: ${detail}`}`)
  if (!ok) failed++
}
// fail counts a failure that no check names (an exception).
export const fail = () => failed++
export const failures = () => failed
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// graphql posts a query with the headers that authenticate it and answers
// its data, or throws its errors.
export const graphql = async (headers, query, variables) => {
  const res = await fetch(ENDPOINT, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  })
  const body = await res.json()
  if (body.errors) throw new Error(`${query.slice(0, 60)}: ${JSON.stringify(body.errors)}`)
  return body.data
}
export const hearth = (query, variables) => graphql({ authorization: `Bearer ${TOKEN}` }, query, variables)

// saveHTML saves the page html as the article at url and answers its id.
export const saveHTML = async (url, html) =>
  (await hearth('mutation($data: AddArticleFromHtmlSnapshotInput!) { addArticleFromHtmlSnapshot(data: $data) }', { data: { url, html } }))
    .addArticleFromHtmlSnapshot
