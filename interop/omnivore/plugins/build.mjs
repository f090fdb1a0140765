// Bundles the plugins' own sources (vendored unchanged in third_party/, see
// README.md) for Node with esbuild: the Obsidian plugin's src/main.ts with its
// `obsidian` import resolved to stubs/obsidian.mjs (kept outside the
// bundle, so the runner and the plugin share one module), its settings
// screen to stubs/settingsTab.mjs, and `@omnivore-app/api` to the client
// 1.0.3 its yarn.lock pins (omnivore-api @ f8b6b64, vendored: npm serves
// only 1.0.4, whose option is apiKey where 1.0.3's, which the plugin
// passes, is authToken); the Logseq plugin's src/api.ts and
// src/settings/template.ts with the npm client 1.0.4 its lockfile pins.
import * as esbuild from 'esbuild'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const stub = (name) => path.join(here, 'stubs', name)

const resolveTo = (map) => ({
  name: 'resolve-to',
  setup(build) {
    for (const [filter, to] of map) {
      build.onResolve({ filter }, () => to)
    }
  },
})

export const buildPlugins = async (outdir) => {
  const common = { bundle: true, platform: 'node', format: 'esm', target: 'node20', logLevel: 'warning', sourcemap: false }
  await esbuild.build({
    ...common,
    entryPoints: [path.join(here, 'third_party/obsidian-omnivore/src/main.ts')],
    outfile: path.join(outdir, 'obsidian-omnivore.mjs'),
    plugins: [
      resolveTo([
        [/^obsidian$/, { path: stub('obsidian.mjs'), external: true }],
        [/^\.\/settingsTab$/, { path: stub('settingsTab.mjs') }],
        [/^@omnivore-app\/api$/, { path: path.join(here, 'third_party/omnivore-api/src/index.ts') }],
      ]),
    ],
  })
  await esbuild.build({
    ...common,
    entryPoints: [stub('logseq-entry.ts')],
    outfile: path.join(outdir, 'logseq-omnivore.mjs'),
  })
  return {
    obsidian: path.join(outdir, 'obsidian-omnivore.mjs'),
    logseq: path.join(outdir, 'logseq-omnivore.mjs'),
    obsidianStub: stub('obsidian.mjs'),
  }
}
