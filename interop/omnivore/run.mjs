// Omnivore's note-taking integrations against Hearth (see README.md): the
// npm client @omnivore-app/api 1.0.4 (omnivore-app/omnivore-api @ ce99d23)
// as the Obsidian plugin (omnivore-app/obsidian-omnivore @ 619013b, MIT)
// and the Logseq plugin (omnivore-app/logseq-omnivore @ 0174149, MIT) call
// it, and their POST /api/content with its polling, replayed call for call
// (each check names the plugin file it follows). The library is filled
// first through Hearth's own API, the Inboxt way.
import http from 'node:http'
import { Omnivore } from '@omnivore-app/api'
import { ENDPOINT, TOKEN, check, fail, failures, graphql, hearth, saveHTML, sleep } from './hearth.mjs'

const SLOW_PORT = Number(process.env.SLOW_PORT || 18381)

// Deleting for good is session-only (as in Inboxt): the member signs in.
const asMember = async (query, variables) => {
  const signIn = await fetch(ENDPOINT, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: 'mutation($data: SignInInput!) { signIn(data: $data) { success } }', variables: { data: { emailAddress: 'omnivore', password: 'interop pass' } } }),
  })
  const cookie = signIn.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ')
  return graphql({ cookie, 'sec-fetch-site': 'same-origin' }, query, variables)
}
const save = saveHTML

// The plugins' settings turn the endpoint into the client's base URL
// (src/api.ts baseUrl, both plugins).
const baseUrl = (endpoint) => endpoint.replace(/\/api\/graphql$/, '')
const omnivore = new Omnivore({ apiKey: TOKEN, baseUrl: baseUrl(ENDPOINT), timeoutMs: 10000 })

// getContent and downloadFromUrl of the Logseq plugin's src/api.ts (the
// Obsidian plugin's are the same through Obsidian's requestUrl): the bare
// key, highlightedMarkdown, then a GET every second while it answers 404.
let polls = 0
const getContent = async (libraryItemIds) => {
  const response = await fetch(`${baseUrl(ENDPOINT)}/api/content`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', Authorization: TOKEN },
    body: JSON.stringify({ libraryItemIds, format: 'highlightedMarkdown' }),
  })
  if (!response.ok) throw new Error(`Failed to fetch content: ${response.status}`)
  return await response.json()
}
const downloadFromUrl = async (url) => {
  const response = await fetch(url)
  if (!response.ok) {
    if (response.status === 404) {
      polls++
      releaseSlow()
      await sleep(1000)
      return downloadFromUrl(url)
    }
    throw new Error(`Failed to download content: ${response.status}`)
  }
  return await response.text()
}
const fetchContentForItems = async (items) => {
  const content = await getContent(items.map((a) => a.id))
  await Promise.allSettled(
    content.data.map(async (c) => {
      const item = items.find((i) => i.id === c.libraryItemId)
      if (!item) throw new Error(`Item not found ${c.libraryItemId}`)
      item.content = await downloadFromUrl(c.downloadUrl)
    }),
  )
}

// getItems / getOmnivoreItems (src/api.ts, both plugins) and the sync loop
// around them (obsidian src/main.ts fetchOmnivore, logseq src/index.ts):
// pages of 15 by offset, `updated:<since> sort:saved-asc <query>`.
const sync = async (updatedAt, query, includeContent) => {
  const all = []
  for (let after = 0; ; after += 15) {
    const response = await omnivore.items.search({
      after,
      first: 15,
      query: `${updatedAt ? 'updated:' + updatedAt : ''} sort:saved-asc ${query}`,
      includeContent: false,
      format: 'highlightedMarkdown',
    })
    const items = response.edges.map((e) => e.node)
    if (includeContent && items.length > 0) await fetchContentForItems(items)
    all.push(...items)
    if (!response.pageInfo.hasNextPage) return { items: all, pageInfo: response.pageInfo }
  }
}

// getDeletedOmnivoreItems (logseq src/api.ts) and its loop (src/index.ts).
const deletedSince = async (updatedAt) => {
  const deleted = []
  for (let after = 0; ; after += 15) {
    const result = await omnivore.items.updates({ after, first: 15, since: updatedAt || '2021-01-01' })
    deleted.push(...result.edges.filter((edge) => edge.updateReason === 'DELETED' && edge.node).map((edge) => edge.node))
    if (!result.pageInfo.hasNextPage) return deleted
  }
}

