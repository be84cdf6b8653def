// Releasing (docs/releasing.md): one script keeps every version in step
// (scripts/set-version.mjs, run on a copy of the files it writes), the test
// lists of the native runners hold (scripts/test-suite.mjs --check), and a
// release with a broken platform package is refused before npm is asked
// anything (scripts/publish-packages.mjs).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { root } from './helpers.mjs'

const SET_VERSION = path.join(root, 'scripts', 'set-version.mjs')
const node = (args, options = {}) => spawnSync(process.execPath, args, { encoding: 'utf8', ...options })
const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version

function tempDir(t, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** The files set-version.mjs reads and writes, copied into a fresh directory. */
function copyOfVersionedFiles(t) {
  const dir = tempDir(t, 'pm-set-version-')
  const files = ['package.json', 'package-lock.json', 'Cargo.toml', 'Cargo.lock', 'index.js',
    'packages/mcp/package.json', 'packages/mcp/proc-manager-mcp.mjs', 'plugins/run-bg/.claude-plugin/plugin.json',
    ...fs.readdirSync(path.join(root, 'npm')).map((abi) => `npm/${abi}/package.json`),
    ...fs.readdirSync(path.join(root, 'crates')).map((c) => `crates/${c}/Cargo.toml`)]
  for (const f of files) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true })
    fs.copyFileSync(path.join(root, f), path.join(dir, f))
  }
  return { dir, files }
}

test('the checkout\'s versions are in step; --expect takes a tag', () => {
  const r = node([SET_VERSION, '--check'])
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, new RegExp(`say ${version.replace(/\./g, '\\.')}$`, 'm'))
  assert.equal(node([SET_VERSION, '--check', '--expect', `v${version}`]).status, 0)
  assert.equal(node([SET_VERSION, '--print']).stdout, `${version}\n`)
})

test('set-version writes one version to every place and changes nothing else', (t) => {
  const { dir, files } = copyOfVersionedFiles(t)
  const before = Object.fromEntries(files.map((f) => [f, fs.readFileSync(path.join(dir, f), 'utf8')]))
  const next = '7.8.9-rc.1'
  const set = node([SET_VERSION, '--root', dir, next])
  assert.equal(set.status, 0, set.stderr)
  assert.equal(node([SET_VERSION, '--root', dir, '--check']).status, 0)

  const json = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'))
  const pkg = json('package.json')
  assert.equal(pkg.version, next)
  for (const [name, v] of Object.entries(pkg.optionalDependencies)) assert.equal(v, next, name)
  const lock = json('package-lock.json')
  assert.equal(lock.version, next)
  assert.equal(lock.packages[''].version, next)
  for (const abi of fs.readdirSync(path.join(dir, 'npm'))) assert.equal(json(`npm/${abi}/package.json`).version, next, abi)
  assert.equal(json('packages/mcp/package.json').dependencies['proc-manager'], next)
  assert.match(fs.readFileSync(path.join(dir, 'packages/mcp/proc-manager-mcp.mjs'), 'utf8'), new RegExp(`new McpServer\\(\\{[^}]*version: '${next}'`))
  assert.equal(json('plugins/run-bg/.claude-plugin/plugin.json').version, next)
  assert.match(fs.readFileSync(path.join(dir, 'Cargo.toml'), 'utf8'), new RegExp(`\\[workspace\\.package\\]\\nversion = "${next}"`))
  const cargoLock = fs.readFileSync(path.join(dir, 'Cargo.lock'), 'utf8')
  for (const crate of ['proc-manager-cli', 'proc-manager-core', 'proc-manager-node', 'proc-manager-top']) {
    assert.match(cargoLock, new RegExp(`name = "${crate}"\\nversion = "${next}"`), crate)
  }
  const loader = fs.readFileSync(path.join(dir, 'index.js'), 'utf8')
  assert.doesNotMatch(loader, new RegExp(`!== '${version.replace(/\./g, '\\.')}'`), 'no loader check left at the old version')
  // Every file differs from its original only where the old version became the new.
  for (const f of files) {
    const after = fs.readFileSync(path.join(dir, f), 'utf8')
    assert.equal(after.replaceAll(next, version), before[f], `${f} changed beyond its version`)
  }
  // Each file that names the version was written (a missed one would keep the old).
  const stale = node([SET_VERSION, '--root', dir, '--check', '--expect', version])
  assert.equal(stale.status, 1)
  for (const f of ['package.json', 'package-lock.json', 'npm/linux-x64-gnu/package.json', 'packages/mcp/package.json',
    'packages/mcp/proc-manager-mcp.mjs', 'plugins/run-bg/.claude-plugin/plugin.json', 'Cargo.toml', 'Cargo.lock', 'index.js']) {
    assert.ok(stale.stderr.includes(`${f}: `), `--check names ${f}:\n${stale.stderr}`)
  }
})

