// The crates' layers hold: the core's layers (crates/core/src/lib.rs says
// which is which) and the CLI's (print, args, face, context, cmd, then
// main.rs) import only downward; no module takes an item of its crate root
// (which declares it: a circle through the root); no circle among the files
// of a crate, on any platform; platform code lives in os/; no file holds
// over 800 lines of non-test code. The reading is
// layer-check.mjs's: every import form, test code left out by parsing.
// Each form is planted in a copy of the tree below, and must fail there.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { root } from './helpers.mjs'
import { CRATES, checkCrate, checkTree, describe } from './layer-check.mjs'

// What the check finds today and is known, each with what mends it. The
// list only shrinks: an entry that no longer occurs fails the test as well,
// to be struck from here.
const KNOWN = [
  // The portable faces of os/ (procinfo.rs, pidfd.rs, snapshot.rs, and
  // `sys`) re-export each platform file's functions, while the platform
  // files take the faces' types and helpers back (Row, CpuTime, Stat,
  // SignalOutcome, parse_stat; Child, Marker, ProcessInfo; WakeFd,
  // errno_outcome), and sys_unix.rs re-exports launch.rs. The old check
  // could not see it: `platform`, `sys` and `snapshot_platform` are modules
  // whose files (#[path]) bear other names. To mend: the shared types in a
  // module of their own below both, and no face re-exporting a file that
  // imports it. Any circle among these files passes; one reaching a file
  // not listed fails; a file no longer in any circle is to be struck.
  {
    circlesAmong: [
      'core:os/launch.rs', 'core:os/linux.rs', 'core:os/macos.rs', 'core:os/windows.rs', 'core:os/pidfd.rs', 'core:os/procinfo.rs',
      'core:os/snapshot.rs', 'core:os/snapshot_linux.rs', 'core:os/snapshot_macos.rs', 'core:os/snapshot_windows.rs',
      'core:os/no_subreaper.rs', 'core:os/sys_unix.rs', 'core:os/sys_windows.rs', 'core:os/timed_dir_watch.rs',
      'core:os/pause_windows.rs',
    ],
    why: 'os/ faces and platform files import each other',
  },
]

const known = (v) => KNOWN.some((k) => k.key === v.key || (v.kind === 'circle' && k.circlesAmong && v.members.every((m) => k.circlesAmong.includes(m))))

test('the crates hold their layers: nothing upward, nothing from a crate root, no circle, platform code in os/', () => {
  const { violations, crates } = checkTree(root)
  assert.deepEqual(violations.filter((v) => !known(v)).map(describe), [], 'violations')
  const stale = KNOWN.flatMap((k) => {
    if (k.key) return violations.some((v) => v.key === k.key) ? [] : [k.key]
    const inCircles = new Set(violations.filter((v) => v.kind === 'circle').flatMap((v) => v.members))
    return k.circlesAmong.filter((m) => !inCircles.has(m)).map((m) => `${m} of circlesAmong`)
  })
  assert.deepEqual(stale, [], 'known violations that are mended: strike them from KNOWN')
  // It read what is there: every layer, imports in the hundreds, test code found and left out.
  const core = crates.core
  for (const layer of CRATES[0].layers) assert.ok([...core.files.keys()].some((f) => f.startsWith(`${layer}/`)), `read a file of ${layer}/`)
  assert.ok(core.edges.length > 1000, `core: ${core.edges.length} imports read`)
  assert.ok(core.skipped.length > 30, `core: ${core.skipped.length} test items left out`)
  assert.ok(crates.cli.files.size > 20 && crates.cli.edges.length > 50, 'cli read')
  assert.ok(crates.node.files.size > 10 && crates.node.edges.length > 50, 'node read')
})

// ------------------------------------------------------------- planting

/**
 * Copies of each crate's sources with every plant of that crate made at
 * once, each in files of its own ({ file: text } writes a file; { file:
 * { append } } adds to one), checked once: the violations the plants added.
 */
