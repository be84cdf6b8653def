#!/usr/bin/env node
// Run after `napi build` regenerates index.js (npm run build:bindings), on
// index.js or on the file given. napi writes one `module.exports.x =` line per
// #[napi] item of the addon, and those lines are also where Node finds the
// ESM named exports (cjs-module-lexer reads them): the addon is the one list
// of the native exports. This adds the exports written in JS (LOADER_EXPORTS)
// after them, and replaces the generated loader's failure message, which
// blames "a bug related to optional dependencies" whatever happened, with
// platform.js's, which names the platform package looked for and the fix.
// On win32-x64 napi's loader takes the gnu addon only under a Node built
// with mingw (shlib_suffix dll.a) or as a shared library, and the msvc one
// under the official node.exe; proc-manager builds and ships only
// x86_64-pc-windows-gnu (mingw-w64), which loads in the official node.exe
// too, so the patched loader takes the gnu addon on every win32-x64 Node.
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

// The condition napi puts before the win32-x64-gnu addon, and what replaces it.
const generatedWin32Gnu =
  "      if ((process.config && process.config.variables && process.config.variables.shlib_suffix === 'dll.a') || (process.config && process.config.variables && process.config.variables.node_target_type === 'shared_library')) {\n"
const patchedWin32Gnu =
  '      // proc-manager ships the gnu (mingw-w64) build only, loaded by any win32-x64 Node (scripts/patch-loader.mjs)\n' +
  '      if (true) {\n'

/** napi's generated loader `text`, patched (unchanged if it already was). */
export function patchLoader(text) {
  if (!text.includes(patchedWin32Gnu)) {
    if (!text.includes(generatedWin32Gnu)) {
      throw new Error('the win32-x64 gnu/msvc choice of the loader is not the one napi generated before; update scripts/patch-loader.mjs')
    }
    text = text.replace(generatedWin32Gnu, patchedWin32Gnu)
  }
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
