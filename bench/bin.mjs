// The `bin` group of bench/run.mjs (`--only=bin`).

import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import fs from 'node:fs'
import path from 'node:path'
import { PLAN, QUICK, ROOT, check, log, now, rotate, tempDir, writeConfig } from './kit.mjs'

// ------------------------------------------------ 3c. the installed command

/** `npm pack` of `dir` into `dest`: the tarball's path. */
export function npmPack(dir, dest) {
  const r = spawnSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dest], { cwd: dir, encoding: 'utf8', timeout: 180_000 })
  if (r.status !== 0) throw new Error(`npm pack in ${dir} exited ${r.status}: ${r.stderr}`)
  return path.join(dest, JSON.parse(r.stdout)[0].filename)
}

/**
 * What a user's `run-bg` costs: this checkout's root package and its platform
 * package (from the local build) packed and installed offline into an empty
 * project, as __test__/package.test.mjs does. Timed, interleaved: the linked
 * node_modules/.bin/run-bg (a link to bin/run-bg.js, the Node shim, as npm's
 * Windows wrappers need it), `node bin/run-bg.js` (the same shim, run by
 * node without the link and its #! line), and the platform package's run-bg
 * itself, for `--version` and `check <id>` of an ended job; and
 * `npx run-bg --version`, fewer times. (The sh launcher linked before, which
 * execed run-bg without Node, measured 1.47x and 1.22x of the native rows.)
 */
export async function benchBin() {
  const platform = createRequire(path.join(ROOT, 'package.json'))('./platform.js')
  const abi = platform.abi()
  const name = platform.platformPackage()
  const manifest = path.join(ROOT, 'npm', abi, 'package.json')
  const addon = path.join(ROOT, `proc-manager.${abi}.node`)
  if (!fs.existsSync(manifest) || !fs.existsSync(addon)) throw new Error(`bin: no platform package to pack for ${abi} (${manifest}, ${addon})`)
  const work = tempDir('bin')
  const stage = path.join(work, 'stage')
  fs.mkdirSync(path.join(stage, 'native'), { recursive: true })
  fs.copyFileSync(manifest, path.join(stage, 'package.json'))
  fs.copyFileSync(path.join(ROOT, 'LICENSE'), path.join(stage, 'LICENSE'))
  fs.copyFileSync(addon, path.join(stage, path.basename(addon)))
  fs.copyFileSync(path.join(ROOT, 'native', 'run-bg'), path.join(stage, 'native', 'run-bg'))
  const tarballs = path.join(work, 'tarballs')
  fs.mkdirSync(tarballs)
  const packs = [npmPack(stage, tarballs), npmPack(ROOT, tarballs)]
  const project = path.join(work, 'project')
  fs.mkdirSync(project)
  fs.writeFileSync(path.join(project, 'package.json'), '{"name":"consumer","version":"1.0.0","private":true}\n')
  const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }
  delete npmEnv.PROC_MANAGER_BINARY_PATH
  delete npmEnv.PROC_MANAGER_SUPERVISOR
  const install = spawnSync('npm', ['install', '--offline', ...packs], { cwd: project, env: npmEnv, encoding: 'utf8', timeout: 300_000 })
  if (install.status !== 0) throw new Error(`npm install --offline of the packed packages exited ${install.status}: ${install.stderr}`)

  const home = tempDir('bin-home')
  writeConfig(home)
  const env = { ...envFor(home), PATH: process.env.PATH }
  delete env.PROC_MANAGER_BINARY_PATH
  delete env.PROC_MANAGER_SUPERVISOR
  const native = path.join(project, 'node_modules', name, 'native', 'run-bg')
  const linked = path.join(project, 'node_modules', '.bin', 'run-bg')
  const shim = path.join(project, 'node_modules', 'proc-manager', 'bin', 'run-bg.js')
  const { jobId } = JSON.parse(spawnSync(native, ['--json', '--label', 'bin', '--', 'echo', 'hi'], { env, encoding: 'utf8' }).stdout)
  spawnSync(native, ['wait', jobId, '--timeout', '30s'], { env, stdio: 'ignore' })
  const variants = {
    native: [native, []],
    linked: [linked, []],
    shim: [process.execPath, [shim]],
  }
  const calls = { version: ['--version'], check: ['check', jobId] }
  const reps = QUICK ? 30 : 100
  log(`bin: packed install in ${project}; --version and check × ${reps} (+${PLAN.warmup} warm-up) per command, interleaved`)
  const out = {}
  for (const call of Object.keys(calls)) for (const v of Object.keys(variants)) out[`${call}.${v}`] = []
  const said = (cmd, pre) => spawnSync(cmd, [...pre, 'check', jobId], { env, encoding: 'utf8' }).stdout
  check('bin: the linked command and the Node shim print what run-bg prints', said(linked, []) === said(native, []) && said(process.execPath, [shim]) === said(native, []))
  for (let rep = -PLAN.warmup; rep < reps; rep++) {
    for (const [call, args] of rotate(Object.entries(calls), rep)) {
      for (const [v, [cmd, pre]] of rotate(Object.entries(variants), rep)) {
        const t0 = now()
        const r = spawnSync(cmd, [...pre, ...args], { env, cwd: project, stdio: 'ignore' })
        const ms = now() - t0
        if (r.status !== 0) throw new Error(`bin: ${v} ${args.join(' ')} exited ${r.status ?? r.signal}`)
        if (rep >= 0) out[`${call}.${v}`].push(ms)
      }
    }
  }
  out.npx = []
  for (let rep = 0; rep < (QUICK ? 5 : 15); rep++) {
    const t0 = now()
    const r = spawnSync('npx', ['--offline', 'run-bg', '--version'], { env: { ...npmEnv, ...env }, cwd: project, stdio: 'ignore' })
    if (r.status !== 0) throw new Error(`bin: npx run-bg --version exited ${r.status ?? r.signal}`)
    out.npx.push(now() - t0)
  }
  return out
}
