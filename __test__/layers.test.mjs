// The core's layers import only downward (crates/core/src/lib.rs says which
// layer is which): a new upward import fails here, before it can grow into a
// circle again.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { root } from './helpers.mjs'

const LAYERS = ['model', 'os', 'store', 'supervise', 'verbs', 'present']
const core = path.join(root, 'crates', 'core', 'src')

/** Rust source without comments and string literals, which may name anything. */
function code(text) {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '')
    .replace(/r(#*)"[\s\S]*?"\1/g, '""')
    .replace(/"(?:\\.|[^"\\])*"/g, '""')
}

/** Every layer a file reaches through `crate::`, with the text that does it. */
export function layersUsed(source) {
  const used = []
  const text = code(source)
  for (const m of text.matchAll(/crate::\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}/g)) {
    for (const item of m[1].split(',')) {
      const head = item.trim().split('::')[0]
      if (LAYERS.includes(head)) used.push({ layer: head, via: `crate::{…${item.trim()}…}` })
    }
  }
  for (const m of text.matchAll(/crate::([a-z_]+)/g)) {
    if (LAYERS.includes(m[1])) used.push({ layer: m[1], via: m[0] })
  }
  return used
}

test('every layer of the core imports only from the layers below it', () => {
  const upward = []
  for (const layer of LAYERS) {
    const dir = path.join(core, layer)
    assert.ok(fs.existsSync(dir), `layer folder ${layer}/ exists`)
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.rs'))) {
      for (const { layer: other, via } of layersUsed(fs.readFileSync(path.join(dir, file), 'utf8'))) {
        if (LAYERS.indexOf(other) > LAYERS.indexOf(layer)) upward.push(`${layer}/${file} uses ${other} (${via})`)
      }
    }
  }
  assert.deepEqual(upward, [], 'no upward import')
  const loose = fs.readdirSync(core).filter((f) => f.endsWith('.rs') && f !== 'lib.rs')
  assert.deepEqual(loose, [], 'every module lives in a layer')
})

test('the layer check sees upward imports in every form they take', () => {
  const found = (src) => layersUsed(src).map((u) => u.layer)
  assert.deepEqual(found('use crate::verbs::ops::Context;'), ['verbs'])
  assert.deepEqual(found('use crate::{model::job, present::format, Error};'), ['model', 'present'])
  assert.deepEqual(found('let x = crate::supervise::notify::claim(c, j);'), ['supervise'])
  assert.deepEqual(found('// crate::present::format is mentioned in a comment\nlet s = "crate::verbs";'), [])
})
