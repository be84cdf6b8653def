#!/usr/bin/env node
// The one place the release version is written, and checked. Every file that
// names proc-manager's own version:
//
//   package.json                         version; optionalDependencies proc-manager-*
//   package-lock.json                    version; packages[""]: version, optionalDependencies
//   npm/*/package.json                   version (the platform packages)
//   packages/mcp/package.json            version; dependencies.proc-manager
//   packages/mcp/proc-manager-mcp.mjs    the version the MCP server gives its clients
//   plugins/run-bg/.claude-plugin/plugin.json  version
//   Cargo.toml                           [workspace.package] version
//   Cargo.lock                           the workspace crates' entries (proc-manager-*)
//   index.js                             napi's loader: the platform package version it expects
//
// usage: node scripts/set-version.mjs <version>    write it everywhere
//        node scripts/set-version.mjs --check [--expect <version>]
//                                                  exit 1 naming every place that differs
//                                                  from package.json's version (or from
//                                                  <version>; a leading v is dropped, so
//                                                  --expect "$GITHUB_REF_NAME" takes a tag)
//        node scripts/set-version.mjs --print      package.json's version
// --root <dir> works on another checkout (the tests run it on a copy).
//
// The set of platform packages is checked too: the npm/* directories, the
// root's optionalDependencies and package-lock.json's must name the same
// packages, so a target added in one place and not another fails --check.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

// Semantic Versioning 2.0.0 (https://semver.org), as npm and cargo accept it.
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/

function usage(message) {
  console.error(`set-version: ${message}`)
  console.error('usage: set-version.mjs <version> | --check [--expect <version>] | --print  [--root <dir>]')
  process.exit(2)
}

const args = process.argv.slice(2)
let root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
let mode = null
let version = null
let expect = null
for (let i = 0; i < args.length; i++) {
  const a = args[i]
  if (a === '--root' || a === '--expect') {
    const value = args[++i]
    if (value === undefined || value.startsWith('--')) usage(`${a} needs a value`)
    if (a === '--root') root = path.resolve(value)
    else expect = value.replace(/^v/, '')
  } else if (a === '--check' || a === '--print') {
    if (mode) usage(`${a} and ${mode} cannot be combined`)
    mode = a
  } else if (a.startsWith('--')) {
    usage(`unknown option ${a}`)
  } else {
    if (version !== null) usage(`one version, not ${version} and ${a}`)
    version = a.replace(/^v/, '')
  }
}
if (mode && version !== null) usage(`${mode} takes no version (got ${version}); use --expect <version> with --check`)
if (!mode && version === null) usage('give a version (e.g. 0.2.0), --check or --print')
if (expect !== null && mode !== '--check') usage('--expect goes with --check')
for (const v of [version, expect]) {
  if (v !== null && !SEMVER.test(v)) usage(`'${v}' is not a version; give MAJOR.MINOR.PATCH with an optional -prerelease, e.g. 0.2.0 or 1.0.0-rc.1`)
}

