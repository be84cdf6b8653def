// Packaging: where the run-bg shim and the addon find the native executable,
// and the packed packages installed offline into an empty project, on a PATH
// without cargo or rustc, as a user without Rust gets them.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { makeHome, runBg, startJob, checkJson, waitFor, killPid, root } from './helpers.mjs'

const SHIM = path.join(root, 'bin', 'run-bg.js')
const shellQuote = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`

// An on-exit hook runs in its supervisor's environment, which carries the
// supervisor mark PROC_MANAGER_SUPERVISOR=<job id>; the mark is no path to a
// binary, so run-bg and the addon called from a hook must still find theirs.
test('run-bg and the addon work inside an on-exit hook (PROC_MANAGER_SUPERVISOR there is a job id)', async (t) => {
  const { home } = makeHome(t)
  const dir = fs.mkdtempSync(path.join(home, 'hook-'))
  const cliOut = path.join(dir, 'cli.txt')
  const apiOut = path.join(dir, 'api.txt')
  const api = `const pm = require(${JSON.stringify(root)}); ` +
    `try { const r = pm.runBackground('true', { label: 'from-hook' }); console.log('started ' + r.jobId) } ` +
    `catch (e) { console.log('error ' + e.message) }`
  const hook = `${shellQuote(process.execPath)} ${shellQuote(SHIM)} --version > ${shellQuote(cliOut)} 2>&1; ` +
    `${shellQuote(process.execPath)} -e ${shellQuote(api)} > ${shellQuote(apiOut)} 2>&1`
  startJob(home, ['true'], ['--on-exit', hook])
  await waitFor(() => fs.existsSync(apiOut) && fs.readFileSync(apiOut, 'utf8').includes('\n'), { what: 'the hook to finish' })
  assert.match(fs.readFileSync(cliOut, 'utf8'), /^run-bg \d+\.\d+\.\d+/)
  const started = fs.readFileSync(apiOut, 'utf8')
  assert.match(started, /^started \S+/)
  const id = started.trim().split(' ')[1]
  assert.equal(runBg(home, ['wait', id, '--timeout', '30s']).code, 0)
})

test('PROC_MANAGER_BINARY_PATH names the run-bg that the shim runs and the addon starts as supervisor', async (t) => {
  const { home } = makeHome(t)
  const calls = path.join(home, 'calls.txt')
  const wrapper = path.join(home, 'my-run-bg')
  fs.writeFileSync(wrapper, `#!/bin/sh\necho "$1" >> ${shellQuote(calls)}\nexec ${shellQuote(path.join(root, 'native', 'run-bg'))} "$@"\n`, { mode: 0o755 })
  const env = { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_BINARY_PATH: wrapper }
  const cli = spawnSync(process.execPath, [SHIM, '--version'], { env, encoding: 'utf8' })
  assert.equal(cli.status, 0, cli.stderr)
  assert.match(cli.stdout, /^run-bg /)
  // Run as npm links it: an executable with a #!/usr/bin/env node line.
  const launched = spawnSync(SHIM, ['--help'], { env, encoding: 'utf8' })
  assert.equal(launched.status, 0, launched.stderr)
  const api = spawnSync(process.execPath, ['-e', `console.log(require(${JSON.stringify(root)}).runBackground('true').jobId)`], { env, encoding: 'utf8' })
  assert.equal(api.status, 0, api.stderr)
  const id = api.stdout.trim()
  assert.equal(runBg(home, ['wait', id, '--timeout', '30s']).code, 0)
  const seen = fs.readFileSync(calls, 'utf8').split('\n').filter(Boolean)
  assert.deepEqual(seen.slice(0, 2), ['--version', '--help'], 'the shim, run by node and as the linked command, ran the wrapper')
  assert.ok(seen.length >= 3, `the addon started its supervisor through the wrapper: ${seen}`)
})

// ---------------------------------------------------------------------------
// The packed packages, installed offline into an empty project.

