#!/usr/bin/env node
// Publishes a release: every platform package, then proc-manager (whose
// optionalDependencies name them), then proc-manager-mcp (which depends on
// it), all at the one version scripts/set-version.mjs keeps in step. What
// release.yml's publish job runs, on the tarballs the native runners built.
//
//   node scripts/publish-packages.mjs <dir> [--dry-run]
//
// <dir> holds the platform packages' tarballs (ci-package.mjs's dist/, the
// runners' artifacts). This packs the root and MCP packages beside them,
// then refuses to publish anything unless:
//   - set-version.mjs --check passes (every file says the same version);
//   - there is exactly one tarball per package (every optionalDependency,
//     the root, the MCP server), each naming that package at that version,
//     a platform package's os/cpu/libc/main as npm/<abi>/package.json says
//     and holding every file it lists (the addon, run-bg, run-bg-top);
//   - on GitHub Actions, every package's repository is this repository
//     (npm refuses a provenance statement for another).
// Then each is published with `npm publish <tarball> --provenance --access
// public` (a prerelease such as 1.0.0-rc.1 under the dist-tag `next`, so
// `latest` never points at it). A version already on the registry is left
// as it is, saying so: a failed release can be run again.
// --dry-run does the checks and `npm publish --dry-run`, without provenance
// and without asking the registry what it has.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
// Set by main() from the command line.
let dryRun = false
let dir

function die(message) {
  console.error(`publish-packages: ${message}`)
  process.exit(1)
}

/** Runs npm (npm.cmd through a shell on Windows); returns spawnSync's result. */
function npm(argv, options = {}) {
  const r = spawnSync('npm', argv, { cwd: root, encoding: 'utf8', shell: process.platform === 'win32', ...options })
  if (r.error) die(`cannot run npm: ${r.error.message}`)
  return r
}

