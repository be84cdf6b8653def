// index.d.ts is generated whole: `node scripts/options-dts.mjs` writes every
// line of it from the one definition of each part (the options from the
// core's option types, the results from the core's views through
// resultTypes(), the functions and classes from the addon's #[napi] items,
// and the JS face's own few declarations it keeps itself), and this is the
// check CI runs (`npm test` takes every file here): a file that differs from
// what the generator writes fails, naming what to run. Each way it can go
// stale is planted below and must be caught.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { root, pm } from './helpers.mjs'
import { generate, sources, napiFunctions, napiClasses, HEADER, JS_FACE } from '../scripts/options-dts.mjs'

const dtsPath = path.join(root, 'index.d.ts')
const fresh = () => sources(pm)

/** The first line where `file` and `generated` differ, for the failure message. */
function firstDifference(file, generated) {
  const [a, b] = [file.split('\n'), generated.split('\n')]
  const at = a.findIndex((line, i) => line !== b[i])
  return `from line ${at + 1}:\n  file:      ${a[at]}\n  generated: ${b[at]}`
}

test('index.d.ts is what scripts/options-dts.mjs writes, whole (run `npm run build && node scripts/options-dts.mjs`)', () => {
  const dts = fs.readFileSync(dtsPath, 'utf8')
  const next = generate(fresh())
  if (next !== dts) assert.fail(`index.d.ts differs from the generator's output ${firstDifference(dts, next)}`)
  // What is not derived: the header and the JS face's parts, and nothing else.
  const fixed = HEADER.split('\n').length + Object.values(JS_FACE).join('').split('\n').length
  console.log(`index.d.ts: ${dts.split('\n').length} lines, ${fixed} of them the generator's fixed header and the JS face's own parts`)
})

test('every function and class the addon exports is declared from its #[napi] item, and only those', () => {
  const functions = napiFunctions()
  const classes = napiClasses()
  const exported = Object.keys(pm).filter((name) => typeof pm[name] === 'function' && !/^[A-Z]/.test(name))
  const jsOnly = ['jobEvents']
  assert.deepEqual(exported.filter((name) => !functions.has(name) && !jsOnly.includes(name)), [], 'exports no #[napi] item declares')
  assert.deepEqual([...functions.keys()].filter((name) => !exported.includes(name)), [], '#[napi] items the addon does not export')
  for (const [name, { doc }] of functions) assert.ok(doc.join(' ').length > 20, `${name}: its #[napi] item has a doc`)
  // Classes: the exported constructors, and the iterators the functions return (not exported by name).
  const exportedClasses = Object.keys(pm).filter((name) => typeof pm[name] === 'function' && /^[A-Z]/.test(name))
  assert.deepEqual(exportedClasses.filter((name) => !classes.has(name)), [], 'exported classes no #[napi] item declares')
  assert.deepEqual([...classes.keys()].sort(), ['JobEnds', 'JobLogLines', 'LogLines', 'ResourceTracker'])
  for (const [name, { doc, members }] of classes) {
    assert.ok(doc.join(' ').length > 20, `${name}: its #[napi] item has a doc`)
    for (const m of members) if (!/constructor|Symbol/.test(m.declaration)) assert.ok(m.doc?.join(' ').length > 10, `${name}.${m.declaration}: a doc`)
  }
})

test('ProcManagerErrorCode lists each code the addon gives its errors, and docs/js-api.md names each', () => {
  // The codes are made in one place (core_calls.rs `error_code` and
  // `into_js`); the union and the docs are written by hand beside them.
  const rust = fs.readFileSync(path.join(root, 'crates', 'node', 'src', 'core_calls.rs'), 'utf8')
  const made = [...new Set([...rust.matchAll(/"(ERR_[A-Z_]+)"/g)].map((m) => m[1]))].sort()
  const union = HEADER.match(/^export type ProcManagerErrorCode = (.*)$/m)?.[1] ?? ''
  const declared = [...union.matchAll(/'(ERR_[A-Z_]+)'/g)].map((m) => m[1]).sort()
  assert.ok(made.length >= 9, `codes found in core_calls.rs: ${made}`)
  assert.deepEqual(declared, made, 'index.d.ts ProcManagerErrorCode against core_calls.rs')
  const docs = fs.readFileSync(path.join(root, 'docs', 'js-api.md'), 'utf8')
  assert.deepEqual(made.filter((code) => !docs.includes(`\`${code}\``)), [], 'codes docs/js-api.md does not name')
})

