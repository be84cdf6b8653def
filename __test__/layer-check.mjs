// The layer check behind __test__/layers.test.mjs: it reads each crate's
// modules the way rustc finds them (from the crate root, `mod x;` and
// `#[path]`), every import in every form it takes, and says which of them
// run up a layer, take from the crate root, or close a circle.
//
// It reads Rust as tokens, not lines: comments, strings and char literals
// cannot hide or fake an import; test code is left out by parsing (the item
// after `#[cfg(test)]` or `#[test]`, brace-matched, and the files of
// `#[cfg(test)] mod x;`), not by cutting a file at its first `cfg(test`.
//
// Forms read: `use` (plain, `{…}` groups nested to any depth, `self`, globs,
// `as`), `pub use` re-exports (followed: a path through one reaches what it
// names), paths written inline without a `use` (`crate::…`, `super::…` to any
// depth, `self::…`, `$crate::…` in macros, and names a `use` or glob brought
// in), paths inside attribute strings (`#[serde(with = "crate::…")]`), and
// macros by name (`outln!` reaches the file whose `macro_rules!` defines it).
// Not read: what macros expand to (derives, `include!`), which names no file
// of ours but through paths it was given, and those are read.
//
// An import counts wherever a `cfg` lets it compile, test-only ones aside;
// circles are looked for on Linux, macOS and Windows each, with every `cfg`
// on the way (the declaration of a file, an item, a re-export) evaluated
// for that platform, so that a module with a file per platform is the
// right file on each.
import fs from 'node:fs'
import path from 'node:path'

/** The crates checked: `layers` lists the top-level modules from the bottom up; each may take only from those before it. */
export const CRATES = [
  // crates/core/src/lib.rs says which layer is which.
  { name: 'core', dir: 'crates/core/src', root: 'lib.rs', layers: ['model', 'os', 'store', 'supervise', 'verbs', 'present'], platformHome: 'os' },
  // main.rs parses and dispatches; the verbs (cmd/) print through print.rs
  // and name their flags through face.rs, which reads the clap definitions
  // (args.rs).
  { name: 'cli', dir: 'crates/cli/src', root: 'main.rs', layers: ['print', 'warnings', 'args', 'face', 'context', 'cmd'] },
  { name: 'node', dir: 'crates/node/src', root: 'lib.rs' },
  { name: 'top', dir: 'crates/top/src', root: 'main.rs' },
]

// ---------------------------------------------------------------- tokens

const identStart = (c) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_'
const identChar = (c) => identStart(c) || (c >= '0' && c <= '9')

/**
 * Rust source as tokens: { k: 'id' | 'p' (punctuation) | 's' (string, its
 * text) | 'c' (char) | 'lt' (lifetime) | 'n' (number), v, line }. Comments
 * (nested block comments too) are dropped; `::` is one token; `$crate` is
 * one identifier.
 */
