// The start options are defined once, in the core (StartOptions,
// crates/core/src/verbs/start_options.rs), and so are the options of every
// verb (crates/core/src/verbs/verb_options.rs, verbOptionsSchema()); every face
// must carry each of them: the CLI a flag, the JS API the key (read and
// checked, not ignored), the MCP tool a property or a stated reason to leave
// it out, index.d.ts the member with the core's doc. A face that lacks one
// fails here by name.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { makeHome, connectMcp, runBg, readRegistry, root, pm } from './helpers.mjs'
import { generate, sources } from '../scripts/options-dts.mjs'

const schema = pm.startOptionsSchema()
const verbs = pm.verbOptionsSchema()
const options = schema['x-order']
/** Each option and its schema, nested ones (`wake.action`) by their path. */
const leaves = options.flatMap((name) => {
  const option = schema.properties[name]
  return option.properties ? option['x-order'].map((sub) => [`${name}.${sub}`, option.properties[sub]]) : [[name, option]]
})

test('the core exports every start option with a doc, and a one-line MCP description or a reason MCP leaves it out', () => {
  assert.ok(options.length >= 24, `${options.length} options`)
  assert.deepEqual([...options].sort(), Object.keys(schema.properties).sort(), 'x-order lists every property once')
  for (const [name, option] of leaves) assert.ok(option.description?.trim(), `${name} has a doc`)
  for (const name of options) {
    const option = schema.properties[name]
    const mcp = option['x-mcp']
    const omitted = option['x-mcp-omit']
    assert.ok((mcp === undefined) !== (omitted === undefined), `${name}: x-mcp (its MCP line) or x-mcp-omit (why MCP leaves it out), one of them`)
    if (mcp !== undefined) assert.ok(mcp.length <= 80, `${name}: the MCP line is one short line`)
    if (omitted !== undefined) assert.ok(omitted.length > 20, `${name}: says why MCP leaves it out`)
  }
})

/**
 * The flag a JSON option has on the command line, by the CLI's naming:
 * kebab-case, `Ms` dropped (`timeoutMs` → `--timeout`, a duration there), a
 * boolean that defaults to true turned off by `--no-…`, a nested object's
 * members prefixed by its name (`wake.action` → `--wake-action`) and its
 * `message` the object's own flag (`--wake`).
 */
function flagOf(pathName, option) {
  // The core's own word where the flag is not the option's name (`mode: 'kill'` is `--kill`).
  if (option['x-flag']) return option['x-flag']
  const [outer, inner] = pathName.split('.')
  const kebab = (s) => s.replace(/Ms$/, '').replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
  if (inner !== undefined) return inner === 'message' ? `--${kebab(outer)}` : `--${kebab(outer)}-${kebab(inner)}`
  return option.type === 'boolean' && option.default === true ? `--no-${kebab(outer)}` : `--${kebab(outer)}`
}

test('run-bg has a flag for every start option', (t) => {
  const { home } = makeHome(t)
  const help = runBg(home, ['--help']).stdout
  const flags = new Set([...help.matchAll(/^\s+(?:-\w, )?(--[a-z-]+)/gm)].map((m) => m[1]))
  const missing = leaves.map(([name, option]) => [name, flagOf(name, option)]).filter(([, flag]) => !flags.has(flag))
  assert.deepEqual(missing, [], 'options without their flag in run-bg --help ([option, flag])')
})

/** A value of another type than the option takes: the JS API must refuse it naming the option. */
function wrongValue(option) {
  if (option.type === 'string') return 5
  if (option.type === undefined) return () => 'not JSON data'
  return 'not-this'
}

