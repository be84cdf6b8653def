#!/usr/bin/env node
// Writes index.d.ts whole: the option interfaces from the core's option types
// (startOptionsSchema, verbOptionsSchema: crates/core/src/verbs/start_options.rs
// and verb_options.rs), the result interfaces and string unions from the
// core's views (resultTypes: crates/core/src/present/view), every function
// and class with its doc from its #[napi] item in crates/node/src, and only a
// fixed header and the JS face's own parts (HEADER, JS_FACE) from here. Run
// after changing any of them and building the addon:
//   npm run build && node scripts/options-dts.mjs
// `--check` writes nothing and exits 1 when index.d.ts is not what it would
// write (__test__/dts.test.mjs runs that check).
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const dtsPath = path.join(root, 'index.d.ts')

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

function members(schema, keep = () => true, required = []) {
  return schema['x-order'].filter((name) => keep(schema.properties[name]))
    .map((name) => `${doc(schema.properties[name].description)}  ${name}${required.includes(name) ? '' : '?'}: ${typeOf(name, schema.properties[name])}\n`).join('')
}

/** The options a JS call takes where the core lists which (`x-calls`): `readLog`, `followLog`, `followLogs`. */
const takenBy = (call) => (option) => option['x-calls'] === undefined || option['x-calls'].includes(call)

/** The JS face's own `signal` member, an AbortSignal, with its doc. */
const SIGNAL = (doc) => `  /** ${doc} */\n  signal?: AbortSignal\n`

/**
 * The verbs' option interfaces: the verb whose options each declares, which
 * of them (`killJob` takes no `x-all` option), the JS face's own members
 * with the option they follow (`signal`, an AbortSignal, is no option of the
 * core's), the interface it extends, and which options the JS call needs
 * (`runYield` its `yieldMs`, which `run-bg --yield` leaves optional).
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
  CheckJobOptions: { verb: 'checkText', extends: 'CheckOptions' },
  YieldOptions: {
    verb: 'yield',
    extends: 'RunOptions',
    required: ['yieldMs'],
    own: { after: 'yieldMs', members: SIGNAL('Stops the wait at once when aborted (the job runs on): the promise rejects with an `AbortError`.') },
  },
}

/** One verb interface. */
export function verbInterface(name, verbs) {
  const { verb, keep, own, required } = VERB_INTERFACES[name]
  const schema = verbs[verb]
  let body = members(schema, keep, required)
  if (own) {
    const at = schema['x-order'].indexOf(own.after)
    const before = { ...schema, 'x-order': schema['x-order'].slice(0, at + 1) }
    const after = { ...schema, 'x-order': schema['x-order'].slice(at + 1) }
    body = members(before, keep, required) + own.members + members(after, keep, required)
  }
  const parent = VERB_INTERFACES[name].extends ? ` extends ${VERB_INTERFACES[name].extends}` : ''
  return `export interface ${name}${parent} {\n${body}}\n`
}

/** The functions index.d.ts declares that are no #[napi] item: written in JS (job-events.js). */
export const JS_FUNCTIONS = new Set(['jobEvents'])