// luxon's DateTime.toISO() of the plugins' syncAt, with an offset.
const luxonISO = (d, offsetMinutes = 120) => {
  const local = new Date(d.getTime() + offsetMinutes * 60000).toISOString().replace('Z', '')
  const sign = offsetMinutes >= 0 ? '+' : '-'
  const h = String(Math.floor(Math.abs(offsetMinutes) / 60)).padStart(2, '0')
  const m = String(Math.abs(offsetMinutes) % 60).padStart(2, '0')
  return `${local}${sign}${h}:${m}`
}

// A page the fetcher waits for, so that its content is not ready at once:
// it is answered once a download link has answered 404 (releaseSlow), not
// after a delay a slow machine could outlast; a minute at most.
let releaseSlow
const slowReleased = new Promise((r) => { releaseSlow = r })
const slow = http.createServer(async (req, res) => {
  await Promise.race([slowReleased, sleep(60000)])
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
  res.end('<html><head><title>Slow rise</title></head><body><article><h1>Slow rise</h1><p>Cold fermentation overnight gives a deeper flavour and an open crumb; the dough rests in the fridge for twelve hours.</p><p>Shape it in the morning.</p></article></body></html>')
})
await new Promise((r) => slow.listen(SLOW_PORT, '127.0.0.1', r))