test('the JS API reads every start option: each is accepted by name, and checked', (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  let accepted
  assert.throws(() => pm.runBackground('true', { noSuchOption: 1 }), (e) => {
    accepted = e.message.match(/; accepted: (.*)$/)?.[1]?.split(', ')
    return accepted !== undefined
  })
  assert.deepEqual(options.filter((name) => !accepted.includes(name)), [], 'options runBackground does not accept')
  for (const [name, option] of leaves) {
    const [outer, inner] = name.split('.')
    const given = inner === undefined ? { [outer]: wrongValue(option) } : { [outer]: { [inner]: wrongValue(option) } }
    assert.throws(() => pm.runBackground('true', given), (e) => e.message.includes(`bad ${name}:`),
      `${name}: a value of the wrong type is refused naming it`)
  }
  assert.deepEqual(readRegistry(home), [], 'nothing was started')
})

test('MCP run_background has every start option the core does not say it leaves out', async (t) => {
  const { home } = makeHome(t)
  const client = await connectMcp(t, home)
  const { tools } = await client.listTools()
  const input = tools.find((x) => x.name === 'run_background').inputSchema.properties
  const missing = options.filter((name) => schema.properties[name]['x-mcp-omit'] === undefined && !input[name])
  assert.deepEqual(missing, [], 'options missing from run_background (give them x-mcp-omit with the reason if meant)')
  for (const name of options.filter((n) => schema.properties[n]['x-mcp-omit'] === undefined)) {
    const option = schema.properties[name]
    assert.equal(input[name].type, option.type, `${name}: the same type`)
    assert.equal(input[name].description, option['x-mcp'], `${name}: the core's MCP line`)
    for (const bound of ['minimum', 'maximum']) {
      // But the core's longest duration, a year: tools/list leaves it out (LONGEST_MS in proc-manager-mcp.mjs).
      const listed = bound === 'maximum' && option.maximum === 365 * 86_400_000 ? undefined : option[bound]
      assert.equal(input[name][bound], listed, `${name}: the same ${bound}`)
    }
  }
})

test('index.d.ts declares every start option with the core\'s doc, as scripts/options-dts.mjs writes it', () => {
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const body = (name) => dts.match(new RegExp(`export interface ${name}(?: extends \\w+)? \\{\\n([\\s\\S]*?)\\n\\}`))?.[1] ?? ''
  const members = (name) => new Set([...body(name).matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1]))
  const run = members('RunOptions')
  const missing = leaves.filter(([name]) => {
    const [outer, inner] = name.split('.')
    return inner === undefined ? !run.has(outer) : !members(`${outer[0].toUpperCase()}${outer.slice(1)}Options`).has(inner)
  }).map(([name]) => name)
  assert.deepEqual(missing, [], 'options index.d.ts does not declare')
  assert.ok(dts === generate(sources(pm)), 'index.d.ts is what `node scripts/options-dts.mjs` writes from the core (run it)')
})

/**
 * Each verb's faces: the run-bg subcommand, the JS functions (with the
 * options each takes: killJob none that choose among all jobs, `x-all`), the
 * MCP tool, and the index.d.ts interfaces.
 */