const { abi, platformPackage } = createRequire(import.meta.url)('../platform.js')
const EXE = (dir, name) => fs.existsSync(path.join(dir, name)) && fs.statSync(path.join(dir, name)).isFile()
// PATH without any directory that holds cargo or rustc: what a user without Rust has.
const PATH_WITHOUT_RUST = (process.env.PATH || '').split(':').filter((d) => d && !EXE(d, 'cargo') && !EXE(d, 'rustc')).join(':')

function run(command, args, options = {}) {
  const started = process.hrtime.bigint()
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 180_000, maxBuffer: 64 * 1024 * 1024, ...options })
  if (result.error) throw result.error
  return { ...result, seconds: Number(process.hrtime.bigint() - started) / 1e9 }
}

function must(result, what) {
  assert.equal(result.status, 0, `${what} exited ${result.status ?? result.signal}\n${result.stdout}\n${result.stderr}`)
  return result
}

/** `npm pack` of `dir` into `dest`; returns the tarball's path and npm's file list. */
function pack(dir, dest, env) {
  const r = must(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dest], { cwd: dir, env }), `npm pack in ${dir}`)
  const [info] = JSON.parse(r.stdout)
  return { tarball: path.join(dest, info.filename), files: info.files.map((f) => f.path), size: info.size, unpackedSize: info.unpackedSize }
}

/**
 * A project depending on the packed `packs` (mcp first), with a
 * package-lock.json that also pins every package the first one needs from the
 * registry, at the version and integrity of this repository's lockfile.
 */
