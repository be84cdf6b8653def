// The core's layers import only downward (crates/core/src/lib.rs says which
// layer is which): a new upward import fails here, before it can grow into a
// circle again. Inside a layer, modules form no circle either; nor do the
// napi face's (crates/node/src).
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

/** The sibling modules (of `modules`, in `layer`) that a module's source names, its unit tests left out. */
export function siblingsUsed(source, layer, modules) {
  // A module's unit tests (its `mod tests`, last) may use any sibling.
  const text = code(source).split(/#\[cfg\((?:all\()?test\b/)[0]
  const used = new Set()
  const add = (name) => modules.includes(name) && used.add(name)
  // `crate::{…, verbs::spawn, …}` and `crate::{…, verbs::{spawn, queue}, …}`.
  for (const m of text.matchAll(/crate::\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}/g)) {
    for (const one of m[1].matchAll(new RegExp(`(?:^|[\\s,])${layer}::([a-z_]+)`, 'g'))) add(one[1])
    for (const group of m[1].matchAll(new RegExp(`(?:^|[\\s,])${layer}::\\{([^{}]*)\\}`, 'g'))) {
      for (const item of group[1].split(',')) add(item.trim().split('::')[0])
    }
  }
  for (const m of text.matchAll(new RegExp(`crate::${layer}::\\{([^{}]*(?:\\{[^{}]*\\}[^{}]*)*)\\}`, 'g'))) {
    for (const item of m[1].split(',')) add(item.trim().split('::')[0])
  }
  for (const m of text.matchAll(new RegExp(`(?:crate::${layer}|super)::([a-z_]+)`, 'g'))) add(m[1])
  return used
}

/** The circles (strongly connected sets of two or more modules) in `edges` (module -> modules it uses), named with `label`. */
function circlesAmong(label, edges) {
  let next = 0
  const order = new Map()
  const low = new Map()
  const stack = []
  const circles = []
  const visit = (v) => {
    order.set(v, next)
    low.set(v, next++)
    stack.push(v)
    for (const w of edges.get(v)) {
      if (!order.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (stack.includes(w)) {
        low.set(v, Math.min(low.get(v), order.get(w)))
      }
    }
    if (low.get(v) === order.get(v)) {
      const circle = stack.splice(stack.indexOf(v))
      if (circle.length > 1) circles.push(`${label}: ${circle.sort().join(' <-> ')}`)
    }
  }
  for (const m of edges.keys()) if (!order.has(m)) visit(m)
  return circles
}

/** The circles among one layer's modules. */
function circlesIn(layer) {
  const dir = path.join(core, layer)
  const modules = fs.readdirSync(dir).filter((f) => f.endsWith('.rs') && f !== 'mod.rs').map((f) => f.slice(0, -3))
  const edges = new Map(modules.map((m) => [m, [...siblingsUsed(fs.readFileSync(path.join(dir, `${m}.rs`), 'utf8'), layer, modules)].filter((o) => o !== m)]))
  return circlesAmong(layer, edges)
}

test('no circle between the modules of one layer', () => {
  const circles = LAYERS.flatMap(circlesIn).sort()
  // The last two were broken in issue 26: notify <-> wake by an HTTP client
  // of its own (supervise/service.rs); ops <-> queue <-> spawn by `Context`
  // in verbs/context.rs, the request types in verbs/request.rs below both
  // queue and the launch (verbs/spawn.rs), and the start verb
  // (verbs/start.rs) above them.
  assert.deepEqual(circles, [])
})

test('the circle check sees sibling imports in every form they take', () => {
  const found = (src) => [...siblingsUsed(src, 'verbs', ['ops', 'spawn', 'queue'])].sort()
  assert.deepEqual(found('use crate::verbs::spawn::{self, Started};'), ['spawn'])
  assert.deepEqual(found('use crate::verbs::{ops::Context, queue};'), ['ops', 'queue'])
  assert.deepEqual(found('let q = super::queue::enqueue(c);'), ['queue'])
  assert.deepEqual(found('use crate::{store::digest, verbs::spawn, Error};'), ['spawn'])
  assert.deepEqual(found('use crate::{model::job, verbs::{ops::Context, queue}};'), ['ops', 'queue'])
  assert.deepEqual(found('// crate::verbs::ops\nlet s = "crate::verbs::queue";'), [])
  assert.deepEqual(found('fn f() {}\n#[cfg(test)]\nmod tests { use crate::verbs::ops::Context; }'), [])
})

/** What a module of a crate root (crates/node/src) takes through `crate::`: the first name of each path, its unit tests left out. */
export function rootNamesUsed(source) {
  const text = code(source).split(/#\[cfg\((?:all\()?test\b/)[0]
  const used = new Set()
  for (const m of text.matchAll(/crate::\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}/g)) {
    for (const item of m[1].split(',')) used.add(item.trim().split('::')[0])
  }
  for (const m of text.matchAll(/crate::([A-Za-z_][A-Za-z0-9_]*)/g)) used.add(m[1])
  used.delete('')
  return used
}

test('the napi face\'s modules form no circle and take nothing from lib.rs', () => {
  const dir = path.join(root, 'crates', 'node', 'src')
  const modules = fs.readdirSync(dir).filter((f) => f.endsWith('.rs') && f !== 'lib.rs').map((f) => f.slice(0, -3))
  const fromRoot = []
  const edges = new Map()
  for (const m of modules) {
    const used = rootNamesUsed(fs.readFileSync(path.join(dir, `${m}.rs`), 'utf8'))
    // An item of lib.rs itself would put lib.rs, which declares every
    // module, in a circle with the module.
    for (const name of used) if (!modules.includes(name)) fromRoot.push(`${m}.rs uses crate::${name}`)
    edges.set(m, [...used].filter((o) => o !== m && modules.includes(o)))
  }
  assert.deepEqual(fromRoot, [], 'modules take what they need from modules, not from lib.rs')
  assert.deepEqual(circlesAmong('node', edges), [], 'no circle')
})

test('the root check sees crate:: paths in every form they take', () => {
  const found = (src) => [...rootNamesUsed(src)].sort()
  assert.deepEqual(found('use crate::js_args::{string_arg, Options};'), ['js_args'])
  assert.deepEqual(found('use crate::{context, to_js_error};'), ['context', 'to_js_error'])
  assert.deepEqual(found('T::deserialize(crate::js_serde::JsInput::options(x))'), ['js_serde'])
  assert.deepEqual(found('// crate::lib_item\nlet s = "crate::other";'), [])
})