const rel = (file) => path.relative(root, file) || file
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'))
function writeJson(file, value) {
  const text = fs.readFileSync(file, 'utf8')
  const indent = /^\{\n( +)"/.exec(text)?.[1].length ?? 2
  fs.writeFileSync(file, `${JSON.stringify(value, null, indent)}\n`)
}

/**
 * Every place the version is written, each as { file, where, get(), set(v) }.
 * get() returns the versions found (one per occurrence); set(v) rewrites
 * them in memory, and save() writes each file once.
 */
function places() {
  const out = []
  const pending = new Map() // file -> { text } or { json }
  const jsonOf = (file) => {
    if (!pending.has(file)) pending.set(file, { json: readJson(file) })
    return pending.get(file).json
  }
  const textOf = (file) => {
    if (!pending.has(file)) pending.set(file, { text: fs.readFileSync(file, 'utf8') })
    return pending.get(file)
  }
  // A JSON value at `keys` (e.g. ['optionalDependencies', name]).
  const jsonPlace = (file, keys) => {
    const parent = () => keys.slice(0, -1).reduce((o, k) => o?.[k], jsonOf(file))
    const last = keys.at(-1)
    out.push({
      file,
      where: keys.map((k) => (k === '' ? '""' : k)).join('.'),
      get: () => [parent()?.[last]],
      set: (v) => { parent()[last] = v },
    })
  }
  // Every match of `re` in a text file; the version is its group 2, between groups 1 and 3.
  const textPlace = (file, where, re) => {
    out.push({
      file,
      where,
      get: () => [...textOf(file).text.matchAll(re)].map((m) => m[2]),
      set: (v) => {
        const entry = textOf(file)
        entry.text = entry.text.replace(re, (_, a, _old, b) => `${a}${v}${b}`)
      },
    })
  }

  const pkgFile = path.join(root, 'package.json')
  const pkg = jsonOf(pkgFile)
  jsonPlace(pkgFile, ['version'])
  const optional = Object.keys(pkg.optionalDependencies ?? {}).filter((n) => n.startsWith(`${pkg.name}-`))
  for (const name of optional) jsonPlace(pkgFile, ['optionalDependencies', name])

  const lockFile = path.join(root, 'package-lock.json')
  if (fs.existsSync(lockFile)) {
    const lock = jsonOf(lockFile)
    jsonPlace(lockFile, ['version'])
    jsonPlace(lockFile, ['packages', '', 'version'])
    for (const name of Object.keys(lock.packages?.['']?.optionalDependencies ?? {}).filter((n) => n.startsWith(`${pkg.name}-`))) {
      jsonPlace(lockFile, ['packages', '', 'optionalDependencies', name])
    }
    // An installed copy of one of our own packages, if the lock ever holds one.
    for (const key of Object.keys(lock.packages ?? {}).filter((k) => k.startsWith(`node_modules/${pkg.name}-`) && !k.slice(13).includes('/'))) {
      if (!lock.packages[key].link) jsonPlace(lockFile, ['packages', key, 'version'])
    }
  }

  const npmDir = path.join(root, 'npm')
  const platformDirs = fs.existsSync(npmDir)
    ? fs.readdirSync(npmDir).filter((d) => fs.existsSync(path.join(npmDir, d, 'package.json'))).sort()
    : []
  for (const dir of platformDirs) jsonPlace(path.join(npmDir, dir, 'package.json'), ['version'])

  const mcpFile = path.join(root, 'packages', 'mcp', 'package.json')
  if (fs.existsSync(mcpFile)) {
    jsonPlace(mcpFile, ['version'])
    if (jsonOf(mcpFile).dependencies?.[pkg.name] !== undefined) jsonPlace(mcpFile, ['dependencies', pkg.name])
  }
  const mcpServer = path.join(root, 'packages', 'mcp', 'proc-manager-mcp.mjs')
  if (fs.existsSync(mcpServer)) {
    textPlace(mcpServer, 'McpServer version', /(new McpServer\(\{[^}]*?\bversion: ')([^']*)(')/g)
  }
  const plugin = path.join(root, 'plugins', 'run-bg', '.claude-plugin', 'plugin.json')
  if (fs.existsSync(plugin)) jsonPlace(plugin, ['version'])

  // [workspace.package] version, up to the next table header.
  const cargoToml = path.join(root, 'Cargo.toml')
  textPlace(cargoToml, '[workspace.package] version', /(\[workspace\.package\][^[]*?\nversion = ")([^"]*)(")/g)

  // The lock's entries for the crates that take the workspace version.
  const cargoLock = path.join(root, 'Cargo.lock')
  const crates = fs.readdirSync(path.join(root, 'crates'))
    .map((d) => path.join(root, 'crates', d, 'Cargo.toml'))
    .filter((f) => fs.existsSync(f) && /^version\.workspace = true$/m.test(fs.readFileSync(f, 'utf8')))
    .map((f) => /^name = "([^"]+)"/m.exec(fs.readFileSync(f, 'utf8'))[1])
    .sort()
  for (const name of crates) {
    const escaped = name.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')
    textPlace(cargoLock, `[[package]] ${name}`, new RegExp(`(\\[\\[package\\]\\]\\nname = "${escaped}"\\nversion = ")([^"]*)(")`, 'g'))
  }

  // napi's generated loader compares each platform package's version with its own.
  const loader = path.join(root, 'index.js')
  if (fs.existsSync(loader)) {
    textPlace(loader, 'bindingPackageVersion checks', /(bindingPackageVersion !== ')([^']*)(')/g)
    textPlace(loader, 'version mismatch messages', /(binding package version mismatch, expected )(\S+?)( but got)/g)
  }

  const save = () => {
    for (const [file, entry] of pending) {
      if (entry.json) writeJson(file, entry.json)
      else fs.writeFileSync(file, entry.text)
    }
  }
  return { list: out, save, pkg, platformDirs, optional, crates }
}

const { list, save, pkg, platformDirs, optional, crates } = places()

if (mode === '--print') {
  console.log(pkg.version)
  process.exit(0)
}

if (mode === '--check') {
  const want = expect ?? pkg.version
  const problems = []
  for (const p of list) {
    const found = p.get()
    if (found.length === 0) problems.push(`${rel(p.file)}: ${p.where}: not found`)
    const wrong = found.filter((v) => v !== want)
    if (wrong.length) {
      const values = [...new Set(wrong)].map((v) => JSON.stringify(v)).join(', ')
      problems.push(`${rel(p.file)}: ${p.where} ${found.length > 1 ? `(${wrong.length} of ${found.length}) ` : ''}is ${values}, not ${want}`)
    }
  }
  // The same platform packages everywhere.
  const fromDirs = platformDirs.map((d) => readJson(path.join(root, 'npm', d, 'package.json')).name).sort()
  const fromOptional = [...optional].sort()
  if (fromDirs.join() !== fromOptional.join()) {
    problems.push(`the platform packages differ: npm/*/package.json name ${fromDirs.join(', ') || 'none'}; package.json optionalDependencies name ${fromOptional.join(', ') || 'none'}`)
  }
  const lockFile = path.join(root, 'package-lock.json')
  if (fs.existsSync(lockFile)) {
    const fromLock = Object.keys(readJson(lockFile).packages?.['']?.optionalDependencies ?? {}).sort()
    if (fromLock.join() !== fromOptional.join()) {
      problems.push(`package-lock.json's optionalDependencies (${fromLock.join(', ')}) are not package.json's (${fromOptional.join(', ')}): run npm install`)
    }
  }
  if (crates.length === 0) problems.push('no crate under crates/ takes the workspace version (version.workspace = true)')
  if (problems.length) {
    console.error(`set-version: ${problems.length} place(s) differ from ${want}${expect ? ' (--expect)' : " (package.json's version)"}:`)
    for (const p of problems) console.error(`  ${p}`)
    console.error(`fix: node scripts/set-version.mjs ${want}`)
    process.exit(1)
  }
  const count = list.reduce((n, p) => n + p.get().length, 0)
  console.log(`set-version: ${count} places in ${new Set(list.map((p) => p.file)).size} files say ${want}`)
  process.exit(0)
}

for (const p of list) p.set(version)
save()
const changed = list.reduce((n, p) => n + p.get().length, 0)
console.log(`set-version: wrote ${version} to ${changed} places in ${new Set(list.map((p) => p.file)).size} files:`)
for (const file of [...new Set(list.map((p) => p.file))]) console.log(`  ${rel(file)}`)
