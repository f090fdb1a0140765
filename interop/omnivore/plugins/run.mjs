// The Omnivore plugins' own code against Hearth (see ../README.md): the
// Obsidian plugin's sync (src/main.ts fetchOmnivore and deleteCurrentItem,
// obsidian-omnivore @ 619013b) with Obsidian's API stubbed and the vault's
// writes kept, and the Logseq plugin's fetch and templates (src/api.ts,
// src/settings/template.ts, logseq-omnivore @ 0174149) in the loops of its
// src/index.ts. The member's library is made first through Hearth's own
// API, the Inboxt way.
import os from 'node:os'
import fs from 'node:fs'
import path from 'node:path'
import { buildPlugins } from './build.mjs'
import { ENDPOINT, TOKEN, check, fail, failures, hearth, saveHTML, sleep } from '../hearth.mjs'

const save = async (url, title, paragraphs) =>
  saveHTML(url, `<html><head><title>${title}</title></head><body><article><h1>${title}</h1>${paragraphs.map((p) => `<p>${p}</p>`).join('')}</article></body></html>`)
const highlight = (savedItemId, note, xpath, beforeText, text, afterText) =>
  hearth('mutation($data: CreateHighlightInput!) { createHighlight(data: $data) { id } }', {
    data: { savedItemId, note, segments: [{ xpath, startOffset: beforeText.length, endOffset: beforeText.length + text.length, beforeText, afterText, text }] },
  })
