#!/usr/bin/env node
// Run after `napi build` regenerates index.js: replaces the generated
// loader's failure message, which blames "a bug related to optional
// dependencies" whatever happened, with platform.js's, which names the
// platform package looked for and the fix. Idempotent; fails loudly when the
// generated text changed shape, so a regeneration cannot silently drop it.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const file = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'index.js')
const source = fs.readFileSync(file, 'utf8')
const patched = "    throw require('./platform.js').bindingError(loadErrors, createLoadErrorChain(loadErrors))\n"
if (source.includes(patched)) process.exit(0)
const generated = /    const error = new Error\(\n      `Cannot find native binding\. ` \+\n[\s\S]*?    error\.cause = createLoadErrorChain\(loadErrors\)\n    throw error\n/
if (!generated.test(source)) {
  console.error(`patch-loader: the failure block of ${file} is not the one napi generated before; update scripts/patch-loader.mjs`)
  process.exit(1)
}
fs.writeFileSync(file, source.replace(generated, patched))
