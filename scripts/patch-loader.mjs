#!/usr/bin/env node
// Run after `napi build` regenerates index.js (npm run build:bindings), on
// index.js or on the file given. napi writes one `module.exports.x =` line per
// #[napi] item of the addon, and those lines are also where Node finds the
// ESM named exports (cjs-module-lexer reads them): the addon is the one list
// of the native exports. This adds the exports written in JS (LOADER_EXPORTS)
// after them, and replaces the generated loader's failure message, which
// blames "a bug related to optional dependencies" whatever happened, with
// platform.js's, which names the platform package looked for and the fix.
// Idempotent; fails loudly when the generated text changed shape, so a
// regeneration cannot silently drop it. __test__/surface.test.mjs checks that
// index.js is what this makes of napi's loader for the addon.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** The exports written in JS, on top of the native ones: name → the expression index.js exports. */
export const LOADER_EXPORTS = {
  // pm.jobEvents: the ends of the native watchJobs as an EventEmitter.
  jobEvents: "require('./job-events.js').jobEventsOf(nativeBinding)",
}

/** What napi's generated loader exports besides the addon's items. */
export const NAPI_LOADER_EXPORTS = ['__napiBindingTarget']

const generatedFailure =
  /    const error = new Error\(\n      `Cannot find native binding\. ` \+\n[\s\S]*?    error\.cause = createLoadErrorChain\(loadErrors\)\n    throw error\n/
const patchedFailure = "    throw require('./platform.js').bindingError(loadErrors, createLoadErrorChain(loadErrors))\n"

/** napi's generated loader `text`, patched (unchanged if it already was). */
export function patchLoader(text) {
  if (!text.includes(patchedFailure)) {
    if (!generatedFailure.test(text)) {
      throw new Error('the failure block of the loader is not the one napi generated before; update scripts/patch-loader.mjs')
    }
    text = text.replace(generatedFailure, patchedFailure)
  }
  // After the generated exports, which napi rewrites.
  for (const [name, expression] of Object.entries(LOADER_EXPORTS)) {
    const line = `module.exports.${name} = ${expression}\n`
    if (!text.includes(line)) text = text.trimEnd() + '\n' + line
  }
  return text
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const file = process.argv[2] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'index.js')
  const source = fs.readFileSync(file, 'utf8')
  let text
  try {
    text = patchLoader(source)
  } catch (error) {
    console.error(`patch-loader: ${file}: ${error.message}`)
    process.exit(1)
  }
  if (text !== source) fs.writeFileSync(file, text)
}