const notAll = (option) => !option['x-all']
const all = () => true
/** The options a JS call takes where the core lists which (`x-calls`). */
const takenBy = (call) => (option) => option['x-calls'] === undefined || option['x-calls'].includes(call)
const VERBS = {
  check: { cli: 'check', js: [['checkJob', () => true], ['checkJobText', () => true]], mcp: 'check_job', dts: [['CheckOptions', () => true]] },
  list: { cli: 'list', js: [['listJobs', () => true], ['listJobsText', () => true]], mcp: 'list_jobs', dts: [['ListOptions', () => true]] },
  wait: { cli: 'wait', js: [['waitJob', () => true]], mcp: 'wait_job', dts: [['WaitOptions', () => true]] },
  kill: { cli: 'kill', js: [['killJob', notAll], ['killAll', () => true]], mcp: 'kill_job', dts: [['KillOptions', notAll], ['KillAllOptions', () => true]] },
  orphans: { cli: 'orphans', js: [['cleanupOrphans', () => true]], mcp: 'cleanup_orphans', dts: [['CleanupOptions', () => true]] },
  logs: {
    cli: 'logs',
    js: [['readLog', takenBy('readLog')], ['followLog', takenBy('followLog')], ['followLogs', takenBy('followLogs')]],
    mcp: 'read_log',
    dts: [['ReadLogOptions', takenBy('readLog')], ['FollowOptions', takenBy('followLog')], ['FollowLogsOptions', takenBy('followLogs')]],
  },
  send: { cli: 'send', js: [['sendInput', all]], mcp: 'control_job', dts: [['SendInputOptions', all]] },
  prune: { cli: 'prune', js: [['pruneJobs', all]], dts: [['PruneOptions', all]] },
  summary: { cli: 'summary', js: [['summary', all]], dts: [['SummaryOptions', all]] },
  up: { cli: 'up', js: [['up', all]], dts: [['UpOptions', all]] },
  down: { cli: 'down', js: [['down', all]], dts: [['DownOptions', all]] },
  // The JS API's alone: every option says why run-bg and MCP leave it out.
  watch: { js: [['watchJobs', all]], dts: [['WatchJobsOptions', all]] },
  tracker: { js: [['ResourceTracker', all]], dts: [['TrackerOptions', all]] },
  checkText: { js: [['checkJob', all]], dts: [['CheckJobOptions', all]] },
  // The start's own flags: `run-bg --help` lists them.
  yield: { cli: [], js: [['runYield', all]], mcp: 'run_background', dts: [['YieldOptions', all]] },
}
/** The classes whose constructor takes the options. */
const CONSTRUCTORS = new Set(['ResourceTracker'])
/** The JS functions that take only options, no job id first. */
const OPTIONS_ONLY = new Set(['killAll', 'cleanupOrphans', 'followLogs', 'pruneJobs', 'summary', 'watchJobs', 'ResourceTracker'])
/** The JS functions whose options follow other arguments than a job id. */
const ARGS_BEFORE = { sendInput: ['no-such-job-1', 'text'], up: [undefined], down: [undefined] }
/** What an MCP tool says otherwise than the core's MCP line (verbShape's `narrowed`). */
const MCP_OWN_LINE = new Set(['wait_job.timeoutMs'])
const verbOptions = (verb, keep = () => true) => verbs[verb]['x-order'].filter((name) => keep(verbs[verb].properties[name]))

/** Calls `fn` with `options`; its refusal's message, thrown or as a rejection. */
async function refusal(fn, options) {
  const before = ARGS_BEFORE[fn] ?? (OPTIONS_ONLY.has(fn) || fn.startsWith('list') ? [] : ['no-such-job-1'])
  const args = [...before, options]
  try {
    if (CONSTRUCTORS.has(fn)) new pm[fn](...args)
    else await pm[fn](...args)
  } catch (e) {
    return e.message
  }
  return undefined
}

test('the core exports every verb option with a doc, and a one-line MCP description or a reason MCP leaves it out', () => {
  assert.deepEqual(Object.keys(verbs).sort(), Object.keys(VERBS).sort())
  for (const [verb, options] of Object.entries(verbs)) {
    assert.deepEqual([...options['x-order']].sort(), Object.keys(options.properties).sort(), `${verb}: x-order lists every property once`)
    for (const name of options['x-order']) {
      const option = options.properties[name]
      assert.ok(option.description?.trim(), `${verb}.${name} has a doc`)
      const [mcp, omitted] = [option['x-mcp'], option['x-mcp-omit']]
      assert.ok((mcp === undefined) !== (omitted === undefined), `${verb}.${name}: x-mcp or x-mcp-omit, one of them`)
      if (mcp !== undefined) assert.ok(mcp.length <= 80, `${verb}.${name}: the MCP line is one short line`)
      if (omitted !== undefined) assert.ok(omitted.length > 20, `${verb}.${name}: says why MCP leaves it out`)
      if (option['x-cli-omit'] !== undefined) assert.ok(option['x-cli-omit'].length > 20, `${verb}.${name}: says why run-bg leaves it out`)
      if (!VERBS[verb].mcp) assert.ok(omitted !== undefined, `${verb}.${name}: no MCP tool has the verb, so MCP leaves it out, saying why`)
      if (!VERBS[verb].cli) assert.ok(option['x-cli-omit'] !== undefined, `${verb}.${name}: run-bg has no command for the verb, so it says why it leaves it out`)
    }
  }
})