function writeLockedProject(dir, packs) {
  const repoLock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8')).packages
  const manifests = packs.map((p) => {
    const listing = spawnSync('tar', ['-xzOf', p.tarball, 'package/package.json'], { encoding: 'utf8' })
    assert.equal(listing.status, 0, listing.stderr)
    return JSON.parse(listing.stdout)
  })
  const ours = new Set(manifests.map((m) => m.name))
  const rel = (tarball) => `file:${path.relative(dir, tarball)}`
  const packages = {
    '': { name: 'consumer', version: '1.0.0', dependencies: Object.fromEntries(manifests.map((m, i) => [m.name, rel(packs[i].tarball)])) },
  }
  const fields = ['version', 'resolved', 'integrity', 'license', 'dependencies', 'optionalDependencies', 'peerDependencies', 'peerDependenciesMeta', 'bin', 'engines', 'os', 'cpu', 'libc', 'optional']
  const pick = (entry) => Object.fromEntries(fields.filter((f) => entry[f] !== undefined).map((f) => [f, entry[f]]))
  manifests.forEach((m, i) => {
    packages[`node_modules/${m.name}`] = { ...pick(m), resolved: rel(packs[i].tarball) }
  })
  const parent = (loc) => (loc.includes('/node_modules/') ? loc.slice(0, loc.lastIndexOf('/node_modules/')) : '')
  const visit = (from, name) => {
    if (ours.has(name)) return
    for (let dir = from; ; dir = parent(dir)) {
      const loc = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`
      if (repoLock[loc]) {
        if (packages[loc]) return
        packages[loc] = pick(repoLock[loc])
        for (const dep of Object.keys({ ...repoLock[loc].dependencies, ...repoLock[loc].optionalDependencies })) visit(loc, dep)
        return
      }
      assert.ok(dir, `${name} (needed by ${from}) is not in package-lock.json`)
    }
  }
  for (const dep of Object.keys(manifests[0].dependencies || {})) visit('', dep)
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, dependencies: packages[''].dependencies }, null, 2))
  fs.writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', lockfileVersion: 3, requires: true, packages }, null, 2))
}

const addonName = `proc-manager.${abi()}.node`
// Where the platform package's files come from: the local build (npm test),
// or, with PROC_MANAGER_TEST_PLATFORM_DIR=npm/<abi>, what build-target.mjs
// built there (CI, scripts/ci-platform-packages.sh: the published artifacts).
const artifacts = process.env.PROC_MANAGER_TEST_PLATFORM_DIR ? path.resolve(root, process.env.PROC_MANAGER_TEST_PLATFORM_DIR) : root
const localBuild = ['run-bg', 'run-bg-top'].every((exe) => fs.existsSync(path.join(artifacts, 'native', exe))) && fs.existsSync(path.join(artifacts, addonName))
const manifest = path.join(root, 'npm', abi(), 'package.json')
const skipReason =
  !fs.existsSync(manifest) ? `no platform package definition for ${abi()} (npm/${abi()}/package.json)`
    : !localBuild ? `nothing to pack: no ${addonName}, native/run-bg and native/run-bg-top in ${artifacts} (run npm run build)`
      : spawnSync('npm', ['--version']).status !== 0 ? 'npm is not on PATH'
        : false

let packed = null
after(() => packed && fs.rmSync(packed.work, { recursive: true, force: true }))
/** Packs the three packages once (into a temp dir removed after the file's tests). */
function packAll(env) {
  if (packed) return packed
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-pack-'))
  // The host's platform package from the local build (the CI builds the
  // published ones with build-target.mjs; this checks the layout, not the build).
  const stage = path.join(work, 'stage', abi())
  fs.mkdirSync(path.join(stage, 'native'), { recursive: true })
  fs.copyFileSync(manifest, path.join(stage, 'package.json'))
  fs.copyFileSync(path.join(root, 'LICENSE'), path.join(stage, 'LICENSE'))
  fs.copyFileSync(path.join(artifacts, addonName), path.join(stage, addonName))
  fs.copyFileSync(path.join(artifacts, 'native', 'run-bg'), path.join(stage, 'native', 'run-bg'))
  fs.copyFileSync(path.join(artifacts, 'native', 'run-bg-top'), path.join(stage, 'native', 'run-bg-top'))
  const tarballs = path.join(work, 'tarballs')
  fs.mkdirSync(tarballs)
  packed = {
    work,
    platform: pack(stage, tarballs, env),
    main: pack(root, tarballs, env),
    mcp: pack(path.join(root, 'packages', 'mcp'), tarballs, env),
  }
  return packed
}

/** The environment of a user without Rust: no cargo or rustc on PATH, no overrides. */
function userEnv() {
  const env = { ...process.env, PATH: PATH_WITHOUT_RUST, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }
  delete env.PROC_MANAGER_BINARY_PATH
  delete env.PROC_MANAGER_SUPERVISOR
  for (const tool of ['cargo', 'rustc']) {
    assert.notEqual(spawnSync('sh', ['-c', `command -v ${tool}`], { env }).status, 0, `${tool} must not be on the test's PATH`)
  }
  return env
}

function emptyProject(parent, name) {
  const project = path.join(parent, name)
  fs.mkdirSync(project)
  fs.writeFileSync(path.join(project, 'package.json'), '{"name":"consumer","version":"1.0.0","private":true}\n')
  return project
}

/** The project's node_modules/.bin/run-bg, as npm linked it. */
const linkedBin = (inProject) => path.join(inProject.cwd, 'node_modules', '.bin', 'run-bg')

/** README's job with `npx run-bg`, then `npx run-bg check`; returns the job id. */
function readmeJob(inProject) {
  const ack = must(run('npx', ['run-bg', '--label', 'demo', '--', 'sh', '-c', 'echo hi; sleep 1'], inProject), 'npx run-bg')
  const id = ack.stdout.match(/\b(demo-[0-9a-f]+)\b/)?.[1]
  assert.ok(id, `no job id in the ack: ${ack.stdout}`)
  // The wait through the linked command: npx finds run-bg the same way for
  // every subcommand, and each npx costs an npm start.
  assert.equal(run(linkedBin(inProject), ['wait', id, '--timeout', '60s'], inProject).status, 0)
  const check = must(run('npx', ['run-bg', 'check', id], inProject), 'npx run-bg check')
  assert.match(check.stdout, /success/)
  assert.match(check.stdout, /^hi$/m)
  return id
}

/**
 * `require('proc-manager').runBackground` in the project: the entry, the addon
 * (from the platform package) and the supervisor it starts (that package's
 * run-bg) are all the installed ones.
 */
function apiJob(project, inProject) {
  const api = must(run(process.execPath, ['-e', `
    const pm = require('proc-manager')
    const started = pm.runBackground('echo api-ok', { label: 'api' })
    const maps = require('fs').readFileSync('/proc/self/maps', 'utf8')
    // jobEvents lives in job-events.js, beside the loader: it must be packed.
    pm.jobEvents().close()
    console.log(JSON.stringify({ id: started.jobId, entry: require.resolve('proc-manager'),
      addon: maps.split('\\n').map((l) => l.split(' ').pop()).find((f) => f.endsWith('.node')) }))
  `], inProject), 'require(proc-manager).runBackground')
  const loaded = JSON.parse(api.stdout)
  const real = fs.realpathSync(project)
  assert.equal(loaded.entry, path.join(real, 'node_modules', 'proc-manager', 'index.js'))
  assert.equal(loaded.addon, path.join(real, 'node_modules', platformPackage(), addonName))
  assert.equal(run(linkedBin(inProject), ['wait', loaded.id, '--timeout', '60s'], inProject).status, 0)
  const check = must(run('npx', ['run-bg', 'check', loaded.id, '--json'], inProject), 'check').stdout
  assert.match(check, /api-ok/)
}

/**
 * The linked command, node_modules/.bin/run-bg (a link to bin/run-bg.js, the
 * Node shim npm's Windows wrappers also run), runs the platform package's
 * run-bg as its child: the job's exit status through `wait`, and `--tie`
 * tied to the shell that ran it.
 */
async function linkedCommand(t, project, inProject) {
  const linked = path.join(project, 'node_modules', '.bin', 'run-bg')
  assert.equal(fs.readlinkSync(linked), '../proc-manager/bin/run-bg.js')
  const native = fs.realpathSync(path.join(project, 'node_modules', platformPackage(), 'native', 'run-bg'))
  const { env } = inProject
  const { home } = makeHome(t)
  const inHome = { ...inProject, env: { ...env, PROC_MANAGER_HOME: home } }

  // A `wait` under way: /proc names what the shim's child runs.
  const { jobId } = JSON.parse(must(run(linked, ['--json', '--', 'sleep', '300'], inHome), 'linked run-bg').stdout)
  const waiting = spawn(linked, ['wait', jobId, '--timeout', '60s'], { ...inHome, stdio: 'ignore' })
  const exited = new Promise((resolve) => waiting.once('exit', (code, signal) => resolve({ code, signal })))
  const childExe = () => {
    for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === waiting.pid) return fs.readlinkSync(`/proc/${pid}/exe`)
      } catch {}
    }
    return null
  }
  let exe = null
  try {
    await waitFor(() => (exe = childExe()) === native, { timeout: 10_000, what: 'the linked run-bg to start the native one' })
  } catch {}
  assert.equal(exe, native, `the linked command's child runs ${exe}`)
  must(run(linked, ['kill', jobId], inHome), 'linked run-bg kill')
  assert.deepEqual(await exited, { code: 143, signal: null }, "wait exits with the killed job's status")
  const failed = JSON.parse(must(run(linked, ['--json', '--', 'sh', '-c', 'exit 7'], inHome), 'run-bg').stdout)
  assert.equal(run(linked, ['wait', failed.jobId, '--timeout', '30s'], inHome).status, 7)
  assert.equal(run(linked, ['--no-such-flag'], inHome).status, 2)

  // --tie: the job ends with the shell that ran the linked run-bg.
  const ack = path.join(home, 'ack.json')
  const starter = spawn('sh', ['-c', `"$0" --tie --json -- sleep 301 > ${JSON.stringify(ack)} && exec sleep 300`, linked], { ...inHome, stdio: 'ignore' })
  t.after(() => killPid(starter.pid))
  const tied = await waitFor(() => {
    try { return JSON.parse(fs.readFileSync(ack, 'utf8')) } catch { return null }
  }, { what: 'the --tie ack' })
  assert.deepEqual(checkJson(home, tied.jobId).tie, { pid: starter.pid }, 'tied to the shell that ran run-bg')
  killPid(starter.pid)
  const ended = await waitFor(() => {
    const c = checkJson(home, tied.jobId)
    return c.status !== 'running' ? c : null
  }, { what: 'the tied job to end' })
  assert.equal(ended.tie.reason, `its caller (pid ${starter.pid}) exited`)
}

