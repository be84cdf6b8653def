// The packed packages on Windows: scripts/test-windows.sh packs proc-manager
// and proc-manager-win32-x64-gnu, installs both into an empty project with
// npm (offline, --os=win32 --cpu=x64), and points PM_PACKED_PROJECT at it;
// this runs the README's job from there with node.exe under wine, through
// the JS API and through the Node shim of run-bg. Skipped elsewhere, and
// when no packed project was made.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'

const project = process.env.PM_PACKED_PROJECT
const skip = (process.platform !== 'win32' && 'Windows only (scripts/test-windows.sh runs it under wine)') ||
  (!project && 'no packed project (PM_PACKED_PROJECT): scripts/test-windows.sh makes one')

test('the installed packages run the README\'s job (JS API and run-bg)', { skip }, async () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-packed-'))
  process.env.PROC_MANAGER_HOME = home
  const pm = createRequire(path.join(project, 'package.json'))('proc-manager')
  assert.equal(typeof pm.runBackground, 'function')
  const job = pm.runBackground('echo hi & ping -n 3 127.0.0.1 >nul', { label: 'demo' })
  const done = await pm.waitJob(job.jobId, { timeoutMs: 30000 })
  assert.equal(done.status, 'success')
  assert.match(pm.readLog(job.jobId).lines.join('\n'), /hi/)
  // Where the addon came from: the platform package, not a checkout.
  const installed = path.join(project, 'node_modules', 'proc-manager-win32-x64-gnu', 'native', 'run-bg.exe')
  assert.ok(fs.existsSync(installed), installed)
  const shim = path.join(project, 'node_modules', 'proc-manager', 'bin', 'run-bg.js')
  const env = { ...process.env, PROC_MANAGER_HOME: home }
  const started = spawnSync(process.execPath, [shim, '--label', 'demo', '--', 'cmd', '/c', 'echo hi'], { encoding: 'utf8', env })
  assert.equal(started.status, 0, started.stderr)
  const id = /started (\S+)/.exec(started.stdout)?.[1]
  assert.ok(id, started.stdout)
  const waited = spawnSync(process.execPath, [shim, 'wait', id], { encoding: 'utf8', env })
  assert.equal(waited.status, 0, waited.stdout + waited.stderr)
  assert.match(waited.stdout, /success \(exit 0\)/)
})
