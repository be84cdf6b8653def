// The addon is a library inside someone else's Node process: what it has to
// warn about goes through `tracing` (shown when the host asks for
// diagnostics), never straight onto the host's stderr.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { makeHome, root, runBg, RUN_BG } from './helpers.mjs'

test('a corrupt jobs.json read through the addon is moved aside without writing to the host stderr', (t) => {
  const { home } = makeHome(t)
  fs.writeFileSync(path.join(home, 'jobs.json'), '{"version": 1, "jobs": [ {"id": "trunc')
  const script = `const pm = require(${JSON.stringify(root)}); process.stdout.write(JSON.stringify(pm.listJobs()))`
  const run = spawnSync(process.execPath, ['-e', script], {
    env: { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_LOG: '' },
    encoding: 'utf8',
    timeout: 60_000,
  })
  assert.equal(run.status, 0, run.stderr)
  assert.deepEqual(JSON.parse(run.stdout), [])
  // The warning's cause did happen: the file was moved aside ...
  assert.equal(fs.readdirSync(home).filter((n) => n.startsWith('jobs.json.corrupt-')).length, 1)
  // ... and the host's stderr stayed its own.
  assert.equal(run.stderr, '')

  // The CLI, whose stderr is the user's, still says it, in its own voice.
  fs.writeFileSync(path.join(home, 'jobs.json'), '{"version": 1, "jobs": [ {"id": "trunc')
  const list = runBg(home, ['list'])
  assert.equal(list.code, 0, list.stderr)
  assert.match(list.stderr, /^run-bg: warning: .*jobs\.json could not be read .*; moved it to .*jobs\.json\.corrupt-\d+/m)
})

test('a background helper that cannot start its own session says so instead of staying in the caller\'s', (t) => {
  const { home } = makeHome(t)
  // detached: the helper leads its own session already, so its setsid() fails (EPERM).
  const run = spawnSync(RUN_BG, ['__deliver'], {
    env: { ...process.env, PROC_MANAGER_HOME: home },
    detached: true,
    encoding: 'utf8',
    timeout: 60_000,
  })
  assert.equal(run.status, 1, `exit ${run.status}: ${run.stderr}`)
})