test('the packed packages install offline, without cargo, and run the README job, the API, check and the MCP server', { skip: skipReason }, async (t) => {
  const env = userEnv()
  const { work, platform, main, mcp } = packAll(env)
  t.diagnostic(`platform package from ${artifacts}`)
  for (const p of [platform, main, mcp]) t.diagnostic(`${path.basename(p.tarball)}: ${p.size} B packed, ${p.unpackedSize} B unpacked, ${p.files.length} files`)

  // The root package: JS, types and the skill; nothing to build, no install script.
  const allowed = /^(index\.js|index\.d\.ts|platform\.js|job-events\.js|package\.json|README\.md|LICENSE|bin\/run-bg|bin\/[^/]+\.js|skills\/run-bg\/[^/]+\.md)$/
  assert.deepEqual(main.files.filter((f) => !allowed.test(f)), [], 'files beyond JS, types and the skill')
  const rootManifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  for (const script of ['preinstall', 'install', 'postinstall', 'prepare']) assert.equal(rootManifest.scripts?.[script], undefined, `${script} script`)
  assert.equal(rootManifest.optionalDependencies[platformPackage()], rootManifest.version)
  assert.deepEqual(platform.files.sort(), ['LICENSE', addonName, 'native/run-bg', 'native/run-bg-top', 'package.json'].sort())

  const project = emptyProject(work, 'npm11')
  const install = must(run('npm', ['install', '--offline', platform.tarball, main.tarball], { cwd: project, env }), 'npm install --offline')
  t.diagnostic(`npm ${run('npm', ['--version'], { env }).stdout.trim()} install --offline (proc-manager + ${platformPackage()}), no cargo on PATH: ${install.seconds.toFixed(2)} s`)
  assert.ok(fs.existsSync(path.join(project, 'node_modules', platformPackage(), 'native', 'run-bg')))

  const { home } = makeHome(t)
  const inProject = { cwd: project, env: { ...env, PROC_MANAGER_HOME: home, npm_config_offline: 'true' } }
  const id = readmeJob(inProject)
  apiJob(project, inProject)
  await linkedCommand(t, project, inProject)
  // `run-bg top` finds the view beside the installed run-bg (off a terminal it refuses, naming why).
  const top = run('npx', ['run-bg', 'top'], inProject)
  assert.equal(top.status, 2, top.stderr)
  assert.match(top.stderr, /run-bg top: needs a terminal/)

  // The MCP server, its own package. Its dependencies (SDK, zod and theirs)
  // come from the npm cache the dev install filled, through a lockfile with
  // the versions and integrities of this repository's package-lock.json:
  // offline, npm can take a locked tarball from the cache by its integrity,
  // but cannot resolve a version range (the dev install cached no packuments).
  const mcpProject = path.join(work, 'mcp-project')
  fs.mkdirSync(mcpProject)
  writeLockedProject(mcpProject, [mcp, main, platform])
  const mcpInstall = run('npm', ['install', '--offline'], { cwd: mcpProject, env })
  if (mcpInstall.status !== 0 && /ENOTCACHED/.test(mcpInstall.stderr)) {
    t.skip(`MCP server not checked: the npm cache lacks a dependency of the MCP SDK (run \`npm install\` online once): ${mcpInstall.stderr.split('\n').find((l) => l.includes('request to'))}`)
    return
  }
  must(mcpInstall, 'npm install --offline (proc-manager-mcp)')
  t.diagnostic(`npm install --offline (proc-manager-mcp, proc-manager, ${platformPackage()}, SDK, zod): ${mcpInstall.seconds.toFixed(2)} s`)
  // Started by its bin from another directory, as an MCP client does.
  const transport = new StdioClientTransport({
    command: path.join(mcpProject, 'node_modules', '.bin', 'proc-manager-mcp'),
    cwd: fs.mkdtempSync(path.join(work, 'cwd-')),
    env: { ...env, PROC_MANAGER_HOME: home },
    stderr: 'pipe',
  })
  const client = new Client({ name: 'package-test', version: '1.0.0' })
  await client.connect(transport)
  t.after(() => client.close())
  const { tools } = await client.listTools()
  assert.ok(tools.some((tool) => tool.name === 'run_background'), `tools: ${tools.map((tool) => tool.name)}`)
  const answer = await client.callTool({ name: 'check_job', arguments: { jobId: id } })
  assert.ok(!answer.isError, JSON.stringify(answer))
  assert.match(answer.content[0].text, /success/)
})

