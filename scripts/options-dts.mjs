#!/usr/bin/env node
// Writes index.d.ts's `RunOptions` and `WakeOptions` from the start options'
// one definition (crates/core/src/verbs/start_options.rs), through the JSON
// Schema the addon exports (startOptionsSchema): each option's doc, type,
// enum and order. Run after changing an option and building the addon:
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

function members(schema) {
  return schema['x-order'].map((name) => `${doc(schema.properties[name].description)}  ${name}?: ${typeOf(name, schema.properties[name])}\n`).join('')
}

/** The generated block, from the schema the addon exports. */
export function generated(schema) {
  const nested = schema['x-order'].filter((n) => schema.properties[n].type === 'object' && schema.properties[n].properties)
  let out = `${BEGIN}\n/** Options of \`runBackground\`; they mirror the CLI's flags. */\nexport interface RunOptions {\n${ARGS}${members(schema)}}\n`
  for (const name of nested) out += `\nexport interface ${interfaceOf(name)} {\n${members(schema.properties[name])}}\n`
  return `${out}${END}\n`
}

/** index.d.ts with its generated block replaced. */
export function rewritten(dts, schema) {
  const begin = dts.indexOf(BEGIN)
  const end = dts.indexOf(END)
  if (begin < 0 || end < begin) throw new Error(`index.d.ts: the generated block's markers are missing (${BEGIN} … ${END})`)
  return dts.slice(0, begin) + generated(schema) + dts.slice(end + END.length + 1)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const schema = createRequire(import.meta.url)(root).startOptionsSchema()
  const dts = fs.readFileSync(dtsPath, 'utf8')
  const next = rewritten(dts, schema)
  if (process.argv.includes('--check')) {
    if (next !== dts) {
      console.error('index.d.ts is not what scripts/options-dts.mjs writes from the core\'s StartOptions: run it')
      process.exit(1)
    }
  } else if (next !== dts) {
    fs.writeFileSync(dtsPath, next)
    console.log('index.d.ts: RunOptions rewritten from the core\'s StartOptions')
  }
}