test('--check fails naming the place that drifted, and a platform package missing from one list', (t) => {
  const { dir } = copyOfVersionedFiles(t)
  const file = path.join(dir, 'npm', 'darwin-x64', 'package.json')
  fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace(`"version": "${version}"`, '"version": "0.0.1"'))
  const drift = node([SET_VERSION, '--root', dir, '--check'])
  assert.equal(drift.status, 1)
  assert.match(drift.stderr, /npm\/darwin-x64\/package\.json: version is "0\.0\.1", not /)
  assert.match(drift.stderr, new RegExp(`fix: node scripts/set-version\\.mjs ${version.replace(/\./g, '\\.')}`))
  assert.equal(drift.stderr.trim().split('\n').length, 3, `only that place is named:\n${drift.stderr}`)

  const pkgFile = path.join(dir, 'package.json')
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8'))
  delete pkg.optionalDependencies['proc-manager-win32-x64-gnu']
  fs.writeFileSync(pkgFile, JSON.stringify(pkg, null, 2))
  const missing = node([SET_VERSION, '--root', dir, '--check'])
  assert.equal(missing.status, 1)
  assert.match(missing.stderr, /the platform packages differ: .*proc-manager-win32-x64-gnu/)
})

test('a version that is not one, or a mode mixed with a version, is refused with exit 2 saying what is accepted', (t) => {
  const { dir } = copyOfVersionedFiles(t)
  const before = fs.readFileSync(path.join(dir, 'package.json'), 'utf8')
  for (const args of [['1.2'], ['01.2.3'], ['1.2.3.4'], ['--check', '1.2.3'], ['--expect', '1.2.3'], []]) {
    const r = node([SET_VERSION, '--root', dir, ...args])
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, /^set-version: .+\nusage: /, args.join(' '))
  }
  assert.match(node([SET_VERSION, '--root', dir, '1.2']).stderr, /'1\.2' is not a version; give MAJOR\.MINOR\.PATCH/)
  assert.equal(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'), before, 'nothing written')
})

test('every suite is placed for macOS, and one that reads /proc cannot be placed on its list', (t) => {
  const script = path.join(root, 'scripts', 'test-suite.mjs')
  const ok = node([script, '--check'])
  assert.equal(ok.status, 0, ok.stderr)
  const dir = tempDir(t, 'pm-test-suite-')
  fs.mkdirSync(path.join(dir, '__test__'))
  for (const f of fs.readdirSync(path.join(root, '__test__')).filter((f) => f.endsWith('.test.mjs'))) {
    fs.copyFileSync(path.join(root, '__test__', f), path.join(dir, '__test__', f))
  }
  assert.equal(node([script, '--check', '--root', dir]).status, 0)
  fs.writeFileSync(path.join(dir, '__test__', 'brand-new.test.mjs'), '')
  fs.appendFileSync(path.join(dir, '__test__', 'rerun.test.mjs'), "\nconst status = fs.readFileSync('/proc/self/status', 'utf8')\n")
  const bad = node([script, '--check', '--root', dir])
  assert.equal(bad.status, 1)
  assert.match(bad.stderr, /brand-new\.test\.mjs is in neither DARWIN nor NOT_ON_DARWIN/)
  assert.match(bad.stderr, /rerun\.test\.mjs is in DARWIN but reads \/proc: line \d+/)
})

test('a release whose platform package lacks its binaries is refused before npm is asked anything', (t) => {
  const dist = tempDir(t, 'pm-publish-')
  // Each platform package packed as npm would, but with the addon missing from one.
  for (const abi of fs.readdirSync(path.join(root, 'npm'))) {
    const manifest = JSON.parse(fs.readFileSync(path.join(root, 'npm', abi, 'package.json'), 'utf8'))
    const stage = path.join(dist, `stage-${abi}`, 'package')
    fs.mkdirSync(stage, { recursive: true })
    fs.writeFileSync(path.join(stage, 'package.json'), JSON.stringify(manifest))
    for (const f of manifest.files) {
      if (abi === 'darwin-arm64' && f === manifest.main) continue
      fs.mkdirSync(path.dirname(path.join(stage, f)), { recursive: true })
      fs.writeFileSync(path.join(stage, f), 'x')
    }
    const tar = spawnSync('tar', ['--format=ustar', '-czf', path.join(dist, `${manifest.name}-${version}.tgz`), '-C', path.dirname(stage), 'package'])
    if (tar.error) return t.skip(`tar cannot run: ${tar.error.message}`)
    assert.equal(tar.status, 0, String(tar.stderr))
    fs.rmSync(path.dirname(stage), { recursive: true })
  }
  const r = node([path.join(root, 'scripts', 'publish-packages.mjs'), dist, '--dry-run'], { env: { ...process.env, PATH: '/nonexistent' } })
  assert.equal(r.status, 1, r.stdout + r.stderr)
  assert.match(r.stderr, /proc-manager-darwin-arm64-[^ ]+\.tgz lacks proc-manager\.darwin-arm64\.node\n/)
  assert.match(r.stderr, /1 problem\(s\) above: nothing published/)
  // npm was never run: with no npm on PATH, a call would have failed saying so.
  assert.doesNotMatch(r.stderr, /cannot run npm/)
})