export function lex(src) {
  const out = []
  let i = 0
  let line = 1
  const n = src.length
  const newlines = (from, to) => {
    for (let j = from; j < to; j++) if (src[j] === '\n') line++
  }
  while (i < n) {
    const c = src[i]
    if (c === '\n') { line++; i++; continue }
    if (c === ' ' || c === '\t' || c === '\r') { i++; continue }
    if (c === '/' && src[i + 1] === '/') {
      while (i < n && src[i] !== '\n') i++
      continue
    }
    if (c === '/' && src[i + 1] === '*') {
      let depth = 0
      const from = i
      while (i < n) {
        if (src[i] === '/' && src[i + 1] === '*') { depth++; i += 2; continue }
        if (src[i] === '*' && src[i + 1] === '/') { depth--; i += 2; if (depth === 0) break; continue }
        i++
      }
      newlines(from, i)
      continue
    }
    // Raw strings, byte and C strings: r"…", r#"…"#, br"…", b"…", c"…", cr#"…"#.
    const prefix = (c === 'r' || c === 'b' || c === 'c') && /^(?:br|cr|r|b|c)(?=#*")/.exec(src.slice(i, i + 3))
    if (prefix && (prefix[0].endsWith('r') || src[i + prefix[0].length] === '"')) {
      let j = i + prefix[0].length
      if (prefix[0].endsWith('r')) {
        let hashes = 0
        while (src[j] === '#') { hashes++; j++ }
        const close = '"' + '#'.repeat(hashes)
        const end = src.indexOf(close, j + 1)
        const stop = end < 0 ? n : end + close.length
        out.push({ k: 's', v: src.slice(j + 1, end < 0 ? n : end), line })
        newlines(i, stop)
        i = stop
        continue
      }
      i = j // b"…" / c"…": read as a plain string below
    }
    if (src[i] === '"') {
      const from = i
      let j = i + 1
      while (j < n && src[j] !== '"') j += src[j] === '\\' ? 2 : 1
      out.push({ k: 's', v: src.slice(from + 1, j), line })
      newlines(from, j)
      i = j + 1
      continue
    }
    if (c === 'b' && src[i + 1] === "'") { i++; continue } // b'x': the char below
    if (src[i] === "'") {
      if (src[i + 1] === '\\') {
        let j = i + 3
        while (j < n && src[j] !== "'") j++
        out.push({ k: 'c', v: src.slice(i, j + 1), line })
        i = j + 1
        continue
      }
      const cp = src.codePointAt(i + 1)
      const width = cp > 0xffff ? 2 : 1
      if (src[i + 1 + width] === "'") {
        out.push({ k: 'c', v: src.slice(i, i + 2 + width), line })
        i += 2 + width
        continue
      }
      let j = i + 1
      while (j < n && identChar(src[j])) j++
      out.push({ k: 'lt', v: src.slice(i, j), line })
      i = j
      continue
    }
    if (c === '$' && src.startsWith('crate', i + 1) && !identChar(src[i + 6] ?? '')) {
      out.push({ k: 'id', v: '$crate', line })
      i += 6
      continue
    }
    if (c === 'r' && src[i + 1] === '#' && identStart(src[i + 2] ?? '')) i += 2 // r#type
    if (identStart(src[i])) {
      let j = i
      while (j < n && identChar(src[j])) j++
      out.push({ k: 'id', v: src.slice(i, j), line })
      i = j
      continue
    }
    if (c >= '0' && c <= '9') {
      let j = i
      while (j < n && identChar(src[j])) j++
      out.push({ k: 'n', v: src.slice(i, j), line })
      i = j
      continue
    }
    if (c === ':' && src[i + 1] === ':') {
      out.push({ k: 'p', v: '::', line })
      i += 2
      continue
    }
    out.push({ k: 'p', v: c, line })
    i++
  }
  return out
}

// A file's tokens by its text: a tree checked again (a copy with one change) lexes only what changed.
const lexed = new Map()
function tokensOf(text) {
  if (!lexed.has(text)) lexed.set(text, lex(text))
  return lexed.get(text)
}

const is = (t, v) => t !== undefined && t.k !== 's' && t.k !== 'c' && t.v === v
const isId = (t) => t !== undefined && t.k === 'id'

// ------------------------------------------------------------ attributes

/** The tokens of a `cfg(...)` predicate as a tree: { name, args } or { name, value }. */
function predicate(toks, at) {
  const name = toks[at].v
  if (is(toks[at + 1], '=')) return { node: { name, value: toks[at + 2]?.v }, next: at + 3 }
  if (!is(toks[at + 1], '(')) return { node: { name }, next: at + 1 }
  const args = []
  let i = at + 2
  while (i < toks.length && !is(toks[i], ')')) {
    if (is(toks[i], ',')) { i++; continue }
    const { node, next } = predicate(toks, i)
    args.push(node)
    i = next
  }
  return { node: { name, args }, next: i + 1 }
}

/** Whether code under this cfg predicate is compiled for tests alone. */
function testOnly(p) {
  if (p.name === 'test' && !p.args) return true
  if (p.name === 'all') return p.args.some(testOnly)
  if (p.name === 'any') return p.args.length > 0 && p.args.every(testOnly)
  return false
}

/** Whether a cfg predicate names a platform (`unix`, `windows`, `target_os = …`). */
function platformCfg(p) {
  if (['unix', 'windows', 'target_os', 'target_family'].includes(p.name)) return true
  return (p.args ?? []).some(platformCfg)
}

/** One attribute, `#[…]` or `#![…]`, from `at` (its `#`): what the check needs of it. */
function attribute(toks, at) {
  const inner = is(toks[at + 1], '!')
  const open = at + (inner ? 2 : 1)
  let depth = 0
  let end = open
  for (; end < toks.length; end++) {
    if (is(toks[end], '[') || is(toks[end], '(') || is(toks[end], '{')) depth++
    else if (is(toks[end], ']') || is(toks[end], ')') || is(toks[end], '}')) if (--depth === 0) break
  }
  const body = toks.slice(open + 1, end)
  const attr = { inner, next: end + 1, test: false, platform: false, cfg: null, path: null, strings: [], macroExport: false, line: toks[at].line }
  const head = body[0]?.v
  if (head === 'test' && body.length === 1) attr.test = true
  if (head === 'cfg' && is(body[1], '(')) {
    const { node } = predicate(body, 0)
    const p = node.args?.[0]
    if (p) {
      attr.cfg = p
      attr.test = testOnly(p)
      attr.platform = platformCfg(p)
    }
  }
  if (head === 'path' && is(body[1], '=') && body[2]?.k === 's') attr.path = body[2].v
  if (head === 'macro_export') attr.macroExport = true
  for (const t of body) if (t.k === 's' && /^(?:crate|self|super|\$crate)(?:::[A-Za-z_][A-Za-z0-9_]*)+$/.test(t.v)) attr.strings.push(t.v)
  return attr
}

/** Where the item starting at `at` ends (the index after it): at its `;` or `,`, or the `}` of its body; before a closer it did not open. */
function itemEnd(toks, at) {
  let k = at
  while (isId(toks[k]) && ['pub', 'unsafe', 'async', 'extern', 'default'].includes(toks[k].v)) {
    k++
    if (is(toks[k], '(')) {
      while (k < toks.length && !is(toks[k], ')')) k++
      k++
    }
    if (toks[k]?.k === 's') k++ // extern "C"
  }
  const semicolonOnly = isId(toks[k]) && ['use', 'const', 'static', 'type', 'let'].includes(toks[k].v)
  let depth = 0
  for (let j = at; j < toks.length; j++) {
    const t = toks[j]
    if (is(t, '(') || is(t, '[') || is(t, '{')) depth++
    else if (is(t, ')') || is(t, ']') || is(t, '}')) {
      if (depth === 0) return j
      depth--
      if (depth === 0 && t.v === '}' && !semicolonOnly) return j + 1
    } else if ((is(t, ';') || is(t, ',')) && depth === 0) return j + 1
  }
  return toks.length
}

// ------------------------------------------------------------ use trees

/** A `use` declaration's tree from `at` (after `use`) to its `;`: each leaf as { segs, glob, alias, depth } (depth: how deep in `{…}` groups). */
function useTree(toks, at) {
  const leaves = []
  let i = at
  const tree = (prefix, depth) => {
    const segs = [...prefix]
    if (is(toks[i], '::')) i++ // `use ::std::…`
    for (;;) {
      if (is(toks[i], '{')) {
        i++
        while (!is(toks[i], '}') && i < toks.length) {
          if (is(toks[i], ',')) { i++; continue }
          tree(segs, depth + 1)
        }
        i++
        return
      }
      if (is(toks[i], '*')) {
        i++
        leaves.push({ segs, glob: true, alias: null, depth })
        return
      }
      if (!isId(toks[i])) return
      segs.push(toks[i].v)
      i++
      if (is(toks[i], '::')) { i++; continue }
      let alias = null
      if (is(toks[i], 'as')) {
        alias = toks[i + 1]?.v
        i += 2
      }
      // `a::{self}` names `a` itself.
      if (segs.at(-1) === 'self' && segs.length > 1) segs.pop()
      leaves.push({ segs, glob: false, alias: alias ?? segs.at(-1), depth })
      return
    }
  }
  tree([], 0)
  while (i < toks.length && !is(toks[i], ';')) i++
  return { leaves, next: i + 1 }
}

/** How a path starts, for naming the form: `crate::`, `super::super::`, `self::`, `$crate::`, or a name. */
function headOf(segs) {
  let k = 0
  while (segs[k] === 'super') k++
  return k > 0 ? 'super::'.repeat(k) : `${segs[0]}::`
}

// --------------------------------------------------------------- modules

class Module {
  constructor(name, parent) {
    this.name = name
    this.parent = parent
    this.children = new Map()
    this.files = new Set() // the files its code is in (several: one per platform)
    this.uses = new Map() // name -> [{ segs, module, file, cond }]: what a `use` brought in, as written (a file of each platform its own)
    this.globs = [] // { segs, module }
    this.path = parent ? [...parent.path, name] : []
  }
  child(name) {
    if (!this.children.has(name)) this.children.set(name, new Module(name, this))
    return this.children.get(name)
  }
}

const ROOT_FILES = ['lib.rs', 'main.rs', 'mod.rs']
const STARTERS = new Set(['pub', 'mod', 'use', 'macro_rules'])

/** Reads one crate from its root file: its modules and files, the test files left out, and every reference its code makes (unresolved). */
export function readCrate(crateDir, rootFile) {
  const root = new Module('', null)
  const files = new Map() // rel -> { module, test, platformPath }
  const refs = [] // { file, module, segs | name, form, line, text }
  const macros = new Map() // macro_rules! name -> Set of files
  const exportedMacros = new Map() // #[macro_export] name -> file
  const skipped = [] // test items left out: { file, line, from, end } (from: its first attribute's line; end: its last)

  /** The file of `mod name;` declared in `frame` (`#[path]` relative to the declaring file's directory, or the inline module's). */
  const childFile = (frame, name, pathAttr) => {
    if (pathAttr) return path.normalize(path.join(frame.inline ? frame.dir : frame.fileDir, pathAttr))
    const flat = path.join(frame.dir, `${name}.rs`)
    return fs.existsSync(path.join(crateDir, flat)) ? flat : path.join(frame.dir, name, 'mod.rs')
  }

  const parseFile = (rel, module, platformPath, cond) => {
    module.files.add(rel)
    if (files.has(rel)) return
    const abs = path.join(crateDir, rel)
    if (!fs.existsSync(abs)) return
    files.set(rel, { module, test: false, platformPath, cond })
    const toks = tokensOf(fs.readFileSync(abs, 'utf8'))
    const fileDir = path.dirname(rel)
    const ownsDir = rel === rootFile || ROOT_FILES.includes(path.basename(rel))
    // Frames: the file's module, inline modules (`mod x { … }`), other blocks.
    const frames = [{ module, dir: ownsDir ? fileDir : path.join(fileDir, path.basename(rel, '.rs')), fileDir, inline: false }]
    const scope = () => frames.findLast((f) => f.module)
    // The cfg of the items the scan is inside (`#[cfg(unix)] fn f() { … }`), each until its end.
    const regions = []
    const conds = () => [...cond, ...regions.map((r) => r.cfg)]
    const declare = (name, pathAttr, platform, cfgs) => {
      const frame = scope()
      const file = childFile(frame, name, pathAttr)
      parseFile(file, frame.module.child(name), platform && Boolean(pathAttr), [...conds(), ...cfgs])
    }
    let pending = []
    let i = 0
    while (i < toks.length) {
      while (regions.length > 0 && i >= regions.at(-1).end) regions.pop()
      const t = toks[i]
      if (is(t, '#') && (is(toks[i + 1], '[') || (is(toks[i + 1], '!') && is(toks[i + 2], '[')))) {
        const attr = attribute(toks, i)
        i = attr.next
        if (attr.inner && attr.test) {
          // `#![cfg(test)]`: the whole module is test code.
          const item = { file: rel, line: attr.line, end: attr.line }
          skipped.push(item)
          if (frames.length === 1) {
            files.get(rel).test = true
            return
          }
          for (let depth = 1; i < toks.length && depth > 0; i++) {
            if (is(toks[i], '{')) depth++
            if (is(toks[i], '}')) depth--
          }
          item.end = toks[i - 1]?.line ?? item.end
          frames.pop()
          continue
        }
        if (!attr.inner) pending.push(attr)
        continue
      }
      // Most tokens start nothing the check reads.
      if (pending.length === 0) {
        if (t.k !== 'id' && t.v !== '{' && t.v !== '}') {
          i++
          continue
        }
        if (t.k === 'id' && !STARTERS.has(t.v) && !is(toks[i + 1], '::') && !is(toks[i + 1], '!')) {
          i++
          continue
        }
      }
      const attrs = pending
      if (pending.length > 0) pending = []
      // The item the attributes are on, past its visibility: `pub(crate) mod x;`.
      let k = i
      if (is(toks[k], 'pub')) {
        k++
        if (is(toks[k], '(')) {
          while (k < toks.length && !is(toks[k], ')')) k++
          k++
        }
      }
      const modDecl = is(toks[k], 'mod') && isId(toks[k + 1]) && is(toks[k + 2], ';')
      if (attrs.some((a) => a.test)) {
        // From its first attribute to its last token: what `long` leaves out.
        const item = { file: rel, line: t.line, from: Math.min(t.line, ...attrs.map((a) => a.line)), end: t.line }
        skipped.push(item)
        // `#[cfg(test)] mod x;`: x's file is test code, read no further.
        if (modDecl) {
          const file = childFile(scope(), toks[k + 1].v, attrs.find((a) => a.path)?.path)
          if (!files.has(file)) files.set(file, { module: null, test: true, platformPath: false })
        }
        i = itemEnd(toks, i)
        item.end = toks[i - 1]?.line ?? item.end
        continue
      }
      const cfgs = attrs.filter((a) => a.cfg).map((a) => a.cfg)
      if (modDecl) {
        declare(toks[k + 1].v, attrs.find((a) => a.path)?.path, attrs.some((a) => a.platform), cfgs)
        i = k + 3
        continue
      }
      if (cfgs.length > 0) regions.push(...cfgs.map((cfg) => ({ cfg, end: itemEnd(toks, i) })))
      for (const a of attrs) {
        for (const s of a.strings) {
          const segs = s.split('::')
          refs.push({ file: rel, module: scope().module, segs, form: `attribute string ${headOf(segs)}`, line: a.line, text: `"${s}"`, cond: conds() })
        }
      }
      if (is(toks[k], 'mod') && isId(toks[k + 1]) && is(toks[k + 2], '{')) {
        const outer = scope()
        const inner = outer.module.child(toks[k + 1].v)
        inner.files.add(rel)
        frames.push({ module: inner, dir: path.join(outer.dir, toks[k + 1].v), fileDir, inline: true })
        i = k + 3
        continue
      }
      if (is(toks[k], 'use')) {
        const exported = k > i
        const { leaves, next } = useTree(toks, k + 1)
        const text = toks.slice(i, next).map((x) => (x.k === 's' ? `"${x.v}"` : x.v)).join(' ')
          .replace(/ ?:: ?/g, '::').replace(/ ?([{},;]) ?/g, '$1 ').replace(/\{ /g, '{').replace(/ \}/g, '}').trim()
        const here = scope().module
        for (const leaf of leaves) {
          const group = leaf.depth >= 2 ? ' nested group' : leaf.depth === 1 ? ' group' : ''
          const form = `${exported ? 'pub use' : 'use'}${group}${leaf.glob ? ' glob' : ''} ${headOf(leaf.segs)}`
          refs.push({ file: rel, module: here, segs: leaf.segs, form, line: t.line, text, glob: leaf.glob, cond: conds() })
          if (leaf.glob) here.globs.push({ segs: leaf.segs, module: here, file: rel, cond: conds() })
          else if (leaf.alias && leaf.alias !== '_' && leaf.alias !== 'self') {
            if (!here.uses.has(leaf.alias)) here.uses.set(leaf.alias, [])
            here.uses.get(leaf.alias).push({ segs: leaf.segs, module: here, file: rel, cond: conds() })
          }
        }
        i = next
        continue
      }
      if (is(t, 'macro_rules') && is(toks[i + 1], '!') && isId(toks[i + 2])) {
        const name = toks[i + 2].v
        if (!macros.has(name)) macros.set(name, new Set())
        macros.get(name).add(rel)
        if (attrs.some((a) => a.macroExport)) exportedMacros.set(name, rel)
        i += 3
        continue
      }
      if (is(t, '{')) {
        frames.push({ module: null })
        i++
        continue
      }
      if (is(t, '}')) {
        if (frames.length > 1) frames.pop()
        i++
        continue
      }
      // A path written inline: `crate::a::b`, `super::super::x`, `self::x`, `$crate::x`, `name::x`.
      if (isId(t) && is(toks[i + 1], '::') && isId(toks[i + 2]) && !is(toks[i - 1], '::')) {
        const segs = [t.v]
        let j = i + 1
        while (is(toks[j], '::') && isId(toks[j + 1])) {
          segs.push(toks[j + 1].v)
          j += 2
        }
        const bang = is(toks[j], '!') ? '!' : ''
        refs.push({ file: rel, module: scope().module, segs, form: `path ${headOf(segs)}`, line: t.line, text: segs.join('::') + bang, cond: conds() })
        i = j
        continue
      }
      // A macro by its name alone: `outln!(…)` reaches the file that defines it.
      if (isId(t) && is(toks[i + 1], '!') && !is(toks[i + 2], '=') && !is(toks[i - 1], '::')) {
        refs.push({ file: rel, module: scope().module, name: t.v, form: `macro ${t.v}!`, line: t.line, text: `${t.v}!`, cond: conds() })
      }
      i++
    }
  }
  parseFile(rootFile, root, false, [])
  return { root, files, refs, macros, exportedMacros, skipped }
}

// ------------------------------------------------------------ resolution

/**
 * Resolves a crate's references to the files they reach: edges { from, to,
 * form, line, text, cond }. A name may mean another thing on each platform
 * (one module, a file per platform, each with its own `use`s): every
 * meaning is an edge, under the cfg it holds on.
 */
export function edgesOf(crate) {
  const { root, refs, macros, exportedMacros } = crate
  /** The paths from the crate root that `segs`, written in `module`, may name: [{ segs, via, cond }]; none for another crate's. */
  const absolute = (segs, module, depth = 0) => {
    if (depth > 16) return []
    if (segs[0] === 'crate' || segs[0] === '$crate') return [{ segs: segs.slice(1), via: [], cond: [] }]
    if (segs[0] === 'self') return [{ segs: [...module.path, ...segs.slice(1)], via: [], cond: [] }]
    if (segs[0] === 'super') {
      let m = module
      let k = 0
      while (segs[k] === 'super') {
        m = m.parent ?? m
        k++
      }
      return [{ segs: [...m.path, ...segs.slice(k)], via: [], cond: [] }]
    }
    const [name, ...rest] = segs
    if (module.children.has(name)) return [{ segs: [...module.path, ...segs], via: [], cond: [] }]
    if (module.uses.has(name)) {
      return module.uses.get(name).flatMap((use) => {
        // `use serde;`, `use clap::Parser;`: another crate's.
        if (use.segs[0] === name && use.segs.length === 1) return []
        return absolute(use.segs, use.module, depth + 1).map((t) => ({ segs: [...t.segs, ...rest], via: t.via, cond: [...use.cond, ...t.cond] }))
      })
    }
    return module.globs.flatMap((glob) =>
      absolute(glob.segs, glob.module, depth + 1).flatMap((at) =>
        locate(at.segs, depth + 1)
          .filter((held) => held.rest.length === 0 && (held.node.children.has(name) || held.node.uses.has(name)))
          .map(() => ({ segs: [...at.segs, ...segs], via: [...at.via, `glob ${glob.segs.join('::')}::*`], cond: [...glob.cond, ...at.cond] })),
      ),
    )
  }
  /** Where a path from the root ends: [{ node, files, rest, via, cond }], following `use`s (re-exports) through. */
  const locate = (segs, depth = 0) => {
    let node = root
    for (let k = 0; k < segs.length; k++) {
      const s = segs[k]
      if (node.children.has(s)) {
        node = node.children.get(s)
        continue
      }
      const here = { node, files: [...node.files], rest: segs.slice(k), via: [], cond: [] }
      if (!node.uses.has(s) || depth >= 16) return [here]
      const uses = node.uses.get(s)
      const through = uses.flatMap((use) =>
        absolute(use.segs, use.module, depth + 1).flatMap((target) =>
          locate([...target.segs, ...segs.slice(k + 1)], depth + 1).map((further) => ({
            ...further,
            via: [`re-export in ${use.file}`, ...target.via, ...further.via],
            cond: [...use.cond, ...target.cond, ...further.cond],
          })),
        ),
      )
      // The module's other files (another platform's) may define the name themselves.
      const defining = here.files.filter((f) => !uses.some((u) => u.file === f))
      return defining.length > 0 ? [...through, { ...here, files: defining }] : through
    }
    return [{ node, files: [...node.files], rest: [], via: [], cond: [] }]
  }
  const edges = []
  const add = (ref, to, form, cond, item) => {
    if (to !== ref.file) edges.push({ from: ref.file, to, form, line: ref.line, text: ref.text, item, cond })
  }
  for (const ref of refs) {
    if (ref.name) {
      const defined = macros.get(ref.name)
      if (!defined) continue
      for (const file of defined.has(ref.file) ? [ref.file] : defined) add(ref, file, ref.form, ref.cond)
      continue
    }
    for (const abs of absolute(ref.segs, ref.module)) {
      for (const at of locate(abs.segs)) {
        const via = [...abs.via, ...at.via]
        const form = via.length > 0 ? `${ref.form} (${via.join(', ')})` : ref.form
        const cond = [...(ref.cond ?? []), ...abs.cond, ...at.cond]
        if (at.node === root && at.rest.length > 0 && exportedMacros.has(at.rest[0])) {
          add(ref, exportedMacros.get(at.rest[0]), form, cond)
          continue
        }
        for (const file of at.files) add(ref, file, form, cond, at.node === root ? (at.rest[0] ?? '*') : undefined)
      }
    }
  }
  return edges
}

// ---------------------------------------------------------------- checks

/** The circles (strongly connected sets of two or more) in `edges` (node -> nodes). */
export function circlesAmong(edges) {
  let next = 0
  const order = new Map()
  const low = new Map()
  const stack = []
  const circles = []
  const visit = (v) => {
    order.set(v, next)
    low.set(v, next++)
    stack.push(v)
    for (const w of edges.get(v) ?? []) {
      if (!order.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (stack.includes(w)) {
        low.set(v, Math.min(low.get(v), order.get(w)))
      }
    }
    if (low.get(v) === order.get(v)) {
      const circle = stack.splice(stack.indexOf(v))
      if (circle.length > 1) circles.push(circle.sort())
    }
  }
  for (const v of edges.keys()) if (!order.has(v)) visit(v)
  return circles
}

/** Every .rs file under `dir`, relative to it. */
function rustFiles(dir, under = '') {
  return fs.readdirSync(path.join(dir, under), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(under, e.name)
    if (e.isDirectory()) return rustFiles(dir, rel)
    return e.name.endsWith('.rs') ? [rel] : []
  })
}

/** The targets a circle is looked for on, each with the cfg names it sets. */
const TARGETS = [
  { name: 'linux', unix: true, windows: false, target_os: 'linux', target_family: 'unix' },
  { name: 'macos', unix: true, windows: false, target_os: 'macos', target_family: 'unix' },
  { name: 'windows', unix: false, windows: true, target_os: 'windows', target_family: 'windows' },
]

/** A cfg predicate on `target`: true, false, or null where it does not say (a feature, target_env). */
function holds(p, target) {
  if (p.name === 'not') {
    const v = holds(p.args[0], target)
    return v === null ? null : !v
  }
  if (p.name === 'all' || p.name === 'any') {
    const vs = p.args.map((a) => holds(a, target))
    const decisive = p.name === 'all' ? false : true
    if (vs.includes(decisive)) return decisive
    return vs.includes(null) ? null : !decisive
  }
  if (p.name in target && p.name !== 'name') return p.value === undefined ? target[p.name] : target[p.name] === p.value
  return null
}

/** Whether code under all of `conds` is compiled for `target`. */
const compiled = (conds, target) => (conds ?? []).every((p) => holds(p, target) !== false)

const PLATFORM_NAME = /(?:^|_)(?:windows|linux|macos|darwin|unix)(?:_|\.rs$)/

/**
 * Checks one crate (an entry of CRATES) under `repo`: its violations, each
 * { kind, key, sites: [{ line, form, text }] }, with kind one of
 * upward (a layer takes from one above it), root (a module takes an item of
 * the crate root, which declares it: a circle through the root), circle (files
 * of the crate that take from each other in a loop), loose (a file in no
 * layer), undeclared (a file no module declares), platform (platform code
 * outside the crate's platform layer); and what was read.
 */
export function checkCrate(repo, spec) {
  const crateDir = path.join(repo, spec.dir)
  const crate = readCrate(crateDir, spec.root)
  const edges = edgesOf(crate)
  const layerOf = (file) => {
    if (file === spec.root) return '(root)'
    return crate.files.get(file)?.module?.path[0] ?? '(root)'
  }
  const rank = (layer) => (layer === '(root)' ? Infinity : spec.layers.indexOf(layer))
  const found = new Map()
  const flag = (kind, key, site) => {
    if (!found.has(key)) found.set(key, { kind, key, crate: spec.name, sites: [] })
    const sites = found.get(key).sites
    if (site && !sites.some((s) => s.line === site.line && s.form === site.form && s.from === site.from && s.to === site.to)) sites.push(site)
  }
  const name = (file) => `${spec.name}:${file}`
  for (const e of edges) {
    if (e.from === spec.root || !TARGETS.some((t) => compiled(e.cond, t))) continue
    const site = { line: e.line, form: e.form, text: e.text, to: e.to, item: e.item }
    if (e.to === spec.root) {
      flag('root', `root ${name(e.from)} takes from ${e.to}`, site)
    } else if (spec.layers && rank(layerOf(e.to)) > rank(layerOf(e.from))) {
      flag('upward', `upward ${name(e.from)} -> ${e.to}`, site)
    }
  }
  const readable = [...crate.files].filter(([, f]) => !f.test).map(([file]) => file)
  // A room a newcomer can read: tests may sit beside the code, or in a
  // sibling file, and are not counted (issue 39: no file over 800 lines of
  // non-test code).
  for (const file of readable) {
    const abs = path.join(crateDir, file)
    if (!fs.existsSync(abs)) continue
    const lines = nonTestLines(fs.readFileSync(abs, 'utf8'), crate.skipped.filter((s) => s.file === file))
    if (lines > MAX_ROOM_LINES) flag('long', `long ${name(file)}`, { line: lines, form: 'lines of non-test code', text: `${lines} > ${MAX_ROOM_LINES}` })
  }
  if (spec.layers) {
    for (const file of readable) if (file !== spec.root && !spec.layers.includes(layerOf(file))) flag('loose', `loose ${name(file)}`)
  }
  for (const file of rustFiles(crateDir)) if (!crate.files.has(file)) flag('undeclared', `undeclared ${name(file)}`)
  if (spec.platformHome) {
    for (const file of readable) {
      const f = crate.files.get(file)
      if (layerOf(file) !== spec.platformHome && (PLATFORM_NAME.test(path.basename(file)) || f.platformPath)) flag('platform', `platform ${name(file)}`)
    }
  }
  // Circles on each target of its own: `platform` is linux.rs on Linux,
  // windows.rs on Windows, and a loop through both is no loop at all.
  for (const target of TARGETS) {
    const here = readable.filter((f) => f !== spec.root && compiled(crate.files.get(f).cond, target))
    const graph = new Map(here.map((f) => [f, new Set()]))
    const live = edges.filter((e) => graph.has(e.from) && graph.has(e.to) && compiled(e.cond, target))
    for (const e of live) graph.get(e.from).add(e.to)
    for (const circle of circlesAmong(graph)) {
      const key = `circle ${spec.name}: ${circle.join(' <-> ')}`
      const seen = found.has(key)
      flag('circle', key)
      found.get(key).members = circle.map(name)
      found.get(key).targets = [...(found.get(key).targets ?? []), target.name]
      if (seen) continue
      for (const e of live) if (circle.includes(e.from) && circle.includes(e.to)) flag('circle', key, { line: e.line, form: e.form, text: e.text, from: e.from, to: e.to })
    }
  }
  return { violations: [...found.values()], files: crate.files, edges, skipped: crate.skipped }
}

/** The most lines of non-test code a source file may hold. */
export const MAX_ROOM_LINES = 800

/** A file's lines less those of its test items (each from its first attribute to its end), nested ones counted once. */
export function nonTestLines(src, testItems) {
  const total = src.endsWith('\n') ? src.split('\n').length - 1 : src.split('\n').length
  const inTest = new Set()
  for (const item of testItems) for (let l = item.from ?? item.line; l <= item.end; l++) inTest.add(l)
  return total - inTest.size
}

/** Every crate of CRATES (or those named in `only`) checked under `repo`. */
export function checkTree(repo, only) {
  const specs = CRATES.filter((c) => !only || only.includes(c.name))
  const results = specs.map((spec) => ({ spec, ...checkCrate(repo, spec) }))
  return {
    violations: results.flatMap((r) => r.violations),
    crates: Object.fromEntries(results.map((r) => [r.spec.name, r])),
  }
}

/** A violation as a line of a failure message, each site with its line and form. */
export function describe(v) {
  const sites = v.sites.map((s) => `\n    ${s.from ? `${s.from}:` : ''}${s.line} [${s.form}] ${s.text}${s.from ? ` -> ${s.to}` : ''}`)
  return `${v.key}${v.targets ? ` (on ${v.targets.join(', ')})` : ''}${sites.join('')}`
}