/** An npm tarball (a gzipped ustar archive): its package/package.json and the paths it holds. */
export function readTarball(file) {
  const tar = zlib.gunzipSync(fs.readFileSync(file))
  const paths = []
  let manifest = null
  for (let at = 0; at + 512 <= tar.length;) {
    const header = tar.subarray(at, at + 512)
    if (header.every((b) => b === 0)) break
    const field = (start, length) => header.toString('latin1', start, start + length).replace(/\0.*$/s, '')
    // POSIX ustar keeps a path's head in `prefix` (345); GNU tar's format uses those bytes otherwise.
    const prefix = header.toString('latin1', 257, 263) === 'ustar\0' ? field(345, 155) : ''
    const name = (prefix ? `${prefix}/` : '') + field(0, 100)
    const size = parseInt(field(124, 12).trim() || '0', 8)
    paths.push(name.replace(/^package\//, ''))
    if (name === 'package/package.json') manifest = JSON.parse(tar.toString('utf8', at + 512, at + 512 + size))
    at += 512 + Math.ceil(size / 512) * 512
  }
  if (!manifest) throw new Error(`${file} has no package/package.json`)
  return { manifest, paths }
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
if (isMain) main()

function main() {
  const args = process.argv.slice(2)
  dryRun = args.includes('--dry-run')
  const positional = args.filter((a) => !a.startsWith('--'))
  const unknown = args.filter((a) => a.startsWith('--') && a !== '--dry-run')
  if (unknown.length || positional.length !== 1) {
    console.error('usage: publish-packages.mjs <dir of platform tarballs> [--dry-run]')
    process.exit(2)
  }
  dir = path.resolve(positional[0])
  if (!fs.existsSync(dir)) die(`${dir} does not exist`)

  const check = spawnSync(process.execPath, [path.join(root, 'scripts', 'set-version.mjs'), '--check'], { stdio: 'inherit' })
  if (check.status !== 0) die('the versions differ (above): nothing published')
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  const version = pkg.version
  const mcp = JSON.parse(fs.readFileSync(path.join(root, 'packages', 'mcp', 'package.json'), 'utf8'))

  // The platform packages as the checkout describes them.
  const platforms = new Map()
  for (const abi of fs.readdirSync(path.join(root, 'npm'))) {
    const file = path.join(root, 'npm', abi, 'package.json')
    if (fs.existsSync(file)) {
      const m = JSON.parse(fs.readFileSync(file, 'utf8'))
      platforms.set(m.name, m)
    }
  }

  const platformNames = Object.keys(pkg.optionalDependencies ?? {}).filter((n) => n.startsWith(`${pkg.name}-`))
  const order = [...platformNames, pkg.name, mcp.name]

  // What is in <dir>, checked; `names` are the packages that must be there.
  const inspect = (names) => {
    const found = new Map()
    const problems = []
    for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.tgz')).sort()) {
      let m
      let paths
      try {
        ;({ manifest: m, paths } = readTarball(path.join(dir, f)))
      } catch (e) {
        problems.push(`${f}: ${e.message}`)
        continue
      }
      if (!order.includes(m.name)) problems.push(`${f} is ${m.name}, which is no package of this release (${order.join(', ')})`)
      else if (found.has(m.name)) problems.push(`${m.name} twice: ${path.basename(found.get(m.name).file)} and ${f}`)
      else found.set(m.name, { file: path.join(dir, f), manifest: m, paths })
      if (m.version !== version) problems.push(`${f} is version ${m.version}, not ${version}`)
    }
    for (const name of names) if (!found.has(name)) problems.push(`no tarball of ${name} in ${dir}`)
    for (const [name, { file, manifest, paths }] of found) {
      const want = platforms.get(name)
      if (want) {
        // The addon and the executables: a platform package without them installs and then fails.
        const missing = (want.files ?? []).filter((f) => !paths.includes(f))
        if (missing.length) problems.push(`${path.basename(file)} lacks ${missing.join(', ')}`)
        for (const key of ['os', 'cpu', 'libc', 'main']) {
          if (JSON.stringify(manifest[key]) !== JSON.stringify(want[key])) problems.push(`${path.basename(file)}: ${key} is ${JSON.stringify(manifest[key])}, npm/*/package.json says ${JSON.stringify(want[key])}`)
        }
      }
      if (process.env.GITHUB_ACTIONS === 'true' && process.env.GITHUB_REPOSITORY) {
        const url = manifest.repository?.url ?? manifest.repository ?? ''
        const repo = /github\.com[/:]([^/]+\/[^/.]+?)(?:\.git)?$/.exec(url)?.[1]
        if (repo?.toLowerCase() !== process.env.GITHUB_REPOSITORY.toLowerCase()) {
          problems.push(`${name}'s repository is ${url || 'not set'}, but this runs in ${process.env.GITHUB_REPOSITORY}: npm refuses provenance for another repository`)
        }
      }
    }
    if (problems.length) {
      for (const p of problems) console.error(`publish-packages: ${p}`)
      die(`${problems.length} problem(s) above: nothing published`)
    }
    return found
  }

  // The platform packages first (no npm call until they hold), then the
  // root and MCP packages, packed here beside them.
  inspect(platformNames)
  for (const cwd of [root, path.join(root, 'packages', 'mcp')]) {
    const r = npm(['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd })
    if (r.status !== 0) die(`npm pack in ${path.relative(root, cwd) || '.'} failed: ${r.stderr.trim()}`)
  }
  const found = inspect(order)

  const tag = version.includes('-') ? 'next' : 'latest'
  console.log(`publish-packages: ${order.length} packages at ${version} (dist-tag ${tag})${dryRun ? ', dry run' : ''}`)
  const results = []
  for (const name of order) {
    const { file } = found.get(name)
    if (!dryRun) {
      const seen = npm(['view', `${name}@${version}`, 'version'])
      if (seen.status === 0 && seen.stdout.trim() === version) {
        results.push(`${name}@${version}: already published, left as it is`)
        continue
      }
    }
    const argv = ['publish', file, '--access', 'public', '--tag', tag, ...(dryRun ? ['--dry-run'] : ['--provenance'])]
    console.log(`publish-packages: npm ${argv.join(' ')}`)
    const r = npm(argv, { stdio: 'inherit', encoding: undefined })
    if (r.status !== 0) {
      for (const line of results) console.log(`publish-packages: ${line}`)
      die(`npm publish ${path.basename(file)} failed (exit ${r.status}); the packages before it are published; run again to go on`)
    }
    results.push(`${name}@${version}: ${dryRun ? 'dry run ok' : 'published'}`)
  }
  for (const line of results) console.log(`publish-packages: ${line}`)
}