test('each run-bg subcommand has a flag for every option of its verb', (t) => {
  const { home } = makeHome(t)
  const missing = []
  for (const [verb, { cli }] of Object.entries(VERBS)) {
    if (!cli) continue
    const help = runBg(home, [...[cli].flat(), '--help']).stdout
    const flags = new Set([...help.matchAll(/^\s+(?:-\w, )?(--[a-z-]+)/gm)].map((m) => m[1]))
    // An option run-bg does not take says why (`x-cli-omit`).
    for (const name of verbOptions(verb, (option) => option['x-cli-omit'] === undefined)) {
      const flag = flagOf(name, verbs[verb].properties[name])
      if (!flags.has(flag)) missing.push([`${verb}.${name}`, flag])
    }
  }
  assert.deepEqual(missing, [], 'options without their flag in run-bg <verb> --help ([option, flag])')
})

test('the JS API reads every verb option: each is accepted by name where it belongs, and checked', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  for (const [verb, { js }] of Object.entries(VERBS)) {
    for (const [fn, keep] of js) {
      const message = await refusal(fn, { noSuchOption: 1 })
      const accepted = message?.match(/; accepted: (.*)$/)?.[1]?.split(', ') ?? []
      const taken = verbOptions(verb, keep)
      assert.deepEqual(taken.filter((name) => !accepted.includes(name)), [], `options ${fn} does not accept`)
      assert.deepEqual(verbOptions(verb).filter((name) => !taken.includes(name) && accepted.includes(name)), [], `options ${fn} should not take`)
      for (const name of taken) {
        const refused = await refusal(fn, { [name]: wrongValue(verbs[verb].properties[name]) })
        assert.match(refused ?? '', new RegExp(`bad ${name}[: ]`), `${fn}: ${name} of the wrong type is refused naming it`)
      }
    }
  }
})

test('the MCP tools of the verbs have every option the core does not say MCP leaves out', async (t) => {
  const { home } = makeHome(t)
  const client = await connectMcp(t, home)
  const { tools } = await client.listTools()
  const missing = []
  for (const [verb, { mcp }] of Object.entries(VERBS)) {
    if (!mcp) continue
    const input = tools.find((x) => x.name === mcp).inputSchema.properties
    for (const name of verbOptions(verb, (option) => option['x-mcp-omit'] === undefined)) {
      const option = verbs[verb].properties[name]
      if (!input[name]) { missing.push(`${mcp}.${name}`); continue }
      assert.equal(input[name].type, option.type, `${mcp}.${name}: the same type`)
      assert.deepEqual(input[name].enum, option.enum, `${mcp}.${name}: the same values`)
      if (!MCP_OWN_LINE.has(`${mcp}.${name}`)) assert.equal(input[name].description, option['x-mcp'], `${mcp}.${name}: the core's MCP line`)
    }
  }
  assert.deepEqual(missing, [], 'options missing from the MCP tools (give them x-mcp-omit with the reason if meant)')
})

test('index.d.ts declares every verb option in its interfaces with the core\'s doc', () => {
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const body = (name) => dts.match(new RegExp(`export interface ${name}(?: extends \\w+)? \\{\\n([\\s\\S]*?)\\n\\}`))?.[1] ?? ''
  const members = (name) => new Set([...body(name).matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1]))
  const missing = []
  for (const [verb, { dts: interfaces }] of Object.entries(VERBS)) {
    for (const [name, keep] of interfaces) {
      const declared = members(name)
      for (const option of verbOptions(verb, keep)) if (!declared.has(option)) missing.push(`${name}.${option}`)
      for (const option of verbOptions(verb)) if (!keep(verbs[verb].properties[option]) && declared.has(option)) missing.push(`${name} without ${option}`)
    }
  }
  assert.deepEqual(missing, [], 'options index.d.ts does not declare (or declares where the call does not take them)')
})
