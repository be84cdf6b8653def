// The binding surface, guarded. Four faces say what the package exports: the
// addon's own keys (its #[napi] items), index.js for CommonJS, the ESM named
// exports Node finds in index.js (cjs-module-lexer reads its
// `module.exports.x =` lines), and index.d.ts. They must name the same set;
// index.js must be what `npm run build:bindings` writes for the addon; every
// interface index.d.ts declares must hold for what real jobs give back; and
// the options each function accepts are the fields its options interface
// declares.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { EventEmitter } from 'node:events'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { pm, root, makeHome, waitFor, killPid } from './helpers.mjs'
import { startInterruptService } from './fixtures/interrupt-service.mjs'
import { LOADER_EXPORTS, NAPI_LOADER_EXPORTS, patchLoader } from '../scripts/patch-loader.mjs'

const dtsText = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')

/**
 * What index.d.ts declares: its functions (parameters and return type), its
 * classes (methods' return types), its consts, its interfaces (fields with
 * their type text and optionality, and what they extend) and its type aliases.
 */
function parseDts(text) {
  const dts = { functions: {}, classes: {}, consts: {}, interfaces: {}, aliases: {} }
  for (const m of text.matchAll(/^export declare function (\w+)\((.*)\): (.+)$/gm)) {
    dts.functions[m[1]] = { params: m[2], returns: m[3] }
  }
  for (const m of text.matchAll(/^export declare const (\w+): (.+)$/gm)) dts.consts[m[1]] = m[2]
  for (const m of text.matchAll(/^export declare class (\w+)[^{]*\{([\s\S]*?)\n\}/gm)) {
    const methods = {}
    for (const f of m[2].matchAll(/^ {2}(?:get )?(\w+)\(.*\): (.+)$/gm)) methods[f[1]] = f[2]
    const constructor = m[2].match(/^ {2}constructor\((.*)\)$/m)
    dts.classes[m[1]] = { methods, constructorParams: constructor ? constructor[1] : null }
  }
  for (const m of text.matchAll(/^export interface (\w+)(?: extends ([\w, ]+))? \{([\s\S]*?)\n\}/gm)) {
    const fields = {}
    for (const f of m[3].matchAll(/^ {2}(\w+)(\?)?: (.+)$/gm)) fields[f[1]] = { type: f[3], optional: !!f[2] }
    const methods = [...new Set([...m[3].matchAll(/^ {2}(\w+)\(/gm)].map((f) => f[1]))]
    dts.interfaces[m[1]] = { parents: (m[2] || '').split(',').map((s) => s.trim()).filter(Boolean), fields, methods }
  }
  for (const m of text.matchAll(/^export type (\w+) = (.+)$/gm)) dts.aliases[m[1]] = m[2]
  return dts
}

const dts = parseDts(dtsText)

/** An interface's fields, its parents' included (a parent that is not an interface, e.g. EventEmitter, adds none). */
function fieldsOf(name) {
  const iface = dts.interfaces[name]
  assert.ok(iface, `index.d.ts declares interface ${name}`)
  const fields = {}
  for (const parent of iface.parents) if (dts.interfaces[parent]) Object.assign(fields, fieldsOf(parent))
  return Object.assign(fields, iface.fields)
}

/** The declared names a JS value is exported under, from the four faces. */
const declaredExports = () => [...Object.keys(dts.functions), ...Object.keys(dts.classes), ...Object.keys(dts.consts)].sort()

/**
 * Runs `node` with `args` in `cwd` (a consumerDir); its stdout parsed as JSON,
 * or the failure's stderr thrown. Its home, were it ever used, is the test's
 * own, not the temp dir every test and user shares.
 */
function nodeJson(args, cwd) {
  const r = spawnSync(process.execPath, args, { cwd, encoding: 'utf8', env: { ...process.env, PROC_MANAGER_HOME: path.join(cwd, 'home') } })
  if (r.status !== 0) throw new Error(`node ${args.join(' ')} exited ${r.status}:\n${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** A directory where `proc-manager` resolves to this checkout, as it does for a user who installed it. */
function consumerDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-surface-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(root, path.join(dir, 'node_modules', 'proc-manager'), 'dir')
  return dir
}

/** The names in `a` and not in `b`. */
const minus = (a, b) => [...a].filter((x) => !new Set(b).has(x)).sort()

function assertSameSet(face, got, expected, hint) {
  const lacks = minus(expected, got)
  const extra = minus(got, expected)
  assert.ok(lacks.length === 0 && extra.length === 0,
    `${face} ${lacks.length ? `lacks ${lacks.join(', ')}` : ''}${lacks.length && extra.length ? ' and ' : ''}` +
    `${extra.length ? `has ${extra.join(', ')}, which index.d.ts does not declare` : ''}; ${hint}`)
}

test('the addon, CommonJS, the ESM named exports and index.d.ts export the same names', async (t) => {
  const dir = consumerDir(t)
  // Each face is read in a fresh process, so that nothing this test file loaded adds to it.
  fs.writeFileSync(path.join(dir, 'cjs.cjs'), `
    const pm = require('proc-manager')
    const addon = Object.keys(require.cache).find((file) => file.endsWith('.node'))
    const kinds = Object.fromEntries(Object.entries(pm).map(([k, v]) => [k, typeof v]))
    console.log(JSON.stringify({ keys: Object.keys(pm), kinds, addon }))`)
  const cjs = nodeJson(['cjs.cjs'], dir)
  assert.ok(cjs.addon, 'index.js loaded a .node file')
  const addon = nodeJson(['-p', `JSON.stringify(Object.keys(require(${JSON.stringify(cjs.addon)})))`], dir)
  fs.writeFileSync(path.join(dir, 'esm.mjs'), `
    import * as pm from 'proc-manager'
    console.log(JSON.stringify(Object.keys(pm).filter((k) => k !== 'default')))`)
  const esm = nodeJson(['esm.mjs'], dir)

  const declared = declaredExports()
  const regenerate = 'run `npm run build:bindings` (it writes index.js from the addon) and declare each export in index.d.ts'
  assertSameSet('CommonJS (require)', cjs.keys, declared, regenerate)
  assertSameSet('the ESM named exports (import)', esm, declared, regenerate)
  assertSameSet('the addon with what index.js adds', [...addon, ...NAPI_LOADER_EXPORTS, ...Object.keys(LOADER_EXPORTS)], declared,
    'a #[napi] item of crates/node needs its declaration in index.d.ts')

  // What a user writes: every declared name as a named import (Node names one that is missing).
  fs.writeFileSync(path.join(dir, 'named.mjs'), `
    import { ${declared.join(', ')} } from 'proc-manager'
    console.log(JSON.stringify([${declared.map((name) => `typeof ${name}`).join(', ')}]))`)
  const kinds = nodeJson(['named.mjs'], dir)
  // Declared a function or a class: a function; declared a const: a value.
  for (const [i, name] of declared.entries()) {
    const expected = name in dts.consts ? 'string' : 'function'
    assert.equal(kinds[i], expected, `import { ${name} }: a ${kinds[i]}, where index.d.ts declares a ${expected}`)
    assert.equal(cjs.kinds[name], expected, `require(...).${name}: a ${cjs.kinds[name]}, where index.d.ts declares a ${expected}`)
  }
})

test('index.js is what npm run build:bindings writes for the addon (napi\'s loader, then scripts/patch-loader.mjs)', async (t) => {
  const { writeJsBinding } = await import(pathToFileURL(path.join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'index.js')).href)
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  const dir = consumerDir(t)
  const addonFile = nodeJson(['-e', `require('proc-manager'); console.log(JSON.stringify(Object.keys(require.cache).find((f) => f.endsWith('.node'))))`], dir)
  // `napi build` lists the exports sorted, as its type generation gives them.
  const idents = nodeJson(['-p', `JSON.stringify(Object.keys(require(${JSON.stringify(addonFile)})).sort())`], dir)
  const out = path.join(dir, 'generated')
  await writeJsBinding({ platform: true, idents, binaryName: pkg.napi.binaryName, packageName: pkg.name, version: pkg.version, outputDir: out })
  const generated = fs.readFileSync(path.join(out, 'index.js'), 'utf8')
  const expected = patchLoader(generated)
  // And the script itself, as build:bindings runs it, on that file: it patches in place, and a second run changes nothing.
  for (let run = 0; run < 2; run++) {
    const r = spawnSync(process.execPath, [path.join(root, 'scripts', 'patch-loader.mjs'), path.join(out, 'index.js')], { encoding: 'utf8' })
    assert.equal(r.status, 0, `patch-loader exited ${r.status}: ${r.stderr}`)
    assert.equal(fs.readFileSync(path.join(out, 'index.js'), 'utf8'), expected)
  }
  assert.ok(expected.includes("require('./platform.js').bindingError"), 'the load failure names the platform package')
  assert.equal(fs.readFileSync(path.join(root, 'index.js'), 'utf8'), expected,
    'index.js is not what `npm run build:bindings` writes from the addon: run it')
  // A loader whose failure block napi changed is refused, not half patched.
  assert.throws(() => patchLoader(generated.replace('Cannot find native binding', 'No binding')), /failure block/)
})

// ---- Types: a value against a type of index.d.ts ----

/** The interfaces and aliases a check went through (each result interface must be among them). */
const visited = new Set()

/** `text` split at its top-level `|`s (not inside <>, (), {} or quotes). */
function alternatives(text) {
  const parts = []
  let depth = 0
  let quote = null
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (quote) {
      if (c === quote) quote = null
    } else if (c === "'" || c === '"') quote = c
    else if ('<({['.includes(c)) depth++
    else if ('>)}]'.includes(c)) depth--
    else if (c === '|' && depth === 0) {
      parts.push(text.slice(start, i).trim())
      start = i + 1
    }
  }
  parts.push(text.slice(start).trim())
  return parts
}

/** Why `value` is not of the index.d.ts type `type` (`at` names where it is), or null when it is. */
function mismatch(value, type, at) {
  type = type.trim()
  const alts = alternatives(type)
  if (alts.length > 1) {
    const why = alts.map((alt) => mismatch(value, alt, at))
    return why.includes(null) ? null : `${at}: ${show(value)} is none of ${type} (${why.join('; ')})`
  }
  if (/^\(.*\)$/.test(type)) return mismatch(value, type.slice(1, -1), at)
  const primitive = { string: 'string', number: 'number', boolean: 'boolean' }[type]
  if (primitive) return typeof value === primitive && (type !== 'number' || Number.isFinite(value)) ? null : `${at}: ${show(value)} is not a ${type}`
  if (type === 'null') return value === null ? null : `${at}: ${show(value)} is not null`
  if (type === 'undefined') return value === undefined ? null : `${at}: ${show(value)} is not undefined`
  if (/^'[^']*'$/.test(type)) return value === type.slice(1, -1) ? null : `${at}: ${show(value)} is not ${type}`
  const array = type.match(/^Array<(.+)>$/) || type.match(/^(\w+)\[\]$/)
  if (array) {
    if (!Array.isArray(value)) return `${at}: ${show(value)} is not an array`
    for (const [i, item] of value.entries()) {
      const why = mismatch(item, array[1], `${at}[${i}]`)
      if (why) return why
    }
    return null
  }
  const record = type.match(/^Record<string, (.+)>$/) || type.match(/^\{ \[key: string\]: (.+) \}$/)
  if (record) {
    if (!isPlainObject(value)) return `${at}: ${show(value)} is not an object`
    for (const [key, item] of Object.entries(value)) {
      const why = mismatch(item, record[1], `${at}.${key}`)
      if (why) return why
    }
    return null
  }
  if (type in dts.aliases) {
    visited.add(type)
    return mismatch(value, dts.aliases[type], at)
  }
  if (type in dts.interfaces) {
    visited.add(type)
    // An object of a class (JobEvents extends EventEmitter): its class and methods, not its data.
    const runtime = dts.interfaces[type].parents.find((parent) => !(parent in dts.interfaces))
    // An Error carries data of its own (`code`, `jobId`): its fields are checked below.
    if (runtime === 'Error' && !(value instanceof Error)) return `${at}: ${show(value)} is not an Error`
    if (runtime && runtime !== 'Error') {
      if (!RUNTIME_CLASSES[runtime]) return `${at}: the test cannot check ${type}'s parent ${runtime}; teach it (RUNTIME_CLASSES)`
      if (!(value instanceof RUNTIME_CLASSES[runtime])) return `${at}: ${show(value)} is not a ${type} (a ${runtime})`
      const lacking = dts.interfaces[type].methods.filter((method) => typeof value[method] !== 'function')
      return lacking.length ? `${at}: ${type} lacks the methods ${lacking.join(', ')}` : null
    }
    if (!isPlainObject(value) && runtime !== 'Error') return `${at}: ${show(value)} is not a ${type} object`
    const fields = fieldsOf(type)
    for (const [key, item] of Object.entries(value)) {
      if (!(key in fields)) return `${at}: ${type} has ${key}, which index.d.ts does not declare`
      // A field left out reads undefined; one that is there has the declared type.
      const why = mismatch(item, fields[key].type, `${at}.${key}`)
      if (why) return why
    }
    for (const [key, { optional }] of Object.entries(fields)) {
      if (!optional && !(key in value)) return `${at}: index.d.ts says ${type}.${key} is always there; it is not`
    }
    return null
  }
  if (type in dts.classes) {
    visited.add(type)
    return value instanceof pm[type] ? null : `${at}: ${show(value)} is not a ${type}`
  }
  return `${at}: the test cannot check the type ${type}; teach it (surface.test.mjs mismatch())`
}

/** The classes index.d.ts imports that its interfaces extend. */
const RUNTIME_CLASSES = { EventEmitter }

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const show = (v) => (v === undefined ? 'undefined' : JSON.stringify(v)?.slice(0, 200) ?? String(v))

function assertType(value, type, at) {
  const why = mismatch(value, type, at)
  assert.equal(why, null, why)
}

/**
 * `pm[name](...args)`, its result (a promise's value) checked against the
 * return type index.d.ts declares for it.
 */
async function call(name, ...args) {
  const declared = dts.functions[name]
  assert.ok(declared, `index.d.ts declares ${name}`)
  const promise = declared.returns.match(/^Promise<(.+)>$/)
  const value = await pm[name](...args)
  assertType(value, promise ? promise[1] : declared.returns, `${name}()`)
  return value
}

/** `instance[method](...args)`, checked against the return type index.d.ts declares for the method of `cls`. */
function callMethod(cls, instance, method, ...args) {
  const returns = dts.classes[cls].methods[method]
  assert.ok(returns, `index.d.ts declares ${cls}.${method}`)
  const value = typeof instance[method] === 'function' ? instance[method](...args) : instance[method]
  assertType(value, returns, `${cls}.${method}`)
  return value
}

test('every result interface of index.d.ts holds for what real jobs give back', async (t) => {
  // What keeps this process alive (the watchers) or outlives it (the tied-to
  // process) ends here, whatever failed, before the home's cleanup (which
  // can fail in turn) runs.
  const watching = new AbortController()
  const started = { events: null, tiePid: null }
  try {
    await realResults(t, watching.signal, started)
  } finally {
    watching.abort()
    started.events?.close()
    if (started.tiePid) killPid(started.tiePid)
  }
})

async function realResults(t, signal, started) {
  // The home first: its cleanup (after hooks run in order) waits for the last
  // notifications while the service still answers them.
  const { home } = makeHome(t)
  const service = await startInterruptService(t, { message: { batch_window_ms: 100 }, subagent: { batch_window_ms: 100 } })
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: service.url }, queues: { q: { max_parallel: 1 } } }))
  process.env.PROC_MANAGER_HOME = home
  const ends = await call('watchJobs', { signal })
  const events = (started.events = await call('jobEvents', {}))
  const emitted = []
  events.on('end', (end) => emitted.push(end))

  // Jobs that carry every optional part of a job: a hook, a notification, a
  // wake rule, a tie, a restart, readiness, a queue place, a stdin pipe,
  // processes left behind, context.
  const hooked = await call('runBackground', 'echo hooked', { onExit: 'true', owner: 'surface', context: { n: [1, 'two', null] } })
  const woken = await call('runBackground', 'exit 3', { wake: { message: 'job {{jobId}} {{status}}', action: 'message' } })
  const tiedTo = spawnSync('sh', ['-c', 'sleep 300 >/dev/null 2>&1 & echo $!'], { encoding: 'utf8' })
  const tiePid = (started.tiePid = Number(tiedTo.stdout.trim()))
  const tied = await call('runBackground', 'sleep 301', { tiePid })
  const restarting = await call('runBackground', 'echo up; exit 1', { restart: 'on-failure', restartDelayMs: 0, maxRestarts: 1, readyLog: 'up' })
  const piped = await call('runBackground', 'cat', { args: [], stdin: 'pipe' })
  const blocker = await call('runBackground', 'sleep 302', { queue: 'q' })
  const queued = await call('runBackground', 'true', { queue: 'q', after: [hooked.jobId] })
  assert.equal(queued.status, 'queued')
  const leaver = await call('runBackground', 'sleep 303 & echo left', {})
  // Paused while everything below is listed and checked; killAll ends it.
  const paused = await call('runBackground', 'sleep 305', {})
  await call('pauseJob', paused.jobId)
  await call('resumeJob', paused.jobId)
  await call('pauseJob', paused.jobId)

  await call('sendInput', piped.jobId, 'hello', {})
  await call('sendInput', piped.jobId, '', { eof: true })
  for (const id of [hooked.jobId, woken.jobId, piped.jobId, leaver.jobId, restarting.jobId]) await call('waitJob', id, {})
  killPid(tiePid)
  await waitFor(() => pm.checkJob(tied.jobId).tie?.firedAt, { what: 'the tie to fire' })
  await waitFor(() => pm.checkJob(woken.jobId).notification?.state === 'queued', { what: 'the notification to be taken' })
  await waitFor(() => ['fired', 'not-fired', 'removed'].includes(pm.checkJob(woken.jobId).wake?.state), { what: 'the wake rule to settle', timeout: 30_000 })
  await waitFor(() => pm.checkJob(hooked.jobId).hooks.length > 0, { what: 'the on-exit hook' })
  await waitFor(() => pm.checkJob(leaver.jobId).lingering.length > 0, { what: 'a process left behind' })

  // A record that cannot be read.
  const corrupt = 'surface-corrupt-000000'
  fs.mkdirSync(path.join(home, 'jobs', corrupt), { recursive: true })
  fs.writeFileSync(path.join(home, 'jobs', corrupt, 'job.json'), '{"id": "surface-corr')

  const all = await call('listJobs', { all: true })
  assert.ok(all.some((j) => j.status === 'corrupt'), 'the corrupt record is listed')
  await call('listJobs', { status: 'queued' })
  await call('listJobsText', {})
  for (const job of all) if (job.status !== 'corrupt') await call('checkJob', job.jobId, { text: true })
  const checked = await call('checkJob', leaver.jobId, { errors: true })
  assert.ok(checked.lingering.length > 0 && checked.processes > 0, 'lingering processes listed')
  await call('checkJobText', hooked.jobId, { grep: 'hooked' })
  await call('readLog', hooked.jobId, {})
  await call('readLog', hooked.jobId, { since: 0, lines: 1, maxChars: 3 })
  await call('waitJob', blocker.jobId, { timeoutMs: 1 })
  await call('waitJob', restarting.jobId, { ready: true })
  await call('summary', {})
  await call('reconcile')
  await call('cleanupOrphans', {})
  const snap = await call('snapshot')
  await call('detectOrphans', snap, snap.processes)

  const yielded = await call('runYield', 'echo y', { yieldMs: 20_000 })
  assert.equal(yielded.done, true)
  await call('runYield', 'sleep 304', { yieldMs: 1 })
  const lines = []
  for await (const line of await call('followLog', hooked.jobId, {})) {
    assertType(line, 'string', 'followLog line')
    lines.push(line)
  }
  assert.deepEqual(lines, ['hooked'])
  const stream = await call('followLogs', { owner: 'surface', lines: 1, signal })
  const streamed = await stream.next()
  assertType(streamed.value, 'JobLogLine', 'followLogs line')
  assert.deepEqual(streamed.value, { id: hooked.jobId, label: 'echo', line: 'hooked' })
  await stream.return()
  const rerun = await call('rerunJob', hooked.jobId)
  await call('waitJob', rerun.jobId, {})

  const tracker = new pm.ResourceTracker({ enabled: true })
  callMethod('ResourceTracker', tracker, 'enabled')
  callMethod('ResourceTracker', tracker, 'env')
  callMethod('ResourceTracker', tracker, 'snapshotBefore', 'surface')
  callMethod('ResourceTracker', tracker, 'snapshotAfter', 'surface')

  // A stack: one process never ready within its readiness timeout, one after it (skipped).
  const stackDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-surface-stack-'))
  t.after(() => fs.rmSync(stackDir, { recursive: true, force: true }))
  const stackFile = path.join(stackDir, 'run-bg.json')
  fs.writeFileSync(stackFile, JSON.stringify({ processes: {
    one: { command: 'exec sleep 305', 'ready-log': 'never', 'ready-timeout': 50 },
    two: { command: 'exec sleep 306', after: ['one'] },
  } }))
  const stackUp = await call('up', stackFile, { owner: 'surface-stack', yieldMs: 20_000 })
  assert.equal(stackUp.ready, false, JSON.stringify(stackUp))
  assert.equal((await call('down', stackFile, { owner: 'surface-stack' })).killed.length, 1)

  await call('killJob', leaver.jobId, { force: true })
  await call('cleanupOrphans', { mode: 'kill', force: true })
  const killed = await call('killAll', { force: true })
  assert.ok(killed.length > 0)
  await call('pruneJobs', 0)

  // The errors: what a call throws, and what a promise rejects with.
  const failing = async (f) => {
    try {
      await f()
    } catch (e) {
      return e
    }
    assert.fail(`${f} did not fail`)
  }
  for (const [f, code] of [
    [() => pm.checkJob('surface-none-000000'), 'ERR_UNKNOWN_JOB'],
    [() => pm.checkJob('surface-none-000000', { lnes: 1 }), 'ERR_USAGE'],
    [() => pm.runBackground('no-such-program-surface', { args: [] }), 'ERR_START_FAILED'],
    [() => pm.waitJob('surface-none-000000'), 'ERR_UNKNOWN_JOB'],
  ]) {
    const error = await failing(f)
    assertType(error, 'ProcManagerError', `${f}`)
    assert.equal(error.code, code, `${f}: ${error.message}`)
  }

  const first = await ends.next()
  assertType(first.value, 'JobEnd', 'watchJobs() end')
  await ends.return()
  await waitFor(() => emitted.length > 0, { what: 'jobEvents to emit an end' })
  assert.ok(events instanceof EventEmitter, 'jobEvents() gives an EventEmitter')
  assertType(emitted[0], 'JobEnd', "jobEvents() 'end'")

  const results = Object.keys(dts.interfaces).filter((name) => !name.endsWith('Options'))
  const unchecked = results.filter((name) => !visited.has(name))
  assert.deepEqual(unchecked, [], `no real value was checked against ${unchecked.join(', ')}: give the test a job that returns one`)
  console.log(`result interfaces checked against real values: ${results.length} (${results.join(', ')})`)
}

