#!/usr/bin/env node
// Writes index.d.ts's `RunOptions` and `WakeOptions` from the start options'
// one definition (crates/core/src/verbs/start_options.rs), through the JSON
// Schema the addon exports (startOptionsSchema): each option's doc, type,
// enum and order. Likewise `CheckOptions`, `ListOptions`, `WaitOptions`,
// `KillOptions`, `KillAllOptions` and `CleanupOptions` from the verbs' options
// (crates/core/src/verbs/verb_options.rs, verbOptionsSchema), each in its
// place, and those of readLog, followLog, followLogs, sendInput, pruneJobs,
// summary, up, down, watchJobs and ResourceTracker; and every function's
// declaration and doc from its #[napi] item in crates/node/src. Run after changing an option and building the addon:
//   npm run build && node scripts/options-dts.mjs
// `--check` writes nothing and exits 1 when index.d.ts is not what it would
// write (__test__/options-parity.test.mjs runs that check).
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const dtsPath = path.join(root, 'index.d.ts')
export const BEGIN = '// Generated from the core\'s StartOptions by scripts/options-dts.mjs: edit crates/core/src/verbs/start_options.rs, not this.'
export const END = '// End of the generated StartOptions.'

/** The JS face's own option, before the core's: the program's arguments. */
const ARGS = '  /** When given, `command` is a program and `args` its argv (no shell). */\n  args?: Array<string>\n'

/** An interface's name for a nested options object: `wake` → `WakeOptions`. */
const interfaceOf = (name) => `${name[0].toUpperCase()}${name.slice(1)}Options`

function typeOf(name, schema) {
  if (schema['x-ts']) return schema['x-ts']
  if (schema.enum) return schema.enum.map((v) => `'${v}'`).join(' | ')
  switch (schema.type) {
    case 'string': return 'string'
    case 'boolean': return 'boolean'
    case 'integer': case 'number': return 'number'
    case 'array': return `Array<${typeOf(name, schema.items)}>`
    case 'object':
      return schema.properties ? interfaceOf(name) : `Record<string, ${typeOf(name, schema.additionalProperties)}>`
    case undefined: return 'JsonValue'
  }
  throw new Error(`options-dts: no TypeScript type for ${name}: ${JSON.stringify(schema)}`)
}

function doc(text) {
  const lines = (text ?? '').split('\n')
  if (lines.length === 1) return `  /** ${lines[0]} */\n`
  return `  /**\n${lines.map((l) => `   * ${l}`.trimEnd()).join('\n')}\n   */\n`
}

function members(schema, keep = () => true) {
  return schema['x-order'].filter((name) => keep(schema.properties[name]))
    .map((name) => `${doc(schema.properties[name].description)}  ${name}?: ${typeOf(name, schema.properties[name])}\n`).join('')
}

/** The options a JS call takes where the core lists which (`x-calls`): `readLog`, `followLog`, `followLogs`. */
const takenBy = (call) => (option) => option['x-calls'] === undefined || option['x-calls'].includes(call)

/** The JS face's own `signal` member, an AbortSignal, with its doc. */
const SIGNAL = (doc) => `  /** ${doc} */\n  signal?: AbortSignal\n`

/**
 * The verbs' option interfaces: the verb whose options each declares, which
 * of them (`killJob` takes no `x-all` option), and the JS face's own members
 * with the option they follow (`signal`, an AbortSignal, is no option of the core's).
 */
