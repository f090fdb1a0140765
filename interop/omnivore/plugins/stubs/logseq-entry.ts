// The Logseq plugin's own API and template modules (src/api.ts,
// src/settings/template.ts @ 0174149), bundled as they are.
export * from '../third_party/logseq-omnivore/src/api'
export * from '../third_party/logseq-omnivore/src/settings/template'