// ---- Options: index.d.ts's option interfaces against what the addon accepts ----

/**
 * Calls `name` with `options` in place of its options object and the other
 * arguments filled in: the error it throws or rejects with, or null.
 */
async function refusal(name, options) {
  const declared = dts.functions[name] ?? { params: dts.classes[name].constructorParams }
  const args = []
  for (const param of declared.params.split(', ')) {
    const [, argName] = param.match(/^(\w+)\??:/)
    args.push(argName === 'options' ? options : { jobId: 'surface-nosuch-000000', command: 'true', text: '' }[argName])
  }
  let result
  try {
    result = name in dts.classes ? new pm[name](...args) : await pm[name](...args)
  } catch (error) {
    return error
  }
  // Accepted after all: stop what it started.
  if (typeof result?.return === 'function') await result.return()
  if (typeof result?.close === 'function') result.close()
  return null
}

/** Options interfaces another part of the work checks (the start options' single definition). */
const CHECKED_ELSEWHERE = {
  runBackground: 'RunOptions: the start options, checked with their core definition',
  runYield: 'YieldOptions: RunOptions and two of its own, checked with the start options',
}

test('each options interface of index.d.ts declares exactly what its function accepts, each with its kind', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  // Every function (and constructor) that takes an options object, and its interface, from index.d.ts itself.
  const takers = []
  for (const [name, { params }] of Object.entries(dts.functions)) {
    const options = params.match(/\boptions\??: (\w+)/)
    if (options) takers.push([name, options[1]])
  }
  for (const [name, { constructorParams }] of Object.entries(dts.classes)) {
    const options = constructorParams?.match(/\boptions\??: (\w+)/)
    if (options) takers.push([name, options[1]])
  }
  assert.ok(takers.length >= 15, `${takers.length} functions with options found`)
  let checked = 0
  for (const [name, iface] of takers) {
    if (name in CHECKED_ELSEWHERE) continue
    const declared = fieldsOf(iface)
    // The addon refuses a name it does not read and lists those it does.
    const error = await refusal(name, { surfaceProbe: 1 })
    assert.ok(error, `${name} accepted an unknown option`)
    const listed = error.message.match(/^unknown option `surfaceProbe` for \w+; accepted: (.*)$/)
    assert.ok(listed, `${name}: ${error.message}`)
    const accepted = listed[1].split(', ')
    assertSameSet(`${iface} (for ${name}): index.d.ts`, Object.keys(declared), accepted,
      `the addon accepts ${accepted.join(', ')}`)
    // Each field is read as the kind declared: a value of another kind is refused by name.
    for (const [field, { type }] of Object.entries(declared)) {
      const wrong = type === 'number' ? 'surface' : 12345
      const refused = await refusal(name, { [field]: wrong })
      assert.ok(refused && refused.message.startsWith(`bad ${field}:`),
        `${name}({ ${field}: ${show(wrong)} }), declared ${type}: ${refused ? refused.message : 'accepted'}`)
    }
    checked++
  }
  console.log(`option interfaces checked field by field: ${checked}; left to the start options: ${Object.keys(CHECKED_ELSEWHERE).join(', ')}`)
})