export const VERB_INTERFACES = {
  CheckOptions: { verb: 'check' },
  ListOptions: { verb: 'list' },
  WaitOptions: {
    verb: 'wait',
    own: { after: 'timeoutMs', members: '  /** Stops the wait at once when aborted: the promise rejects with an `AbortError`. */\n  signal?: AbortSignal\n' },
  },
  KillOptions: { verb: 'kill', keep: (option) => !option['x-all'] },
  KillAllOptions: { verb: 'kill' },
  CleanupOptions: { verb: 'orphans' },
  ReadLogOptions: { verb: 'logs', keep: takenBy('readLog') },
  FollowOptions: { verb: 'logs', keep: takenBy('followLog'), own: { after: 'lines', members: SIGNAL('Stops following at once when aborted; the pending `next()` rejects with an `AbortError`.') } },
  FollowLogsOptions: { verb: 'logs', keep: takenBy('followLogs'), own: { after: 'lines', members: SIGNAL('Stops following at once when aborted; the pending `next()` rejects with an `AbortError`.') } },
  SendInputOptions: { verb: 'send' },
  PruneOptions: { verb: 'prune' },
  SummaryOptions: { verb: 'summary' },
  UpOptions: { verb: 'up', own: { after: 'yieldMs', members: SIGNAL('Stops the wait of `yieldMs` (an `AbortError`); what started runs on.') } },
  DownOptions: { verb: 'down' },
  WatchJobsOptions: { verb: 'watch', own: { after: 'owner', members: SIGNAL('Stops watching at once when aborted; the pending `next()` rejects with an `AbortError`.') } },
  TrackerOptions: { verb: 'tracker' },
}

const verbMarker = (verb) => `// Generated from the core's ${verb} options by scripts/options-dts.mjs: edit crates/core/src/verbs/verb_options.rs, not this.`

/** One verb interface, its marker line first. */
export function verbInterface(name, verbs) {
  const { verb, keep, own } = VERB_INTERFACES[name]
  const schema = verbs[verb]
  let body = members(schema, keep)
  if (own) {
    const at = schema['x-order'].indexOf(own.after)
    const before = { ...schema, 'x-order': schema['x-order'].slice(0, at + 1) }
    const after = { ...schema, 'x-order': schema['x-order'].slice(at + 1) }
    body = members(before, keep) + own.members + members(after, keep)
  }
  return `${verbMarker(verb)}\nexport interface ${name} {\n${body}}\n`
}

/** index.d.ts with each verb interface (and the marker above it) replaced in its place. */
function withVerbs(dts, verbs) {
  for (const name of Object.keys(VERB_INTERFACES)) {
    const start = dts.indexOf(`export interface ${name} {\n`)
    if (start < 0) throw new Error(`index.d.ts: no interface ${name}`)
    const end = dts.indexOf('\n}\n', start) + 3
    const marker = verbMarker(VERB_INTERFACES[name].verb)
    const from = dts.lastIndexOf(`${marker}\n`, start) === start - marker.length - 1 ? start - marker.length - 1 : start
    dts = dts.slice(0, from) + verbInterface(name, verbs) + dts.slice(end)
  }
  return dts
}

/** The generated block, from the schema the addon exports. */
export function generated(schema) {
  const nested = schema['x-order'].filter((n) => schema.properties[n].type === 'object' && schema.properties[n].properties)
  let out = `${BEGIN}\n/** Options of \`runBackground\`; they mirror the CLI's flags. */\nexport interface RunOptions {\n${ARGS}${members(schema)}}\n`
  for (const name of nested) out += `\nexport interface ${interfaceOf(name)} {\n${members(schema.properties[name])}}\n`
  return `${out}${END}\n`
}

/** The functions index.d.ts declares that are no #[napi] item: written in JS (job-events.js). */
export const JS_FUNCTIONS = new Set(['jobEvents'])

/** A Rust identifier as napi names it in JS: `check_job` → `checkJob`. */
const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase())

/** The TypeScript of a Rust return type napi converts itself (the rest say `ts_return_type`). */
const RUST_RETURNS = { 'Result<String>': 'string', 'Result<Vec<String>>': 'Array<string>', 'Result<bool>': 'boolean' }

/**
 * The addon's functions, from their one definition, the `#[napi]` items of
 * crates/node/src: each one's JS name, doc (its `///` lines) and signature
 * (`ts_args_type`, `ts_return_type`). Methods and classes are not read here.
 */
