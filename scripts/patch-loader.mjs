#!/usr/bin/env node
// Run after `napi build` regenerates index.js: adds `jobEvents` (job-events.js)
// to its exports, and replaces the generated
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
let text = source
if (!text.includes(patched)) {
  if (!generated.test(text)) {
    console.error(`patch-loader: the failure block of ${file} is not the one napi generated before; update scripts/patch-loader.mjs`)
    process.exit(1)
  }
  text = text.replace(generated, patched)
}
// pm.jobEvents, written in JS on top of the native watchJobs: after the
// generated exports, which napi rewrites.
const jobEvents = "module.exports.jobEvents = require('./job-events.js').jobEventsOf(nativeBinding)\n"
if (!text.includes(jobEvents)) text = text.trimEnd() + '\n' + jobEvents
if (text !== source) fs.writeFileSync(file, text)
