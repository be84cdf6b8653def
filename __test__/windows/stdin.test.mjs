// `--stdin pipe` and `send` on Windows: the job reads what is sent through
// the named pipe its supervisor serves, `--eof` closes its stdin, and the
// answers when nothing reads are Linux's (__test__/restart.test.mjs).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'
import { skip, pm, freshHome, scratch, until, cli, startJob, checkJson, killAfter, nodeScript } from './helpers.mjs'

/** A node.exe job that echoes each line it reads as `got:<line>`, and `eof` at its stdin's end. */
const READER = `
const lines = require('node:readline').createInterface({ input: process.stdin })
lines.on('line', (l) => console.log('got:' + l))
lines.on('close', () => console.log('eof'))
`

/** Reads one line, says it, and exits 1 (a job `--restart` runs again). */
const ONE_LINE = `
require('node:readline').createInterface({ input: process.stdin }).once('line', (l) => { console.log('got:' + l); process.exit(1) })
`

const tail = (home, id) => checkJson(home, id).tail.map((l) => l.trimEnd())

test('run-bg send reaches a read in the job; --eof closes its stdin; a send after the end says nothing reads', { skip }, async (t) => {
  const home = freshHome()
  const job = startJob(home, nodeScript(scratch(t), 'reader.cjs', READER), ['--stdin', 'pipe'])
  killAfter(t, home, job)
  assert.equal(checkJson(home, job.jobId).stdin, 'pipe')
  const sent = cli(['send', job.jobId, 'hello world'], home)
  assert.equal(sent.status, 0, sent.stderr)
  assert.equal(sent.stdout, `sent 12 bytes to ${job.jobId}\n`)
  await until('the read line', () => tail(home, job.jobId).includes('got:hello world'))
  assert.equal(checkJson(home, job.jobId).status, 'running', 'stdin stays open between sends')
  assert.equal(cli(['send', job.jobId, '-y'], home).status, 0, 'a text starting with a dash')
  assert.equal(cli(['send', job.jobId, '--no-newline', 'tail'], home).status, 0)
  const closed = cli(['send', job.jobId, '--eof', '--json'], home)
  assert.equal(closed.status, 0, closed.stderr)
  assert.deepEqual(JSON.parse(closed.stdout), { jobId: job.jobId, bytes: 0, closed: true })
  assert.equal(cli(['wait', job.jobId, '--timeout', '30s'], home).status, 0)
  assert.deepEqual(tail(home, job.jobId), ['got:hello world', 'got:-y', 'got:tail', 'eof'])
  const late = cli(['send', job.jobId, 'more'], home)
  assert.equal(late.status, 1)
  assert.match(late.stderr, /has ended \(success\); nothing reads its stdin any more/)
})

test('sendInput from JS reaches the job; a job without --stdin pipe is refused', { skip }, async (t) => {
  const home = freshHome()
  const job = pm.runBackground(process.execPath, { args: [nodeScript(scratch(t), 'reader.cjs', READER)[1]], stdin: 'pipe' })
  killAfter(t, home, job)
  assert.deepEqual(await pm.sendInput(job.jobId, 'from-js'), { jobId: job.jobId, bytes: 8, closed: false })
  assert.deepEqual(await pm.sendInput(job.jobId, '', { newline: false, eof: true }), { jobId: job.jobId, bytes: 0, closed: true })
  const result = await pm.waitJob(job.jobId, { timeoutMs: 30000 })
  assert.equal(result.status, 'success')
  assert.deepEqual(tail(home, job.jobId), ['got:from-js', 'eof'])
  const plain = startJob(home, ['ping', '-n', '60', '127.0.0.1'])
  killAfter(t, home, plain)
  const refused = cli(['send', plain.jobId, 'y'], home)
  assert.equal(refused.status, 2)
  assert.match(refused.stderr, /was not started with `--stdin pipe`/)
})

test('send refuses too much at once, and says how much went in when the job does not read', { skip }, async (t) => {
  const home = freshHome()
  const job = startJob(home, ['ping', '-n', '60', '127.0.0.1'], ['--stdin', 'pipe'])
  killAfter(t, home, job)
  await assert.rejects(pm.sendInput(job.jobId, 'x'.repeat(2 * 1024 * 1024)), /too much input for one send \(2097153 bytes\); at most 1048576 bytes/)
  // More than the pipe holds (64 KiB), to a job that never reads: the rest
  // waits 5 s, then the send fails. (From JS: a Windows command line holds
  // at most 32,767 characters, too few for the CLI to carry it.)
  const started = Date.now()
  const full = await pm.sendInput(job.jobId, 'y'.repeat(100000)).then(() => null, (e) => e)
  const took = Date.now() - started
  assert.match(String(full?.message), new RegExp(`${job.jobId}: 65536 of 100001 bytes sent to its stdin: the job did not read its stdin for 5s \\(the pipe is full\\)`))
  assert.ok(took >= 4500, `it waited for the job to read (${took} ms)`)
  // Full, a send of one more byte waits and fails the same way, having put none in.
  const more = cli(['send', job.jobId, '--no-newline', 'z'], home)
  assert.equal(more.status, 1, more.stdout)
  assert.match(more.stderr, /: 0 of 1 bytes sent to its stdin: the job did not read its stdin for 5s \(the pipe is full\)/)
})

test('a restarted job keeps its stdin pipe: each run reads what is sent to it', { skip }, async (t) => {
  const home = freshHome({ notify: { url: null } })
  const job = startJob(home, nodeScript(scratch(t), 'one.cjs', ONE_LINE),
    ['--stdin', 'pipe', '--restart', 'on-failure', '--max-restarts', '1', '--restart-delay', '50ms'])
  killAfter(t, home, job)
  assert.equal(cli(['send', job.jobId, 'one'], home).status, 0)
  await until('the restart', () => checkJson(home, job.jobId).restarts === 1)
  assert.equal(cli(['send', job.jobId, 'two'], home).status, 0)
  assert.equal(cli(['wait', job.jobId, '--timeout', '30s'], home).status, 1)
  assert.deepEqual(tail(home, job.jobId), ['got:one', '--- run-bg: restart 1 after exit 1 (delay 50ms) ---', 'got:two'])
})

test('sends from many callers at once each arrive whole, one after another', { skip }, async (t) => {
  const home = freshHome()
  const job = startJob(home, nodeScript(scratch(t), 'reader.cjs', READER), ['--stdin', 'pipe'])
  killAfter(t, home, job)
  const lines = Array.from({ length: 12 }, (_, i) => `line-${i}-${'x'.repeat(2000)}`)
  await Promise.all(lines.map((line) => pm.sendInput(job.jobId, line)))
  const logged = () => cli(['logs', job.jobId], home).stdout.split(/\r?\n/).filter(Boolean)
  await until('every line read', () => logged().length === 12)
  assert.deepEqual(logged().sort(), lines.map((l) => `got:${l}`).sort())
  assert.equal(path.basename(checkJson(home, job.jobId).logPath), 'output.log')
})