test('a stale index.d.ts is caught: a result, a class, an option or a function changed at its source, or the file edited by hand', () => {
  const dts = generate(fresh())
  const changed = (mutate) => {
    const s = structuredClone({ ...fresh(), functions: null, classes: null })
    const src = { ...s, functions: napiFunctions(), classes: napiClasses() }
    mutate(src)
    return generate(src)
  }
  // A result's field added and one gone in the core's view.
  const added = changed((s) => { s.results.CheckResult.properties.planted = { type: 'integer', description: 'Planted.' } })
  assert.notEqual(added, dts)
  assert.match(added, /export interface CheckResult extends JobSummary \{[\s\S]*?\n {2}planted\?: number\n/)
  const gone = changed((s) => { delete s.results.KillResult.properties.signalled; s.results.KillResult.required = s.results.KillResult.required.filter((k) => k !== 'signalled') })
  assert.notEqual(gone, dts)
  assert.doesNotMatch(gone.match(/export interface KillResult \{[\s\S]*?\n\}/)[0], /signalled/)
  // A status the core adds shows in the union.
  const status = changed((s) => { for (const r of ['JobSummary', 'CheckResult', 'JobResult']) s.results[r].properties.status.enum.push('planted') })
  assert.match(status, /^export type JobStatus = .*'planted'$/m)
  // An option of a verb gone.
  const option = changed((s) => { delete s.verbs.up.properties.outliveSession; s.verbs.up['x-order'] = s.verbs.up['x-order'].filter((o) => o !== 'outliveSession') })
  assert.doesNotMatch(option.match(/export interface UpOptions \{[\s\S]*?\n\}/)[0], /outliveSession/)
  // A class's method and doc changed in its #[napi] item (a copy of crates/node/src).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-dts-'))
  try {
    const src = path.join(root, 'crates', 'node', 'src')
    for (const f of fs.readdirSync(src)) fs.copyFileSync(path.join(src, f), path.join(dir, f))
    const tracking = path.join(dir, 'tracking.rs')
    fs.writeFileSync(tracking, fs.readFileSync(tracking, 'utf8')
      .replace('    /// Whether it tracks', '    /// Planted.\n    #[napi]\n    pub fn planted(&self, label: String) -> bool {\n        true\n    }\n\n    /// Whether it tracks'))
    const stream = path.join(dir, 'stream.rs')
    fs.writeFileSync(stream, fs.readFileSync(stream, 'utf8').replace('/// Stops (what `break`', '/// Planted stop (what `break`'))
    const withClass = generate({ ...fresh(), classes: napiClasses(dir), functions: napiFunctions(dir) })
    assert.match(withClass, /export declare class ResourceTracker \{[\s\S]*?\n {2}\/\*\* Planted\. \*\/\n {2}planted\(label: string\): boolean\n/)
    assert.equal(withClass.match(/Planted stop/g)?.length, 3, 'each iterator class\'s return() doc')
    // A function gone from the addon goes from the file.
    // (listJobsText: its options and result stay referred to by others.)
    const lib = fs.readFileSync(path.join(dir, 'lib.rs'), 'utf8')
    assert.ok(lib.includes(')]\npub fn list_jobs_text('), 'lib.rs still declares list_jobs_text so')
    fs.writeFileSync(path.join(dir, 'lib.rs'), lib.replace(')]\npub fn list_jobs_text(', ')]\nfn list_jobs_text('))
    const without = generate({ ...fresh(), classes: napiClasses(dir), functions: napiFunctions(dir) })
    assert.doesNotMatch(without, /function listJobsText\(/)
    assert.match(without, /function readLog\(jobId: string, options\?: ReadLogOptions \| undefined \| null\): LogRead\n/, 'the function after it keeps its own signature')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
  // A result no function returns is refused, not left out silently.
  assert.throws(() => changed((s) => { s.results.Planted = { type: 'object', properties: {} } }), /no function or class refers to Planted/)
  // The file edited by hand: a result's field, a class's member, a function's doc, an option.
  const planted = [
    dts.replace(/(export interface KillResult \{\n[\s\S]*?)  signalled: boolean\n/, '$1  signalled?: boolean\n'),
    dts.replace(/(export declare class ResourceTracker \{\n[\s\S]*?)  get enabled\(\): boolean\n/, '$1'),
    dts.replace(/(\n \* )(Kills every running job)/, '$1Kills each running job'),
    dts.replace(/(export interface ReadLogOptions \{\n)[\s\S]*?\n(  fromLine\?: number\n)/, '$1'),
    dts.replace(/^export type JobStatus = 'running'/m, "export type JobStatus = 'started'"),
  ]
  planted.forEach((stale, i) => {
    assert.notEqual(stale, dts, `plant ${i} took`)
    assert.notEqual(generate(fresh()), stale, `plant ${i}: the check would fail`)
  })
})

/**
 * `tsc --strict --noEmit` of the README's and docs/js-api.md's examples
 * (fixtures/dts-usage/usage.ts) against the package in `pkg`: its errors, or
 * '' when it compiles. TypeScript is the one in node_modules (@napi-rs/cli
 * brings it, so no network); Node's types are @types/node where installed,
 * else a shim of the one thing index.d.ts takes from them.
 */
function tscErrors(t, pkg) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-tsc-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(pkg, path.join(dir, 'node_modules', 'proc-manager'), 'dir')
  const fixtures = path.join(root, '__test__', 'fixtures', 'dts-usage')
  fs.copyFileSync(path.join(fixtures, 'usage.ts'), path.join(dir, 'usage.ts'))
  const files = ['usage.ts']
  let types = []
  if (fs.existsSync(path.join(root, 'node_modules', '@types', 'node'))) {
    fs.symlinkSync(path.join(root, 'node_modules', '@types'), path.join(dir, 'node_modules', '@types'), 'dir')
    types = ['node']
  } else {
    fs.copyFileSync(path.join(fixtures, 'node-shim.d.ts'), path.join(dir, 'node-shim.d.ts'))
    files.push('node-shim.d.ts')
  }
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', lib: ['es2022', 'dom'], types },
    files,
  }))
  const tsc = path.join(path.dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc')
  const r = spawnSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8' })
  return r.status === 0 ? '' : `${r.stdout}${r.stderr}`.trim()
}

test('the README\'s and docs/js-api.md\'s JS examples compile against index.d.ts (tsc --strict), and a renamed result would not', (t) => {
  let typescript
  try {
    typescript = createRequire(import.meta.url)('typescript/package.json').version
  } catch {
    t.skip('no typescript in node_modules (npm install brings it with @napi-rs/cli)')
    return
  }
  assert.equal(tscErrors(t, root), '', `TypeScript ${typescript}: the examples do not compile against index.d.ts`)
  // Planted: a result renamed, as a generator change could, breaks what users wrote.
  const pkg = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-tsc-pkg-'))
  t.after(() => fs.rmSync(pkg, { recursive: true, force: true }))
  fs.copyFileSync(path.join(root, 'package.json'), path.join(pkg, 'package.json'))
  fs.writeFileSync(path.join(pkg, 'index.js'), '')
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  fs.writeFileSync(path.join(pkg, 'index.d.ts'), dts.replaceAll(/\bCheckResult\b/g, 'CheckReport'))
  assert.match(tscErrors(t, pkg), /CheckResult/, 'a renamed result fails the compile')
})
