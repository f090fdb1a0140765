// The part of Obsidian's API (obsidian.d.ts, the `obsidian` npm package's
// declarations) that the Omnivore plugin's sync uses, over Node: requestUrl
// through fetch (a status of 400 or more throws an error with .status, as
// Obsidian's does), YAML through the yaml package, and a vault in memory
// whose writes the checks read. Nothing of the plugin is changed: esbuild
// resolves its `import ... from 'obsidian'` to this file.
import YAML from 'yaml'

export class TAbstractFile {
  constructor(path) {
    this.path = path
    this.name = path.split('/').pop()
  }
}
export class TFile extends TAbstractFile {}
export class TFolder extends TAbstractFile {}

export const normalizePath = (p) =>
  p.replace(/\\/g, '/').replace(/\/+/g, '/').replace(/^\/|\/$/g, '').normalize('NFC')

export const parseYaml = (s) => YAML.parse(s)
export const stringifyYaml = (v) => YAML.stringify(v)

export const requestUrl = async ({ url, method = 'GET', headers, body, contentType }) => {
  const h = { ...headers }
  if (contentType) h['content-type'] = contentType
  const res = await fetch(url, { method, headers: h, body })
  const buf = await res.arrayBuffer()
  const text = new TextDecoder().decode(buf)
  if (res.status >= 400) {
    const err = new Error(`Request failed, status ${res.status}`)
    err.status = res.status
    throw err
  }
  return {
    status: res.status,
    text,
    arrayBuffer: buf,
    get json() {
      return JSON.parse(text)
    },
  }
}

export const notices = []
export class Notice {
  constructor(message) {
    notices.push(String(message))
  }
}

export const addIcon = () => {}

export class Plugin {
  constructor(app, manifest) {
    this.app = app
    this.manifest = manifest
    this.data = {}
  }
  async loadData() {
    return this.data
  }
  async saveData(d) {
    this.data = JSON.parse(JSON.stringify(d))
  }
  addCommand() {}
  addRibbonIcon() {}
  addSettingTab() {}
  registerInterval() {}
}

// A vault in memory: files by path, and folders.
export class Vault {
  constructor() {
    this.files = new Map()
    this.folders = new Set()
    this.log = []
  }
  getAbstractFileByPath(p) {
    if (this.files.has(p)) return new TFile(p)
    if (this.folders.has(p)) return new TFolder(p)
    return null
  }
  async createFolder(p) {
    if (this.folders.has(p)) throw new Error('Folder already exists.')
    this.folders.add(p)
  }
  async create(p, content) {
    if (this.files.has(p)) throw new Error('File already exists.')
    this.files.set(p, content)
    this.log.push(['create', p])
    return new TFile(p)
  }
  async modify(file, content) {
    this.files.set(file.path, content)
    this.log.push(['modify', file.path])
  }
  async read(file) {
    return this.files.get(file.path)
  }
  async delete(file) {
    this.files.delete(file.path)
    this.log.push(['delete', file.path])
  }
}

// The front matter of a note, as Obsidian's metadata cache parses it.
export const frontMatterOf = (content) => {
  const m = /^---\n([\s\S]*?)\n---/.exec(content || '')
  return m ? YAML.parse(m[1]) : undefined
}

export const makeApp = () => {
  const vault = new Vault()
  return {
    vault,
    metadataCache: {
      getFileCache: (file) => ({ frontmatter: frontMatterOf(vault.files.get(file.path)) }),
    },
    fileManager: {
      // Obsidian parses the front matter, calls fn, and writes it back
      // when fn changed it (the plugin's callback only reads it).
      processFrontMatter: async (file, fn) => {
        const fm = frontMatterOf(vault.files.get(file.path)) || {}
        await fn(fm)
      },
    },
    workspace: { getActiveFile: () => null },
  }
}
