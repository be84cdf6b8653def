// The documentation is split over README.md, CONTRIBUTING.md and docs/*.md.
// These tests keep the split walkable and complete: every relative link
// leads to a file and heading that exist, README links every page, and every
// flag and subcommand of the real run-bg, every export of the real addon and
// every tool (with its arguments) of the real MCP server is documented on
// its page, so a new option or verb cannot land undocumented; and every Rust
// module opens with a //! line.
import test from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { root, RUN_BG, pm, makeHome, connectMcp, toolsBudget } from './helpers.mjs'

const docsDir = path.join(root, 'docs')
const pages = [
  path.join(root, 'README.md'),
  path.join(root, 'CONTRIBUTING.md'),
  ...fs.readdirSync(docsDir).filter((f) => f.endsWith('.md')).map((f) => path.join(docsDir, f)),
]
const read = (file) => fs.readFileSync(file, 'utf8')
const withoutCode = (text) => text.replace(/^\s*```[\s\S]*?^\s*```/gm, '')

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
const slug = (heading) => heading.toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, '').replace(/ /g, '-')
const anchorsOf = (file) => withoutCode(read(file)).split('\n').flatMap((l) => {
  const m = /^#+\s+(.*)$/.exec(l)
  return m ? [slug(m[1].trim())] : []
})

test('every relative link in README, CONTRIBUTING and docs/ leads to a file and heading that exist', () => {
  const broken = []
  let links = 0
  for (const file of pages) {
    for (const [, target] of withoutCode(read(file)).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue
      links++
      const [rel, anchor] = target.split('#')
      const to = rel ? path.resolve(path.dirname(file), rel) : file
      const where = `${path.relative(root, file)}: ${target}`
      if (!fs.existsSync(to)) broken.push(`${where} (no such file)`)
      else if (anchor !== undefined && fs.statSync(to).isFile() && !anchorsOf(to).includes(anchor)) broken.push(`${where} (no such heading)`)
    }
  }
  assert.ok(links > 50, `links were found (${links})`)
  assert.deepEqual(broken, [], 'no broken link')
})

test('README links every page of docs/ and CONTRIBUTING.md', () => {
  const readme = read(path.join(root, 'README.md'))
  const targets = [...fs.readdirSync(docsDir).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`), 'CONTRIBUTING.md']
  assert.ok(targets.length >= 9, 'the docs pages exist')
  assert.deepEqual(targets.filter((t) => !readme.includes(`](${t}`)), [], 'every page is linked from README')
})

/** The long flags (with their short forms) of one `--help` text, --help and --version left out. */
function flagsOf(help) {
  const flags = []
  for (const m of help.matchAll(/^\s+(?:(-[a-zA-Z]), )?(--[a-z][a-z-]*)/gm)) {
    if (m[2] !== '--help' && m[2] !== '--version') flags.push({ short: m[1], long: m[2] })
  }
  return flags
}

test('every flag and subcommand of run-bg is in docs/cli.md', () => {
  const cli = read(path.join(docsDir, 'cli.md'))
  const help = (...args) => {
    const r = spawnSync(RUN_BG, [...args, '--help'], { encoding: 'utf8' })
    assert.equal(r.status, 0, `run-bg ${args.join(' ')} --help: ${r.stderr}`)
    return r.stdout
  }
  // `run-bg help` names every command (the CLI's own test holds it to clap's list) as `run-bg <command>`.
  const commands = [...new Set([...spawnSync(RUN_BG, ['help'], { encoding: 'utf8' }).stdout.split(/^Commands:$/m)[1].split(/^\S/m)[0]
    .matchAll(/run-bg ([a-z][a-z-]*)/g)].map((m) => m[1]))].filter((c) => c !== 'help')
  assert.ok(commands.length >= 10, `subcommands found: ${commands}`)
  const missing = []
  for (const command of commands) {
    if (!new RegExp(`run-bg ${command}\\b`).test(cli)) missing.push(`run-bg ${command}`)
  }
  const options = [[], ...commands.map((c) => [c])]
  let count = 0
  for (const args of options) {
    for (const { short, long } of flagsOf(help(...args))) {
      count++
      const documented = new RegExp(`${long}(?![a-z-])`).test(cli) || (short && new RegExp(`\\[${short} `).test(cli))
      if (!documented) missing.push(`run-bg ${args.join(' ')} ${long}`.replace('  ', ' '))
    }
  }
  assert.ok(count >= 40, `flags found: ${count}`)
  assert.deepEqual(missing, [], 'every subcommand and flag is documented in docs/cli.md')
})

test('every export of the package is in docs/js-api.md', () => {
  const api = read(path.join(docsDir, 'js-api.md'))
  const names = Object.keys(pm).filter((n) => !n.startsWith('__'))
  assert.ok(names.length >= 20, `exports found: ${names}`)
  // Named as code (`pm.summary(`, `` `summary` ``): the prose has words such as summary and snapshot anyway.
  assert.deepEqual(names.filter((n) => !new RegExp(`(?:pm\\.|\`)${n}\\b`).test(api)), [], 'every export is documented')
})

test('every tool of the MCP server, with every argument, is in docs/mcp-and-skill.md', async (t) => {
  const { home } = makeHome(t)
  const client = await connectMcp(t, home)
  const { tools } = await client.listTools()
  assert.ok(tools.length >= 8, `tools found: ${tools.map((x) => x.name)}`)
  const rows = read(path.join(docsDir, 'mcp-and-skill.md')).split('\n').filter((l) => l.startsWith('| `'))
  const missing = []
  for (const tool of tools) {
    const row = rows.find((r) => r.startsWith(`| \`${tool.name}\` |`))
    if (!row) { missing.push(tool.name); continue }
    const argsColumn = row.split(' | ')[1]
    for (const arg of Object.keys(tool.inputSchema.properties ?? {})) {
      if (!argsColumn.includes(`\`${arg}\``)) missing.push(`${tool.name}.${arg}`)
    }
  }
  assert.deepEqual(missing, [], 'every tool and argument is in the tools table')
  // The figures the docs give for what tools/list costs, near enough to what it costs now.
  const { whole, modelFacing } = toolsBudget(client, tools)
  const said = read(path.join(docsDir, 'mcp-and-skill.md')).match(/the whole `tools\/list` answer is ([\d,]+) characters;[^]*?, ([\d,]+), about/)
  assert.ok(said, 'mcp-and-skill.md says what tools/list costs')
  const [saidWhole, saidFacing] = said.slice(1).map((n) => Number(n.replace(/,/g, '')))
  assert.ok(Math.abs(saidWhole - whole) <= 100, `the docs say ${saidWhole} characters; tools/list is ${whole}`)
  assert.ok(Math.abs(saidFacing - modelFacing) <= 100, `the docs say ${saidFacing} for the model; it is ${modelFacing}`)
})

test('every Rust module opens with a //! line saying what it holds', () => {
  const sources = []
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(full)
      else if (entry.name.endsWith('.rs')) sources.push(full)
    }
  }
  for (const crate of fs.readdirSync(path.join(root, 'crates'))) {
    const dir = path.join(root, 'crates', crate)
    walk(path.join(dir, 'src'))
    if (fs.existsSync(path.join(dir, 'build.rs'))) sources.push(path.join(dir, 'build.rs'))
  }
  assert.ok(sources.length > 50, `found ${sources.length} Rust files`)
  const silent = sources.filter((file) => !read(file).trimStart().startsWith('//!')).map((file) => path.relative(root, file))
  assert.deepEqual(silent, [], 'modules without a //! line')
})