test('without its platform package (npm install --omit=optional) the API and run-bg name the package and the command that installs it', { skip: skipReason }, async (t) => {
  const env = userEnv()
  const { work, main } = packAll(env)
  const project = emptyProject(work, 'omit-optional')
  must(run('npm', ['install', '--offline', '--omit=optional', main.tarball], { cwd: project, env }), 'npm install --omit=optional')
  assert.ok(!fs.existsSync(path.join(project, 'node_modules', platformPackage())))
  const fix = `npm install ${platformPackage()}@${JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version}`
  const api = run(process.execPath, ['-e', "require('proc-manager')"], { cwd: project, env })
  assert.notEqual(api.status, 0)
  assert.match(api.stderr, new RegExp(`the platform package ${platformPackage()} is not installed`))
  assert.ok(api.stderr.includes(fix), api.stderr)
  assert.doesNotMatch(api.stderr, /npm has a bug/)
  // The shim finds no run-bg and says what to install.
  for (const cli of [run('npx', ['--offline', 'run-bg', '--version'], { cwd: project, env }), run(path.join(project, 'node_modules', '.bin', 'run-bg'), ['--version'], { env })]) {
    assert.equal(cli.status, 1)
    assert.match(cli.stderr, new RegExp(`the platform package ${platformPackage()} is not installed`))
    assert.ok(cli.stderr.includes(fix), cli.stderr)
  }
})