export function napiFunctions(dir = path.join(root, 'crates', 'node', 'src')) {
  const functions = new Map()
  const item = /((?:^\/\/\/.*\n)+)#\[napi(?:\(([\s\S]*?)\))?\]\npub fn (\w+)(?:<[^>]*>)?\(([^)]*)\)\s*->\s*([^{]+?)\s*\{/gm
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.rs')).sort()) {
    const text = fs.readFileSync(path.join(dir, file), 'utf8')
    for (const [, docs, attrs = '', rust, params, returns] of text.matchAll(item)) {
      const name = camel(rust)
      const attr = (key) => attrs.match(new RegExp(`${key}\\s*=\\s*"([^"]*)"`))?.[1]
      const args = attr('ts_args_type') ?? (params.trim() === '' ? '' : undefined)
      const ts = attr('ts_return_type') ?? RUST_RETURNS[returns.replace(/\s+/g, '')]
      if (args === undefined || ts === undefined) {
        throw new Error(`options-dts: ${file}: ${rust} needs ts_args_type and ts_return_type in its #[napi(...)] (what index.d.ts declares)`)
      }
      const doc = docs.trimEnd().split('\n').map((l) => l.replace(/^\/\/\/ ?/, ''))
      functions.set(name, { doc, declaration: `export declare function ${name}(${args}): ${ts}` })
    }
  }
  return functions
}

/** A function's JSDoc and declaration, as index.d.ts has them. */
function declared({ doc, declaration }) {
  const jsdoc = doc.length === 1 ? `/** ${doc[0]} */` : `/**\n${doc.map((l) => ` * ${l}`.trimEnd()).join('\n')}\n */`
  return `${jsdoc}\n${declaration}\n`
}

/** index.d.ts with each #[napi] function's declaration (and the JSDoc above it) replaced in its place. */
export function withFunctions(dts, functions) {
  const names = [...dts.matchAll(/^export declare function (\w+)\(/gm)].map((m) => m[1])
  const stale = names.filter((name) => !functions.has(name) && !JS_FUNCTIONS.has(name))
  if (stale.length) throw new Error(`index.d.ts declares functions the addon has not: ${stale.join(', ')}`)
  const missing = [...functions.keys()].filter((name) => !names.includes(name))
  if (missing.length) throw new Error(`index.d.ts: no place for ${missing.join(', ')}: add a line \`export declare function <name>(\` where each belongs`)
  for (const [name, fn] of functions) {
    const at = dts.search(new RegExp(`^export declare function ${name}\\(`, 'm'))
    const end = dts.indexOf('\n', at) + 1
    let from = at
    // The JSDoc right above it, if any: `/** … */` on one line, or a block.
    const before = dts.slice(0, at)
    const block = before.match(/\/\*\*(?:[^*]|\*(?!\/))*\*\/\n$/)
    if (block) from = at - block[0].length
    dts = dts.slice(0, from) + declared(fn) + dts.slice(end)
  }
  return dts
}

/**
 * index.d.ts with its generated block replaced, the verbs' interfaces when
 * `verbs` is given, and the functions' declarations when `functions` is.
 */
export function rewritten(dts, schema, verbs, functions) {
  const begin = dts.indexOf(BEGIN)
  const end = dts.indexOf(END)
  if (begin < 0 || end < begin) throw new Error(`index.d.ts: the generated block's markers are missing (${BEGIN} … ${END})`)
  let next = dts.slice(0, begin) + generated(schema) + dts.slice(end + END.length + 1)
  if (verbs) next = withVerbs(next, verbs)
  return functions ? withFunctions(next, functions) : next
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const pm = createRequire(import.meta.url)(root)
  const dts = fs.readFileSync(dtsPath, 'utf8')
  const next = rewritten(dts, pm.startOptionsSchema(), pm.verbOptionsSchema(), napiFunctions())
  if (process.argv.includes('--check')) {
    if (next !== dts) {
      console.error('index.d.ts is not what scripts/options-dts.mjs writes from the core\'s options: run it')
      process.exit(1)
    }
  } else if (next !== dts) {
    fs.writeFileSync(dtsPath, next)
    console.log('index.d.ts: the option interfaces rewritten from the core\'s options')
  }
}
