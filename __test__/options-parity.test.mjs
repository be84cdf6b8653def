// The start options are defined once, in the core (StartOptions,
// crates/core/src/verbs/start_options.rs); every face must carry each of
// them: the CLI a flag, the JS API the key (read and checked, not ignored),
// the MCP tool a property or a stated reason to leave it out, index.d.ts the
// member with the core's doc. A face that lacks one fails here by name.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { makeHome, connectMcp, runBg, readRegistry, root, pm } from './helpers.mjs'
import { rewritten } from '../scripts/options-dts.mjs'

const schema = pm.startOptionsSchema()
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
    for (const bound of ['minimum', 'maximum']) assert.equal(input[name][bound], option[bound], `${name}: the same ${bound}`)
  }
})

test('index.d.ts declares every start option with the core\'s doc, as scripts/options-dts.mjs writes it', () => {
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const body = (name) => dts.match(new RegExp(`export interface ${name} \\{\\n([\\s\\S]*?)\\n\\}`))?.[1] ?? ''
  const members = (name) => new Set([...body(name).matchAll(/^ {2}(\w+)\?:/gm)].map((m) => m[1]))
  const run = members('RunOptions')
  const missing = leaves.filter(([name]) => {
    const [outer, inner] = name.split('.')
    return inner === undefined ? !run.has(outer) : !members(`${outer[0].toUpperCase()}${outer.slice(1)}Options`).has(inner)
  }).map(([name]) => name)
  assert.deepEqual(missing, [], 'options index.d.ts does not declare')
  assert.ok(dts === rewritten(dts, schema), 'index.d.ts is what `node scripts/options-dts.mjs` writes from the core (run it)')
})