const status = async (id) => (await hearth('query($q: GetSavedItemInput!) { savedItem(query: $q) { status } }', { q: { id } })).savedItem?.status

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'omnivore-plugins-'))
try {
  const built = await buildPlugins(out)
  // What Obsidian's window and document give the plugin (util.ts
  // setOrUpdateHighlightColors, api.ts's global sleep).
  globalThis.window = globalThis
  globalThis.document = { documentElement: { style: { setProperty() {} } } }
  globalThis.sleep = sleep
  const obsidian = await import(built.obsidianStub)
  const OmnivorePlugin = (await import(built.obsidian)).default
  const logseq = await import(built.logseq)

  // --- The library, made through Hearth's own API ---
  const label = (await hearth('mutation($data: CreateLabelInput!) { createLabel(data: $data) { id } }', { data: { name: 'Sourdough', color: '#d2a05a' } })).createLabel
  const rye = await save('https://bread.example/rye', 'Rye: a dense loaf', ['Rye flour holds little gluten.', 'Bake it low and long, then wait a day before cutting.'])
  const spelt = await save('https://bread.example/spelt', 'Spelt rolls', ['Spelt is an old wheat.', 'It needs less water than modern flour.'])
  const ids = [rye, spelt]
  for (let i = 1; i <= 16; i++) ids.push(await save(`https://bread.example/${i}`, `Loaf ${i}`, [`Loaf number ${i} rises overnight.`]))
  await hearth('mutation($data: SetSavedItemLabelsInput!) { setSavedItemLabels(data: $data) { success } }', { data: { id: rye, labelIds: [label.id] } })
  // Two highlights made out of order: the note lists them in the page's.
  await highlight(rye, '', '/article[1]/p[2]', '', 'Bake it low and long', ', then wait a day before cutting.')
  await highlight(rye, 'why rye is dense', '/article[1]/p[1]', 'Rye flour ', 'holds little gluten', '.')

  // --- Obsidian: the plugin loads its settings (src/main.ts loadSettings:
  // customQuery '' becomes getQueryFromFilter('ALL'), in:all) and syncs ---
  const app = obsidian.makeApp()
  const plugin = new OmnivorePlugin(app, { id: 'obsidian-omnivore', version: '1.10.4' })
  plugin.data = { apiKey: TOKEN, endpoint: ENDPOINT }
  await plugin.loadSettings()
  check('Obsidian: the settings turn the default filter into in:all', plugin.settings.customQuery === 'in:all', plugin.settings.customQuery)
  await plugin.fetchOmnivore()
  const vault = app.vault
  const notes = [...vault.files.keys()]
  const ryePath = notes.find((p) => obsidian.frontMatterOf(vault.files.get(p))?.id === rye) || ''
  check('Obsidian: the file name is the title made safe (src/util.ts replaceIllegalCharsFile)', /\/Rye. a dense loaf\.md$/.test(ryePath), notes.join(', '))
  check('Obsidian first sync: one note per item, in pages of 15 (18 items)', notes.length === 18, `${notes.length}: ${notes.join(', ')} ${obsidian.notices.join(' | ')}`)
  check('Obsidian first sync: notes under Omnivore/<saved date>/<title>.md', notes.every((p) => /^Omnivore\/\d{4}-\d{2}-\d{2}\/.+\.md$/.test(p)), notes[0])
  const ryeNote = vault.files.get(ryePath) || ''
  const fm = obsidian.frontMatterOf(ryeNote) || {}
  check("Obsidian: the note's front matter carries the item's id", fm.id === rye, JSON.stringify(fm))
  check('Obsidian: the template wrote the title, the tag and the original URL', ryeNote.includes('# Rye: a dense loaf') && ryeNote.includes('#Omnivore') && ryeNote.includes('[Read Original](https://bread.example/rye)'), ryeNote)
  const first = ryeNote.indexOf('> holds little gluten')
  const second = ryeNote.indexOf('> Bake it low and long')
  check("Obsidian: both highlights, in the page's order (LOCATION), with the note", first > 0 && second > first && ryeNote.includes('why rye is dense'), ryeNote)
  check('Obsidian: the sync remembered when it ran (syncAt)', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/.test(plugin.settings.syncAt), plugin.settings.syncAt)

  // --- Obsidian: incremental sync (updated:<syncAt>) rewrites what changed ---
  await sleep(1100) // syncAt has seconds; a change in the same second would be resent
  await highlight(spelt, 'less water', '/article[1]/p[2]', 'It needs ', 'less water', ' than modern flour.')
  vault.log.length = 0
  await plugin.fetchOmnivore()
  const spelled = [...vault.files.entries()].find(([p]) => p.endsWith('/Spelt rolls.md'))
  check('Obsidian incremental sync: only the changed note is written', vault.log.length === 1 && vault.log[0][0] === 'modify' && vault.log[0][1].endsWith('/Spelt rolls.md'), JSON.stringify(vault.log))
  check('Obsidian incremental sync: the new highlight is in the note', spelled && spelled[1].includes('> less water'), spelled && spelled[1])

  // --- Obsidian: a template with {{{content}}} fetches content through
  // POST /api/content and its download URLs (src/api.ts getContent,
  // downloadFromUrl), as highlightedMarkdown ---
  plugin.settings.template = '# {{{title}}}\n\n{{{content}}}\n'
  plugin.settings.syncAt = '' // "Resync all articles"
  plugin.settings.folder = 'Content'
  await plugin.fetchOmnivore()
  const ryeContent = vault.files.get([...vault.files.keys()].find((p) => p.startsWith('Content/') && p.includes('Rye')))
  check('Obsidian content: the highlighted passages are ==marked== in the content', ryeContent && ryeContent.includes('==holds little gluten==') && ryeContent.includes('==Bake it low and long=='), ryeContent)

  // --- Logseq: its fetch (src/api.ts getOmnivoreItems) in the loop of
  // src/index.ts fetchOmnivore, then its templates ---
  const syncLogseq = async (query, updatedAt = '') => {
    const items = []
    for (let after = 0; ; after += 15) {
      const [page, hasNext] = await logseq.getOmnivoreItems(TOKEN, after, 15, updatedAt, query, false, 'highlightedMarkdown', ENDPOINT)
      items.push(...page)
      if (!hasNext) return items
    }
  }
  const all = await syncLogseq('in:all')
  check('Logseq in:all: every item of the inbox and the archive', all.length === 18, all.length)
  const withHighlights = await syncLogseq('has:highlights in:all')
  check('Logseq has:highlights in:all: the two items with highlights', withHighlights.length === 2, withHighlights.map((i) => i.title).join())
  const spelt2 = withHighlights.find((i) => i.id === spelt)
  const block = logseq.renderItem(logseq.defaultItemTemplate, spelt2, 'yyyy-MM-dd')
  check('Logseq item template: title, site and date-saved properties', block.startsWith('[Spelt rolls](https://omnivore.app/me/') && block.includes('site:: [bread.example](https://bread.example/spelt)') && /date-saved:: \[\[\d{4}-\d{2}-\d{2}\]\]/.test(block), block)
  const hl = logseq.renderHighlightContent(logseq.defaultHighlightTemplate, spelt2.highlights[0], spelt2, 'yyyy-MM-dd')
  check('Logseq highlight template: the quote and its note', hl.startsWith('> less water [⤴️](') && hl.includes('note:: less water'), hl)
  const positioned = logseq.renderHighlightContent('{{{positionPercent}}}', spelt2.highlights[0], spelt2, 'yyyy-MM-dd')
  check('Logseq highlight template: positionPercent is a number within the page', Number(positioned) > 0 && Number(positioned) < 100, positioned)

  // --- Obsidian: "Delete Current Article from Omnivore" (deleteCurrentItem)
  // deletes the item of the note's front matter id and the note ---
  await plugin.deleteCurrentItem(new obsidian.TFile(ryePath))
  await sleep(500) // the plugin does not wait for deleteItem
  check('Obsidian delete: the note is gone from the vault', !vault.files.has(ryePath))
  check('Obsidian delete: the item is in the trash in Hearth', (await status(rye)) === 'DELETED', await status(rye))
  check('Obsidian: no failure notice', !obsidian.notices.some((n) => /fail|missing/i.test(n)), obsidian.notices.join(' | '))

  // --- Logseq: deletions through updatesSince (getDeletedOmnivoreItems) ---
  const deleted = []
  for (let after = 0; ; after += 15) {
    const [page, hasNext] = await logseq.getDeletedOmnivoreItems(TOKEN, after, 15, '', ENDPOINT)
    deleted.push(...page)
    if (!hasNext) break
  }
  check('Logseq deletions: the item deleted from Obsidian comes back DELETED', deleted.some((i) => i.id === rye), deleted.map((i) => i.id).join())
} catch (e) {
  console.error(e)
  fail()
} finally {
  fs.rmSync(out, { recursive: true, force: true })
}
console.log(failures() ? `plugins: ${failures()} failures` : 'plugins: every check passed')
process.exit(failures() ? 1 : 0)