// npm 12 runs no dependency's install script unless allowed; nothing here
// may need one. npm 12 itself comes from the npm cache (`npx -y npm@12
// --version` online once fills it); without it this test is skipped.
const npm12 = ['--offline', '-y', 'npm@12']
const npm12Missing = skipReason || (spawnSync('npx', [...npm12, '--version'], { encoding: 'utf8' }).stdout?.startsWith('12.')
  ? false : 'npm 12 is not in the npm cache (fetch it once online: npx -y npm@12 --version)')

test('with npm 12 the packed packages install offline and work without any install script', { skip: npm12Missing }, async (t) => {
  const env = userEnv()
  const { work, platform, main } = packAll(env)
  const project = emptyProject(work, 'npm12')
  const install = must(run('npx', [...npm12, 'install', '--offline', platform.tarball, main.tarball], { cwd: project, env }), 'npm 12 install --offline')
  t.diagnostic(`npm 12 install --offline (proc-manager + ${platformPackage()}), no cargo on PATH: ${install.seconds.toFixed(2)} s (includes starting npm 12 through npx)`)
  assert.doesNotMatch(install.stdout + install.stderr, /blocked|allowScripts/i)
  const { home } = makeHome(t)
  const inProject = { cwd: project, env: { ...env, PROC_MANAGER_HOME: home, npm_config_offline: 'true' } }
  readmeJob(inProject)
  apiJob(project, inProject)
})
