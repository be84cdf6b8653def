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

/** [parent, process group, session] of a process, from its /proc/<pid>/stat text. */
function ids(stat) {
  const [, ppid, pgrp, session] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  return { ppid, pgrp, session }
}

// The supervisor makes its own session after launching the job (setsid then
// no longer delays the job's start), but before its answer: whatever the
// caller or its terminal does to the caller's group or session once the
// start has returned never reaches the supervisor.
test('when a start returns, its supervisor and its job each lead a session of their own (CLI and Node host)', { skip: process.platform !== 'linux' && 'reads /proc' }, (t) => {
  const { home } = makeHome(t)
  // Read at once, in the process that started the job: the CLI's caller, and the Node host itself.
  const probe = `
    const fs = require('node:fs')
    const { spawnSync } = require('node:child_process')
    const pm = require(${JSON.stringify(root)})
    const stat = (pid) => fs.readFileSync('/proc/' + pid + '/stat', 'utf8')
    const parent = (raw) => Number(raw.slice(raw.lastIndexOf(')') + 2).split(' ')[1])
    const out = []
    const look = (via, pid) => { const job = stat(pid); const supervisor = parent(job); out.push({ via, pid, job, supervisor, supervisorStat: stat(supervisor) }) }
    for (let i = 0; i < 5; i++) {
      const r = spawnSync(${JSON.stringify(RUN_BG)}, ['--json', '--', 'sleep', '30'], { encoding: 'utf8' })
      look('cli', JSON.parse(r.stdout).pid)
      look('host', pm.runBackground('sleep 30').pid)
    }
    console.log(JSON.stringify({ session: Number(stat(process.pid).slice(stat(process.pid).lastIndexOf(')') + 2).split(' ')[3]), out }))`
  const r = spawnSync(process.execPath, ['-e', probe], { env: { ...process.env, PROC_MANAGER_HOME: home }, encoding: 'utf8', timeout: 60_000 })
  assert.equal(r.status, 0, r.stderr)
  const { session: callers, out } = JSON.parse(r.stdout)
  assert.equal(out.length, 10)
  for (const o of out) {
    const job = ids(o.job)
    const supervisor = ids(o.supervisorStat)
    const said = JSON.stringify({ via: o.via, job: o.pid, ...job, supervisor: o.supervisor, supervisorGroup: supervisor.pgrp, supervisorSession: supervisor.session })
    assert.equal(job.pgrp, o.pid, `the job leads its group: ${said}`)
    assert.equal(job.session, o.pid, `the job leads its session: ${said}`)
    assert.equal(supervisor.pgrp, o.supervisor, `the supervisor leads its group: ${said}`)
    assert.equal(supervisor.session, o.supervisor, `the supervisor leads its session: ${said}`)
    assert.notEqual(supervisor.session, callers, said)
  }
})