/** A Rust parameter napi fills in itself (`env: &Env`, `env: &'env Env`): no JS argument. */
const isEnvParam = (param) => /^\w+:\s*&?(?:'\w+\s+)?Env$/.test(param)

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
  // The attributes never reach into the next item (a private `fn` between, as planted in dts.test.mjs).
  const item = /((?:^\/\/\/.*\n)+)#\[napi(?:\(((?:(?!#\[napi)[\s\S])*?)\))?\]\npub fn (\w+)(?:<[^>]*>)?\(([^)]*)\)\s*->\s*([^{]+?)\s*\{/gm
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.rs')).sort()) {
    const text = fs.readFileSync(path.join(dir, file), 'utf8')
    for (const [, docs, attrs = '', rust, params, returns] of text.matchAll(item)) {
      const name = camel(rust)
      const attr = (key) => attrs.match(new RegExp(`${key}\\s*=\\s*"([^"]*)"`))?.[1]
      const jsParams = params.split(',').map((p) => p.trim()).filter((p) => p !== '' && !isEnvParam(p))
      const args = attr('ts_args_type') ?? (jsParams.length === 0 ? '' : undefined)
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


/** The TypeScript of a Rust type napi converts itself, in a class's methods. */
const RUST_TYPES = { bool: 'boolean', String: 'string', '&str': 'string', u32: 'number', i32: 'number', f64: 'number', 'HashMap<String,String>': 'Record<string, string>' }

/** A `///` block's lines, without the slashes. */
const docLines = (block) => block.trimEnd().split('\n').map((l) => l.trim().replace(/^\/\/\/ ?/, ''))

/**
 * The addon's classes, from their `#[napi]` items in crates/node/src: a
 * `#[napi] pub struct` with its `#[napi] impl` (constructor, getters,
 * methods, each with its doc), and each async iterator `stream_iterator!`
 * defines (stream.rs: `next()`, `return()`, `[Symbol.asyncIterator]`).
 */
export function napiClasses(dir = path.join(root, 'crates', 'node', 'src')) {
  const classes = new Map()
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.rs')).sort()
  const read = (file) => fs.readFileSync(path.join(dir, file), 'utf8')
  // The doc of `return()`, written once in the macro.
  const stream = read('stream.rs')
  const returnDoc = stream.match(/((?:^ *\/\/\/.*\n)+) *#\[napi\(js_name = "return"/m)
  if (!returnDoc) throw new Error('options-dts: stream.rs: no `return()` with its doc in stream_iterator!')
  for (const file of files) {
    const text = read(file)
    const iterators = /stream_iterator!\(\n((?: *\/\/\/.*\n)+) *(\w+),\n *[^\n]+,\n *"([^"]+)",\n *"((?:[^"\\]|\\.)*)"\n\);/g
    for (const [, docs, name, ts, nextDoc] of text.matchAll(iterators)) {
      const item = ts.match(/^Promise<IteratorResult<(.+), undefined>>$/)?.[1]
      if (!item) throw new Error(`options-dts: ${file}: ${name}'s next() type ${ts} is no Promise<IteratorResult<T, undefined>>`)
      classes.set(name, {
        doc: docLines(docs),
        head: `export declare class ${name} implements AsyncIterableIterator<${item}>`,
        members: [
          { declaration: 'private constructor()' },
          { doc: [nextDoc.replace(/\\(.)/g, '$1')], declaration: `next(): ${ts}` },
          { doc: docLines(returnDoc[1]), declaration: `return(): ${ts}` },
          { declaration: `[Symbol.asyncIterator](): ${name}` },
        ],
      })
    }
    for (const [, docs, name] of text.matchAll(/((?:^\/\/\/.*\n)+)#\[napi\]\npub struct (\w+)/gm)) {
      const body = text.match(new RegExp(`#\\[napi\\]\\nimpl ${name} \\{\\n([\\s\\S]*?)\\n\\}\\n`))
      if (!body) throw new Error(`options-dts: ${file}: no #[napi] impl ${name}`)
      const members = []
      const method = /((?:^ {4}\/\/\/.*\n)*) {4}#\[napi(?:\(([\s\S]*?)\))?\]\n {4}pub fn (\w+)(?:<[^>]*>)?\(([^)]*)\)\s*(?:->\s*([^{]+?))?\s*\{/gm
      for (const [, mdocs, attrs = '', rust, params, returns = '()'] of body[1].matchAll(method)) {
        const attr = (key) => attrs.match(new RegExp(`${key}\\s*=\\s*"([^"]*)"`))?.[1]
        const rustType = (t) => RUST_TYPES[t.replace(/\s+/g, '')] ?? RUST_TYPES[t.replace(/\s+/g, '').replace(/^Result<(.*)>$/, '$1')]
        const args = attr('ts_args_type') ?? params.split(',').map((p) => p.trim()).filter((p) => p && !/self$/.test(p) && !isEnvParam(p))
          .map((p) => {
            const [arg, type] = p.split(/:\s*/)
            const ts = rustType(type)
            if (!ts) throw new Error(`options-dts: ${file}: ${name}.${rust}: no TypeScript for the argument type ${type} (give ts_args_type)`)
            return `${camel(arg)}: ${ts}`
          }).join(', ')
        const ts = attr('ts_return_type') ?? rustType(returns)
        const doc = mdocs ? docLines(mdocs) : undefined
        if (/\bconstructor\b/.test(attrs)) members.push({ doc, declaration: `constructor(${args})` })
        else if (ts === undefined) throw new Error(`options-dts: ${file}: ${name}.${rust} needs ts_return_type (what index.d.ts declares)`)
        else if (/\bgetter\b/.test(attrs)) members.push({ doc, declaration: `get ${camel(rust)}(): ${ts}` })
        else members.push({ doc, declaration: `${attr('js_name') ?? camel(rust)}(${args}): ${ts}` })
      }
      classes.set(name, { doc: docLines(docs), head: `export declare class ${name}`, members })
    }
  }
  return classes
}

/** A JSDoc block at `indent`: one line when the doc is one line. */
function jsdoc(lines, indent = '') {
  if (!lines || lines.length === 0 || (lines.length === 1 && lines[0] === '')) return ''
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join('\n')}\n${indent} */\n`
}

function declaredClass({ doc, head, members }) {
  const body = members.map((m) => `${jsdoc(m.doc, '  ')}  ${m.declaration}\n`).join('')
  return `${jsdoc(doc)}${head} {\n${body}}\n`
}

/**
 * The TypeScript of a result's JSON Schema (resultTypes(): the core's views);
 * `aliases` collects the string unions index.d.ts declares by name (`x-ts`).
 */
function resultType(schema, aliases, at) {
  if (schema === true || (typeof schema === 'object' && Object.keys(schema).filter((k) => k !== 'description').length === 0)) return 'JsonValue'
  if (schema['x-ts']) {
    if (/^\w+$/.test(schema['x-ts']) && schema.enum && !aliases.get(schema['x-ts'])?.doc) aliases.set(schema['x-ts'], { enum: schema.enum, doc: schema['x-ts-doc'] })
    return schema['x-ts']
  }
  if (schema.$ref) return schema.$ref.replace('#/$defs/', '')
  if (schema.anyOf) {
    const kept = schema.anyOf.filter((s) => s.type !== 'null')
    return kept.map((s) => resultType(s, aliases, at)).join(' | ')
  }
  if (schema.enum) return schema.enum.map((v) => `'${v}'`).join(' | ')
  switch (schema.type) {
    case 'string': return 'string'
    case 'boolean': return 'boolean'
    case 'integer': case 'number': return 'number'
    case 'array': return `Array<${resultType(schema.items, aliases, at)}>`
    case 'object':
      if (schema.additionalProperties) return `Record<string, ${resultType(schema.additionalProperties, aliases, at)}>`
  }
  throw new Error(`options-dts: no TypeScript type for ${at}: ${JSON.stringify(schema)}`)
}

/**
 * A result interface from its schema: each property with its doc, optional
 * where the core leaves it out when it has no value. `x-ts-extends`: the
 * result it flattens in first, whose properties it must hold unchanged.
 */
function resultInterface(name, types, aliases) {
  const schema = types[name]
  const parent = schema['x-ts-extends']
  let own = Object.keys(schema.properties)
  if (parent) {
    const base = types[parent]
    if (!base) throw new Error(`options-dts: ${name} extends ${parent}, which is no result`)
    for (const key of Object.keys(base.properties)) {
      if (JSON.stringify(base.properties[key]) !== JSON.stringify(schema.properties[key]) || base.required?.includes(key) !== schema.required?.includes(key)) {
        throw new Error(`options-dts: ${name} extends ${parent} but its ${key} differs`)
      }
    }
    own = own.filter((key) => !(key in base.properties))
  }
  const body = own.map((key) => {
    const field = schema.properties[key]
    const optional = schema.required?.includes(key) ? '' : '?'
    return `${doc(field.description)}  ${key}${optional}: ${resultType(field, aliases, `${name}.${key}`)}\n`.replace(/^ {2}\/\*\* {2}\*\/\n/, '')
  }).join('')
  return `${jsdoc(schema.description?.split('\n'))}export interface ${name}${parent ? ` extends ${parent}` : ''} {\n${body}}\n`
}

/** The names of index.d.ts types a TypeScript text refers to. */
const BUILTIN = new Set(['Promise', 'Array', 'Record', 'IteratorResult', 'AsyncIterableIterator', 'AbortSignal', 'Symbol', 'EventEmitter', 'Error', 'JsonValue'])
const referenced = (text) => [...new Set([...text.matchAll(/\b[A-Z]\w*\b/g)].map((m) => m[0]))].filter((n) => !BUILTIN.has(n))

/**
 * What index.d.ts says before the generated part: the lint comment, the
 * import its JS-written parts need, the loader's own export (napi's loader
 * adds `__napiBindingTarget`; scripts/patch-loader.mjs) and JSON data.
 */
export const HEADER = `/* eslint-disable */
// Generated whole by scripts/options-dts.mjs (\`npm run build && node scripts/options-dts.mjs\`):
// the functions and classes from the #[napi] items of crates/node/src, the
// options from the core's option types, the results from the core's views
// (crates/core/src/present/view), each with its doc. Edit those, not this;
// __test__/dts.test.mjs fails when this file differs from what it writes.
import { EventEmitter } from 'node:events'

/**
 * Which binding artifact the generated loader actually loaded: \`'native'\` for
 * a native addon, otherwise the \`platformArchABI\` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because \`NAPI_RS_NATIVE_LIBRARY_PATH\`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/** JSON data, as kept in a job's \`context\`. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }

/**
 * The \`Error\` a function throws, or its promise rejects with (an aborted
 * \`signal\` gives an \`AbortError\` instead): the message says what was wrong
 * and what is accepted, \`code\` the kind of failure, to branch on:
 * \`ERR_USAGE\` a bad argument or option, a malformed id; \`ERR_UNKNOWN_JOB\` no
 * job has that id (pruned, or never started here); \`ERR_START_FAILED\` the
 * program could not start (recorded as a failed job, \`jobId\`);
 * \`ERR_SKIPPED\` submitted after a job that failed (recorded as skipped);
 * \`ERR_CONFIG\` config.json is broken; \`ERR_IO\` a file of the home could
 * not be read or written; \`ERR_DISK_FULL\` the disk holding the home is
 * full; \`ERR_BUSY\` the registry stayed locked; \`ERR_FAILED\` anything else.
 */
export interface ProcManagerError extends Error {
  code: ProcManagerErrorCode
  /** The job the failure is about: the unknown id, or the job recorded as failed or skipped. */
  jobId?: string
}

export type ProcManagerErrorCode = 'ERR_USAGE' | 'ERR_UNKNOWN_JOB' | 'ERR_START_FAILED' | 'ERR_SKIPPED' | 'ERR_CONFIG' | 'ERR_IO' | 'ERR_DISK_FULL' | 'ERR_BUSY' | 'ERR_FAILED'
`

/**
 * What the JS face adds itself, each declared after the function it goes
 * with: `jobEvents` (written in JS, job-events.js) and what it returns.
 */
export const JS_FACE = {
  watchJobs: `/**
 * \`watchJobs\` as an EventEmitter: emits \`'end'\` with each job end (the same
 * \`JobEnd\`), \`'error'\` if watching fails (an \`AbortError\` when \`signal\`
 * aborts), then \`'close'\`. It keeps the process alive until \`close()\` (or the
 * abort). Bad options throw here, as \`watchJobs\`' do.
 *
 * \`\`\`js
 * const events = pm.jobEvents({ owner: 'agent-a' })
 * events.on('end', (end) => console.log(end.message))
 * // later: events.close()
 * \`\`\`
 */
export declare function jobEvents(options?: WatchJobsOptions | undefined | null): JobEvents

/** What \`jobEvents\` returns (not exported: made by \`jobEvents\` only). */
export interface JobEvents extends EventEmitter {
  /** Stops watching; the native thread ends at once, then \`'close'\` is emitted. */
  close(): void
  on(event: 'end', listener: (end: JobEnd) => void): this
  on(event: 'error', listener: (error: Error) => void): this
  on(event: 'close', listener: () => void): this
  once(event: 'end', listener: (end: JobEnd) => void): this
  once(event: 'error', listener: (error: Error) => void): this
  once(event: 'close', listener: () => void): this
}
`,
}

/** The names the JS face declares itself (JS_FACE), which no generated part must declare again. */
const JS_FACE_NAMES = ['JobEvents', 'jobEvents']

/**
 * index.d.ts, whole: the header, then each function (in the order of
 * crates/node/src, file by file) followed by what it names that is not
 * declared yet: its options, its iterator class, its results and what they
 * hold; the classes no function returns at the end. Every option interface,
 * result and class is declared once.
 */
export function generate({ start, verbs, results, functions, classes }) {
  const optionBlocks = new Map()
  const nested = start['x-order'].filter((n) => start.properties[n].type === 'object' && start.properties[n].properties)
  optionBlocks.set('RunOptions', `/** Options of \`runBackground\`; they mirror the CLI's flags. */\nexport interface RunOptions {\n${ARGS}${members(start)}}\n`)
  for (const name of nested) optionBlocks.set(interfaceOf(name), `export interface ${interfaceOf(name)} {\n${members(start.properties[name])}}\n`)
  for (const name of Object.keys(VERB_INTERFACES)) optionBlocks.set(name, verbInterface(name, verbs))
  for (const name of JS_FACE_NAMES) {
    if (optionBlocks.has(name) || results[name] || classes.has(name) || functions.has(name)) throw new Error(`options-dts: ${name} is declared by the JS face and generated too`)
  }
  const aliases = new Map()
  const done = new Set(['JsonValue', ...JS_FACE_NAMES])
  const parts = []
  const aliasesOut = new Set()
  /** Declares `name` and, depth first, what it refers to that is not declared yet. */
  const declare = (name) => {
    if (done.has(name)) return
    done.add(name)
    let text
    if (optionBlocks.has(name)) text = optionBlocks.get(name)
    else if (results[name]) text = resultInterface(name, results, aliases)
    else if (classes.has(name)) text = declaredClass(classes.get(name))
    else if (aliases.has(name)) {
      const { enum: values, doc: aliasDoc } = aliases.get(name)
      text = `${jsdoc(aliasDoc?.split('\n'))}export type ${name} = ${values.map((v) => `'${v}'`).join(' | ')}\n`
      aliasesOut.add(name)
    } else throw new Error(`options-dts: index.d.ts refers to ${name}, which no option type, result, class or alias declares`)
    parts.push(text)
    // Aliases first found in this part (the options' `x-ts` too).
    for (const m of text.matchAll(/\b(\w+)\??: (\w+)\b/g)) {
      const schemaAlias = m[2]
      if (!aliases.has(schemaAlias) && /^[A-Z]/.test(schemaAlias) && !done.has(schemaAlias) && !results[schemaAlias] && !optionBlocks.has(schemaAlias) && !classes.has(schemaAlias)) {
        const fromOptions = findAlias(schemaAlias, start, verbs)
        if (fromOptions) aliases.set(schemaAlias, fromOptions)
      }
    }
    const body = text.replace(/\/\*\*[\s\S]*?\*\//g, '')
    for (const ref of referenced(body)) if (ref !== name) declare(ref)
  }
  const jsAfter = new Map(Object.entries(JS_FACE))
  for (const [name, fn] of functions) {
    parts.push(declared(fn))
    for (const ref of referenced(fn.declaration.replace(/^export declare function \w+/, ''))) declare(ref)
    if (jsAfter.has(name)) {
      const text = jsAfter.get(name)
      parts.push(text)
      jsAfter.delete(name)
      for (const ref of referenced(text.replace(/\/\*\*[\s\S]*?\*\//g, ''))) declare(ref)
    }
  }
  if (jsAfter.size) throw new Error(`options-dts: the JS face's parts for ${[...jsAfter.keys()].join(', ')} follow no function`)
  for (const name of [...classes.keys()]) declare(name)
  const unused = [...optionBlocks.keys(), ...Object.keys(results)].filter((n) => !done.has(n))
  if (unused.length) throw new Error(`options-dts: no function or class refers to ${unused.join(', ')}`)
  return `${HEADER}\n${parts.join('\n')}`
}

/** The string union an option's schema names with `x-ts` (ListOptions' `status`: `JobStatus`). */
function findAlias(name, start, verbs) {
  for (const schema of [start, ...Object.values(verbs)]) {
    for (const option of Object.values(schema.properties ?? {})) {
      if (option['x-ts'] === name && option.enum) return { enum: option.enum, doc: option['x-ts-doc'] }
    }
  }
  return undefined
}

/** What the addon gives the generator: every schema and #[napi] item it writes from. */
export function sources(pm) {
  return { start: pm.startOptionsSchema(), verbs: pm.verbOptionsSchema(), results: pm.resultTypes(), functions: napiFunctions(), classes: napiClasses() }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const pm = createRequire(import.meta.url)(root)
  const dts = fs.readFileSync(dtsPath, 'utf8')
  const next = generate(sources(pm))
  if (process.argv.includes('--check')) {
    if (next !== dts) {
      console.error('index.d.ts is not what scripts/options-dts.mjs writes: run it')
      process.exit(1)
    }
  } else if (next !== dts) {
    fs.writeFileSync(dtsPath, next)
    console.log('index.d.ts written')
  }
}
