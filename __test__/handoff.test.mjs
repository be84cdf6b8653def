// A supervisor that dies before reading its job spec (a binary that cannot
// run here, a wrong PROC_MANAGER_BINARY_PATH): the start fails with a clear
// error and the job is recorded failed with the reason; neither the CLI nor
// the Node host dies of SIGPIPE while handing the spec over.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { makeHome, runBg, root, RUN_BG, readRegistry } from './helpers.mjs'

/** Bigger than a pipe's buffer (64 KiB): the hand-off write blocks until the reader is gone, then fails. */
const bigSpec = () => ['--env', `BIG=${'x'.repeat(60_000)}`, '--context', JSON.stringify('y'.repeat(30_000))]

/** run-bg's ELF interpreter (the dynamic loader), if it has one. */
function loaderOf(binary) {
  const match = fs.readFileSync(binary).subarray(0, 4096).toString('latin1').match(/\/[\w/.-]*\/ld-[\w.-]+\.so\.\d/)
  return match && fs.existsSync(match[0]) ? match[0] : null
}

test('the CLI whose supervisor exits before reading the spec fails the start with an error, not SIGPIPE', (t) => {
  const loader = loaderOf(RUN_BG)
  if (!loader) return t.skip('run-bg has no dynamic loader (static build)')
  const { home } = makeHome(t)
  // Started through its loader, run-bg's own executable (its supervisor) is
  // the loader, which exits at once on `__supervise` without reading stdin.
  const r = spawnSync(loader, [RUN_BG, ...bigSpec(), '--', 'sleep', '30'], {
    env: { ...process.env, PROC_MANAGER_HOME: home }, encoding: 'utf8', timeout: 30_000,
  })
  assert.equal(r.signal, null, `run-bg died of ${r.signal}; stderr: ${r.stderr}`)
  assert.equal(r.status, 1, r.stderr)
  assert.match(r.stderr, /^run-bg: cannot hand the job to the supervisor: it exited before reading the job \(exit status: 127\); .* \(recorded as failed job (\S+)\)\n$/)
  const id = r.stderr.match(/failed job (\S+)\)/)[1]
  const job = readRegistry(home).find((j) => j.id === id)
  assert.equal(job?.status, 'failed', JSON.stringify(job))
  assert.match(job.error, /supervisor/)
  assert.match(runBg(home, ['check', id]).stdout, new RegExp(`^${id}: failed \\(could not start\\)`))
})

test('the Node host whose supervisor exits before reading the spec gets an Error and lives on', (t) => {
  const { home } = makeHome(t)
  const script = path.join(home, 'exits-at-once')
  fs.writeFileSync(script, '#!/bin/sh\nexit 0\n', { mode: 0o755 })
  const program = `
    const pm = require(${JSON.stringify(root)})
    for (const env of [{}, { BIG: 'x'.repeat(60000) }]) {
      try {
        pm.runBackground('sleep 30', { env, context: 'y'.repeat(30000) })
        console.log('started')
      } catch (e) {
        console.log('error: ' + e.message)
      }
    }
    console.log('alive')`
  const r = spawnSync(process.execPath, ['-e', program], {
    env: { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_BINARY_PATH: script }, encoding: 'utf8', timeout: 30_000,
  })
  assert.equal(r.signal, null, r.stderr)
  const lines = r.stdout.trim().split('\n')
  assert.equal(lines.length, 3, r.stdout + r.stderr)
  // Both say how it went: a request that fits the pipe is in it before the
  // spawn (no write to fail), and is found unread there.
  for (const line of lines.slice(0, 2)) {
    assert.match(line, /^error: cannot hand the job to the supervisor: it exited before reading the job \(exit status: 0\); .*\(recorded as failed job \S+\)$/)
  }
  assert.equal(lines[2], 'alive')
  const jobs = readRegistry(home)
  assert.equal(jobs.length, 2)
  for (const job of jobs) {
    assert.equal(job.status, 'failed')
    assert.match(job.error, /supervisor/)
  }
})