function plantAll(crateName, plants) {
  const spec = CRATES.find((c) => c.name === crateName)
  const before = new Set(checkCrate(root, spec).violations.map((v) => v.key))
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'))
  try {
    const src = path.join(tree, spec.dir)
    fs.cpSync(path.join(root, spec.dir), src, { recursive: true })
    const written = new Map()
    for (const plant of plants) {
      for (const [file, change] of Object.entries(plant.changes)) {
        const at = path.join(src, file)
        fs.mkdirSync(path.dirname(at), { recursive: true })
        if (typeof change !== 'string') fs.appendFileSync(at, `\n${change.append}\n`)
        else if (written.has(file) && written.get(file) !== change) throw new Error(`two plants write ${file}`)
        else {
          fs.writeFileSync(at, change)
          written.set(file, change)
        }
      }
    }
    return checkCrate(tree, spec).violations.filter((v) => !before.has(v.key))
  } finally {
    fs.rmSync(tree, { recursive: true, force: true })
  }
}

/** Asserts the plant's violations are among those added, each seen in the form (and on the lines) given. */
function fails(added, expected) {
  for (const e of expected) {
    const v = added.find((a) => a.key === e.key)
    assert.ok(v, `${e.key} found; the plants added:\n${added.map(describe).join('\n')}`)
    for (const form of e.forms ?? []) assert.ok(v.sites.some((s) => s.form === form), `${e.key}: seen as ${form}\n${describe(v)}`)
    if (e.lines) assert.deepEqual(v.sites.map((s) => s.line), e.lines, describe(v))
  }
}

/** A module of model/ of the plant's own (model/planted_<id>.rs), with more files as given. */
const inModel = (id, text, more = {}) => ({ 'model/mod.rs': { append: `pub mod planted_${id};` }, [`model/planted_${id}.rs`]: text, ...more })
const up = (id, to = 'mod.rs') => `upward core:model/planted_${id}.rs -> verbs/${to}`
// A module of verbs/ for plants to reach by name.
const child = { 'verbs/mod.rs': { append: 'pub mod planted_child;' }, 'verbs/planted_child.rs': 'pub fn g() {}\nmacro_rules! planted_up { () => {} }\n' }
const fromChild = { ...child, 'verbs/mod.rs': { append: '' } }