try {
  // --- The library, made through Hearth's own API ---
  const label = (await hearth('mutation($data: CreateLabelInput!) { createLabel(data: $data) { id } }', { data: { name: 'Bread', color: '#d2a05a' } })).createLabel
  const ids = []
  for (let i = 1; i <= 17; i++) {
    ids.push(await save(`https://bread.example/${i}`, `<html><head><title>Loaf ${i}</title></head><body><article><h1>Loaf ${i}</h1><p>Flour, water and salt make loaf number ${i}; the starter does the rest of the work overnight.</p><p>Bake it hot for forty minutes.</p></article></body></html>`))
  }
  const [first, second, archived, trashed, gone] = ids
  await hearth('mutation($data: SetSavedItemLabelsInput!) { setSavedItemLabels(data: $data) { success } }', { data: { id: first, labelIds: [label.id] } })
  // Highlights made the Inboxt way: segments with xpath, offsets and context.
  await hearth('mutation($data: CreateHighlightInput!) { createHighlight(data: $data) { id } }', {
    data: { savedItemId: first, note: 'remember this', segments: [{ xpath: '/article[1]/p[2]', startOffset: 0, endOffset: 11, beforeText: 'overnight.', afterText: ' for forty minutes.', text: 'Bake it hot' }] },
  })
  await hearth('mutation($data: UpdateSavedItemStatusInput!) { updateSavedItemStatus(data: $data) { success } }', { data: { ids: [archived], status: 'ARCHIVED' } })
  await hearth('mutation($data: UpdateSavedItemStatusInput!) { updateSavedItemStatus(data: $data) { success } }', { data: { ids: [trashed], status: 'DELETED' } })

  // --- Obsidian: first sync, its default query (settings customQuery '') ---
  const syncStart = new Date()
  const firstSync = await sync('', '', true)
  const got = firstSync.items.map((i) => i.id)
  const expected = ids.filter((id) => id !== trashed)
  check('obsidian first sync: every item but the trash, oldest first, across two pages of 15 (src/main.ts fetchOmnivore)', JSON.stringify(got) === JSON.stringify(expected), `${got.length} items`)
  check('search pageInfo.totalCount counts the query', firstSync.pageInfo.totalCount === expected.length, String(firstSync.pageInfo.totalCount))
  const one = firstSync.items.find((i) => i.id === first)
  check('SearchItem carries the fragment\'s fields (slug, url, pageType, savedAt, wordsCount, labels)',
    one && one.slug === 'loaf-1' && one.url === 'https://bread.example/1' && one.pageType === 'ARTICLE' && one.savedAt && one.wordsCount > 0 && one.labels?.[0]?.name === 'Bread',
    JSON.stringify(one))
  const h = one?.highlights?.[0]
  check('the Inboxt-made highlight as Omnivore\'s (quote, annotation, type HIGHLIGHT)', h && h.quote === 'Bake it hot' && h.annotation === 'remember this' && h.type === 'HIGHLIGHT', JSON.stringify(h))
  check('content through /api/content is highlightedMarkdown with ==marks==', one?.content === 'Flour, water and salt make loaf number 1; the starter does the rest of the work overnight.\n\n==Bake it hot== for forty minutes.\n', JSON.stringify(one?.content))
  check('archived items are in the sync, isArchived', firstSync.items.find((i) => i.id === archived)?.isArchived === true)

  // --- Logseq's filters (src/settings/index.ts getQueryFromFilter) ---
  const all = await sync('', 'in:all', false)
  check('logseq "in:all": inbox and archive', all.items.length === expected.length, String(all.items.length))
  const withHighlights = await sync('', 'has:highlights in:all', false)
  check('logseq "has:highlights in:all": the highlighted item only', withHighlights.items.length === 1 && withHighlights.items[0].id === first, withHighlights.items.map((i) => i.id).join())

  // --- Incremental sync: updated:<syncAt> ---
  await sleep(20)
  await hearth('mutation($data: CreateHighlightInput!) { createHighlight(data: $data) { id } }', {
    data: { savedItemId: second, segments: [{ xpath: '/article[1]/p[1]', startOffset: 0, endOffset: 5, beforeText: '', afterText: ', water', text: 'Flour' }] },
  })
  const incremental = await sync(luxonISO(syncStart), '', false)
  check('incremental sync with updated:<luxon ISO> returns only what changed since', incremental.items.length === 1 && incremental.items[0].id === second, incremental.items.map((i) => i.id).join())

  // --- saveUrl, then content polled while the page is fetched ---
  const saved = await omnivore.items.saveByUrl({ url: `http://127.0.0.1:${SLOW_PORT}/slow.html`, labels: [{ name: 'Bread' }, { name: 'Later' }] })
  const pending = (await omnivore.items.search({ first: 15, query: 'sort:saved-desc in:all' })).edges[0].node
  check('saveByUrl answers SaveSuccess with the saved item\'s id (Omnivore\'s clientRequestId)', saved.id === pending.id, `${saved.id} ${pending.id}`)
  check('search answers an item whose page is being fetched, without content', pending.content === null, JSON.stringify(pending))
  polls = 0
  await fetchContentForItems([pending])
  check('a download URL answers 404 while the page is fetched, then the content (polled)', polls > 0 && pending.content.includes('Cold fermentation overnight'), `${polls} polls, ${JSON.stringify(pending.content)}`)
  const labels = (await omnivore.items.search({ first: 1, query: `sort:saved-desc in:all` })).edges[0].node.labels.map((l) => l.name).sort()
  check('saveByUrl labels by name (made when missing)', JSON.stringify(labels) === '["Bread","Later"]', JSON.stringify(labels))

  // --- Deletion: the Obsidian plugin's delete, Logseq's updatesSince ---
  const deleteSince = new Date()
  await sleep(20)
  const del = await omnivore.items.delete({ id: second })
  check('items.delete (setBookmarkArticle) answers the id', del.id === second)
  await hearth('mutation($data: UpdateSavedItemStatusInput!) { updateSavedItemStatus(data: $data) { success } }', { data: { ids: [gone], status: 'DELETED' } })
  await asMember('mutation($data: PermanentlyDeleteSavedItemsInput!) { permanentlyDeleteSavedItems(data: $data) { success } }', { data: { ids: [gone] } })
  const deleted = await deletedSince(luxonISO(deleteSince, -300))
  const deletedIds = deleted.map((d) => d.id).sort()
  check('updatesSince reports the trashed and the permanently deleted item as DELETED, with a node (logseq getDeletedOmnivoreItems)',
    JSON.stringify(deletedIds) === JSON.stringify([second, gone].sort()), JSON.stringify(deleted))
  check('a deleted item\'s node keeps its title (logseq renders its page name from it)', deleted.find((d) => d.id === gone)?.title === 'Loaf 5')
  const edges = []
  for (let after = 0; ; after += 15) {
    const page = await omnivore.items.updates({ after, first: 15, since: '2021-01-01' })
    edges.push(...page.edges)
    if (!page.pageInfo.hasNextPage) break
  }
  const reasons = Object.fromEntries(edges.map((e) => [e.itemID, e.updateReason]))
  check('updatesSince from 2021-01-01 (logseq\'s first sync) lists every item once, deletions included', edges.length === ids.length + 1 && Object.keys(reasons).length === edges.length && reasons[trashed] === 'DELETED' && reasons[first] === 'CREATED', `${edges.length} edges`)
  const after = await sync('', 'in:all', false)
  check('a deleted item leaves the search', !after.items.some((i) => i.id === second || i.id === gone))

  // --- Errors in Omnivore's shapes ---
  let err = null
  try {
    await omnivore.items.search({ first: 15, query: 'x'.repeat(256) })
  } catch (e) {
    err = e
  }
  check('an over-long query is SearchError (the client throws)', err !== null)
  const stranger = new Omnivore({ apiKey: 'app_not-a-real-key-at-all-0000000000000000000', baseUrl: baseUrl(ENDPOINT) })
  err = null
  try {
    await stranger.items.search({ first: 1 })
  } catch (e) {
    err = e
  }
  check('an unknown key is refused', err !== null)

  // --- saveByUrl with state and savedAt: the npm client passes its
  // parameters as SaveUrlInput (src/client.ts saveByUrl), as scripts that
  // move a library send them; Omnivore's server put the item where state
  // said, saved at savedAt (packages/api/src/services/save_page.ts,
  // omnivore-app/omnivore @ 322ce62). Last, so that the counts above hold.
  const fetched = async (id, query) => {
    for (let i = 0; i < 300; i++) {
      const node = (await omnivore.items.search({ first: 15, query })).edges.map((e) => e.node).find((n) => n.id === id)
      if (node && node.title === 'Slow rise') return node
      await sleep(200)
    }
    return null
  }
  const moveURL = `http://127.0.0.1:${SLOW_PORT}/moved.html`
  const moved = await omnivore.items.saveByUrl({ url: moveURL, state: 'ARCHIVED', savedAt: '2020-01-02T03:04:05.000Z', folder: 'inbox' })
  const inArchive = await fetched(moved.id, 'in:archive')
  check('saveByUrl with state ARCHIVED: once fetched, in:archive lists it, isArchived (saveByUrl answers the item\'s id)',
    inArchive !== null && inArchive.isArchived === true, JSON.stringify(inArchive))
  const inboxIds = (await sync('', 'in:inbox', false)).items.map((i) => i.id)
  check('saveByUrl with state ARCHIVED: not in the inbox', !inboxIds.includes(moved.id))
  check('saveByUrl with savedAt: search answers it as savedAt', inArchive?.savedAt === '2020-01-02T03:04:05.000Z', inArchive?.savedAt)
  const oldestFirst = await sync('', 'in:all', false)
  check('saveByUrl with savedAt: the library orders by it (the plugins\' sort:saved-asc sync lists it first)', oldestFirst.items[0]?.id === moved.id, oldestFirst.items[0]?.id)
  const again = await omnivore.items.saveByUrl({ url: moveURL })
  const backInInbox = await fetched(moved.id, 'in:inbox')
  check('saveByUrl of a URL saved before, without state: the same item, back in the inbox, saved at the time of the save',
    again.id === moved.id && backInInbox !== null && backInInbox.savedAt > '2020-01-02T03:04:05.000Z', JSON.stringify({ again, backInInbox }))
  err = null
  try {
    await omnivore.items.saveByUrl({ url: `http://127.0.0.1:${SLOW_PORT}/future.html`, savedAt: '2999-01-01T00:00:00.000Z' })
  } catch (e) {
    err = e
  }
  const future = (await sync('', 'in:all', false)).items.filter((i) => i.url.endsWith('/future.html'))
  check('saveByUrl with a savedAt in the future: the client throws the refusal\'s reason, nothing is saved',
    err !== null && /savedAt/.test(err.message) && future.length === 0, `${err?.message}, ${future.length} saved`)
} catch (e) {
  console.log(`FAIL ${e.stack || e}`)
  fail()
} finally {
  slow.close()
}
console.log(failures() ? `${failures()} check(s) failed` : 'all checks passed')
process.exit(failures() ? 1 : 0)