// [what is planted, crate, changes, the violations it must add]. A plant
// with none expected must add none that names its files.
const PLANTS = [
  ['use crate::', 'core', inModel('use', 'use crate::verbs::planted;\n'), [{ key: up('use'), forms: ['use crate::'] }]],
  ['a use group', 'core', inModel('group', 'use crate::{model::job, verbs::planted};\n'), [{ key: up('group'), forms: ['use group crate::'] }]],
  ['a nested use group', 'core', inModel('nested', 'use crate::{model::job, verbs::{planted, other}};\n'), [{ key: up('nested'), forms: ['use nested group crate::'] }]],
  ['use super::super::', 'core', inModel('super', 'use super::super::verbs::planted;\n'), [{ key: up('super'), forms: ['use super::super::'] }]],
  ['pub(crate) use', 'core', inModel('pubcrate', 'pub(crate) use crate::verbs::planted;\n'), [{ key: up('pubcrate'), forms: ['pub use crate::'] }]],
  ['a path inline, no use', 'core', inModel('inline', 'pub fn f() {\n    crate::verbs::planted();\n}\n'), [{ key: up('inline'), forms: ['path crate::'], lines: [2] }]],
  ['super:: from an inline module', 'core', inModel('inner', 'mod inner {\n    pub fn f() { super::super::super::verbs::planted(); }\n}\n'), [
    { key: up('inner'), forms: ['path super::super::super::'] },
  ]],
  ['$crate:: in a macro', 'core', inModel('dollar', 'macro_rules! planted {\n    () => { $crate::verbs::planted() };\n}\n'), [{ key: up('dollar'), forms: ['path $crate::'] }]],
  ['a path in an attribute string', 'core', inModel('attr', '#[derive(serde::Serialize)]\npub struct P {\n    #[serde(with = "crate::verbs::planted")]\n    at: u8,\n}\n'), [
    { key: up('attr'), forms: ['attribute string crate::'] },
  ]],
  ['a name a glob brought in', 'core', inModel('glob', 'use crate::verbs::*;\npub fn f() { planted_child::g() }\n', child), [
    { key: up('glob'), forms: ['use glob crate::'] },
    { key: up('glob', 'planted_child.rs'), forms: ['path planted_child:: (glob crate::verbs::*)'] },
  ]],
  ['a name a use brought in', 'core', inModel('alias', 'use crate::verbs as up;\npub fn f() { up::planted_child::g() }\n', fromChild), [
    { key: up('alias'), forms: ['use crate::'] },
    { key: up('alias', 'planted_child.rs'), forms: ['path up::'] },
  ]],
  ['a macro by name', 'core', inModel('macro', 'pub fn f() { planted_up!() }\n', fromChild), [{ key: up('macro', 'planted_child.rs'), forms: ['macro planted_up!'] }]],
  ['a pub use re-export, and a path through it', 'core', {
    ...fromChild,
    'model/mod.rs': { append: 'pub use crate::verbs::planted_child as planted_up;' },
    'store/mod.rs': { append: 'pub mod planted;' },
    'store/planted.rs': 'use crate::model::planted_up::g;\n',
  }, [
    { key: 'upward core:model/mod.rs -> verbs/planted_child.rs', forms: ['pub use crate::'] },
    { key: 'upward core:store/planted.rs -> verbs/planted_child.rs', forms: ['use crate:: (re-export in model/mod.rs)'] },
  ]],
  ['a path through the crate root\'s re-export', 'core', inModel('rootuse', 'use crate::planted_root_child::g;\n', {
    ...fromChild,
    'lib.rs': { append: 'pub use verbs::planted_child as planted_root_child;' },
  }), [{ key: up('rootuse', 'planted_child.rs'), forms: ['use crate:: (re-export in lib.rs)'] }]],
  ['an item of the crate root', 'core', inModel('root', 'pub fn f() { crate::planted_root() }\n', { 'lib.rs': { append: 'pub fn planted_root() {}' } }), [
    { key: 'root core:model/planted_root.rs takes from lib.rs', forms: ['path crate::'] },
  ]],
  ['a circle through a use group', 'core', {
    'verbs/mod.rs': { append: 'pub mod planted_a;\npub mod planted_b;' },
    'verbs/planted_a.rs': 'use crate::verbs::{planted_b::g, planted_b};\npub fn f() {}\n',
    'verbs/planted_b.rs': 'use super::planted_a::f;\npub fn g() {}\n',
  }, [{ key: 'circle core: verbs/planted_a.rs <-> verbs/planted_b.rs', forms: ['use group crate::', 'use super::'] }]],
  ['a circle through self::, with the layer\'s mod.rs', 'core', {
    'store/mod.rs': { append: 'pub mod planted_self;\npub fn planted_in_mod() { self::planted_self::f() }' },
    'store/planted_self.rs': 'pub fn f() { super::planted_in_mod() }\n',
  }, [{ key: 'circle core: store/mod.rs <-> store/planted_self.rs', forms: ['path self::', 'path super::'] }]],
  ['a circle through a module whose file #[path] names', 'core', {
    'os/mod.rs': { append: 'pub mod planted_face;\n#[cfg(unix)]\n#[path = "planted_unix.rs"]\nmod planted_platform;\n#[cfg(windows)]\n#[path = "planted_windows.rs"]\nmod planted_platform;' },
    'os/planted_face.rs': 'pub use crate::os::planted_platform::f;\npub struct Shared;\n',
    'os/planted_unix.rs': 'use crate::os::planted_face::Shared;\npub fn f() {}\n',
    'os/planted_windows.rs': 'pub fn f() {}\n',
  }, [{ key: 'circle core: os/planted_face.rs <-> os/planted_unix.rs', forms: ['pub use crate::', 'use crate::'] }]],
  ['platform code outside os/', 'core', {
    'supervise/mod.rs': { append: '#[cfg(windows)]\npub mod planted_windows;\n#[cfg(unix)]\n#[path = "planted_either.rs"]\npub mod planted_either;' },
    'supervise/planted_windows.rs': 'pub fn f() {}\n',
    'supervise/planted_either.rs': 'pub fn f() {}\n',
  }, [{ key: 'platform core:supervise/planted_windows.rs' }, { key: 'platform core:supervise/planted_either.rs' }]],
  ['a file outside every layer, and one no module declares', 'core', {
    'lib.rs': { append: 'pub mod planted;' },
    'planted.rs': 'pub fn f() {}\n',
    'model/planted_stray.rs': 'pub fn f() {}\n',
  }, [{ key: 'loose core:planted.rs' }, { key: 'undeclared core:model/planted_stray.rs' }]],
  // Test code is left out by parsing, not by cutting a file at its first
  // cfg(test: after a test module (braces in its strings, chars and
  // comments), code is read again.
  ['code after a test module', 'core', inModel('after', '#[cfg(test)]\nmod tests {\n    use crate::verbs::planted;\n    fn t() { let s = "}"; let c = \'}\'; /* } */ let _ = crate::verbs::planted_too; }\n}\nuse crate::verbs::after_tests;\n'), [
    { key: up('after'), lines: [6] },
  ]],
  ['test-only items, whatever their cfg says it with', 'core', inModel('items', [
    '#[cfg(all(test, unix))]\nfn a() { crate::verbs::planted() }',
    '#[test]\nfn b() { crate::verbs::planted() }',
    '#[cfg_attr(test, allow(dead_code))]\n#[cfg(any(test, feature = "planted"))]\nfn c() { crate::verbs::planted_c() }',
    '#[cfg(not(test))]\nfn d() { crate::verbs::planted_d() }',
    'struct S(#[cfg(test)] crate::verbs::Planted, u8);',
    'fn e() { crate::verbs::planted_e() }',
  ].join('\n') + '\n'), [{ key: up('items'), lines: [7, 9, 11] }]],
  ['test files: #[cfg(test)] mod x; (with #[path] or beside its file), #![cfg(test)]', 'core', inModel('tests', '#[cfg(test)]\n#[path = "planted_tests_t.rs"]\nmod tests;\n#[cfg(test)]\nmod more;\n', {
    'model/planted_tests_t.rs': 'use crate::verbs::planted;\n',
    'model/planted_tests/more.rs': 'use crate::verbs::planted;\n',
    ...inModel('testonly', '#![cfg(test)]\nuse crate::verbs::planted;\n'),
    'model/mod.rs': { append: 'pub mod planted_tests;\npub mod planted_testonly;' },
  }), []],
  ['comments, strings and char literals (that neither hide nor make an import)', 'core', inModel('lexing', [
    '// use crate::verbs::planted;',
    '/* crate::verbs::x /* nested */ crate::verbs::y */',
    'pub const S: &str = "crate::verbs::planted \\" still a string";',
    'pub const R: &str = r#"use crate::verbs::x; "quoted""#;',
    "pub const Q: char = '\"';",
    "pub const E: char = '\\'';",
    "pub fn f<'a>(x: &'a str) -> &'a str { x }",
    'use crate::verbs::after_all_that;',
  ].join('\n') + '\n'), [{ key: up('lexing'), lines: [8] }]],
  // a_unix.rs takes `planted_b` (b_unix.rs there), b_windows.rs takes
  // `planted_a` (a_windows.rs there): read as one, they would close a loop.
  ['a loop only across two platforms (which is none)', 'core', {
    'os/mod.rs': { append: ['unix', 'windows'].map((p) => `#[cfg(${p})]\n#[path = "planted_a_${p}.rs"]\nmod planted_a;\n#[cfg(${p})]\n#[path = "planted_b_${p}.rs"]\nmod planted_b;`).join('\n') },
    'os/planted_a_unix.rs': 'use super::planted_b::x;\npub fn y() {}\n',
    'os/planted_b_unix.rs': 'pub fn x() {}\n',
    'os/planted_a_windows.rs': 'pub fn y() {}\n',
    'os/planted_b_windows.rs': 'use super::planted_a::y;\npub fn x() {}\n',
  }, []],
  // No room over 800 lines of non-test code; a test module beside the
  // code, or an item #[test] or #[cfg(test)] marks, does not count.
  ['a file over 800 lines of non-test code', 'core', inModel('long', Array.from({ length: 801 }, (_, i) => `pub fn f${i}() {}`).join('\n') + '\n'), [
    { key: 'long core:model/planted_long.rs', lines: [801] },
  ]],
  ['a file long only with its tests', 'core', inModel('tested', [
    ...Array.from({ length: 790 }, (_, i) => `pub fn f${i}() {}`),
    '#[cfg(test)]',
    'mod tests {',
    ...Array.from({ length: 300 }, (_, i) => `    fn t${i}() { let _ = "}"; }`),
    '}',
    '#[test]',
    'fn lone() {}',
    ...Array.from({ length: 10 }, (_, i) => `pub fn g${i}() {}`),
  ].join('\n') + '\n'), []],
  ['cli: a verb taking an item of main.rs', 'cli', {
    'main.rs': { append: 'fn planted_root() {}\nstruct PlantedCli;' },
    'cmd/mod.rs': { append: 'pub mod planted;' },
    'cmd/planted.rs': 'use crate::planted_root;\npub fn f() { let _ = <crate::PlantedCli as Default>::default(); }\n',
  }, [{ key: 'root cli:cmd/planted.rs takes from main.rs', forms: ['use crate::', 'path crate::'] }]],
  ['cli: a verb using a macro of main.rs', 'cli', {
    'main.rs': { append: 'macro_rules! planted_m { () => {} }' },
    'cmd/mod.rs': { append: 'pub mod planted_macro;' },
    'cmd/planted_macro.rs': 'pub fn f() { planted_m!() }\n',
  }, [{ key: 'root cli:cmd/planted_macro.rs takes from main.rs', forms: ['macro planted_m!'] }]],
  ['cli: printing reaching up into a verb', 'cli', { 'print.rs': { append: 'pub fn planted() { crate::cmd::planted_nothing(); }' } }, [
    { key: 'upward cli:print.rs -> cmd/mod.rs', forms: ['path crate::'] },
  ]],
  ['cli: two verbs taking from each other', 'cli', {
    'cmd/mod.rs': { append: 'pub mod planted_a;\npub mod planted_b;' },
    'cmd/planted_a.rs': 'use super::planted_b;\npub fn f() { planted_b::g() }\n',
    'cmd/planted_b.rs': 'pub fn g() { super::planted_a::f() }\n',
  }, [{ key: 'circle cli: cmd/planted_a.rs <-> cmd/planted_b.rs', forms: ['use super::', 'path super::'] }]],
  ['node: a module taking an item of lib.rs', 'node', {
    'lib.rs': { append: 'pub fn planted_root() {}\nmod planted;' },
    'planted.rs': 'use crate::planted_root;\n',
  }, [{ key: 'root node:planted.rs takes from lib.rs', forms: ['use crate::'] }]],
].map(([what, crate, changes, expected]) => ({ what, crate, changes, expected }))

const added = new Map()
const addedIn = (crate) => {
  if (!added.has(crate)) added.set(crate, plantAll(crate, PLANTS.filter((p) => p.crate === crate)))
  return added.get(crate)
}

for (const plant of PLANTS) {
  const verb = plant.expected.length > 0 ? 'fails on' : 'passes'
  test(`the check ${verb} ${plant.what}, planted in a copy of the tree`, () => {
    fails(addedIn(plant.crate), plant.expected)
    if (plant.expected.length === 0) {
      const files = Object.keys(plant.changes).filter((f) => typeof plant.changes[f] === 'string')
      const named = addedIn(plant.crate).filter((v) => files.some((f) => v.key.includes(f) || v.members?.some((m) => m.endsWith(`:${f}`))))
      assert.deepEqual(named.map(describe), [], 'nothing found in its files')
    }
  })
}

test('the plants added nothing but what each must', () => {
  for (const crate of new Set(PLANTS.map((p) => p.crate))) {
    const expected = PLANTS.filter((p) => p.crate === crate).flatMap((p) => p.expected.map((e) => e.key))
    assert.deepEqual(addedIn(crate).map((v) => v.key).sort(), expected.sort(), addedIn(crate).map(describe).join('\n'))
  }
})
