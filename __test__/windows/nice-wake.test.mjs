// `--nice` on Windows (a priority class for the job's main process and
// every process that joins its Job Object, read back with Node's
// os.getPriority) and `--wake` (its rule registered with a real HTTP
// listener on 127.0.0.1, the interrupt service's test double).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { skip, pm, freshHome, scratch, until, cli, startJob, checkJson, jobRecord, descendants, killAfter, nodeScript } from './helpers.mjs'
import { startInterruptService } from '../fixtures/interrupt-service.mjs'

/** A node.exe job that starts a ping (a child in its Job Object) and waits. */
const PARENT = `
require('node:child_process').spawn('ping', ['-n', '120', '127.0.0.1'], { stdio: 'ignore' })
setInterval(() => {}, 1000)
`

const priority = (pid) => {
  try {
    return os.getPriority(pid)
  } catch {
    return null
  }
}

// What Node reads back for each class: IDLE 19, BELOW_NORMAL 10, NORMAL 0,
// ABOVE_NORMAL -7, HIGH -14 (docs/cli.md, "--nice on Windows").
for (const [nice, reads] of [[19, 19], [5, 10], [-5, -7], [-20, -14]]) {
  test(`--nice ${nice}: the main process and the child it starts run at the class Node reads as ${reads}`, { skip }, async (t) => {
    const home = freshHome()
    const job = startJob(home, nodeScript(scratch(t), 'parent.cjs', PARENT), ['--nice', String(nice)])
    killAfter(t, home, job)
    assert.equal(priority(job.pid), reads, 'the main process, from its first instruction')
    const child = await until('the ping started', () => descendants(job.pid).find((p) => /ping/i.test(p.command)))
    await until(`the ping at ${reads}`, () => priority(child.pid) === reads)
    assert.equal(jobRecord(home, job.jobId).nice, nice)
  })
}

test('runBackground({nice}) takes it too; a niceness out of -20..19 is refused before anything starts', { skip }, async (t) => {
  const home = freshHome()
  const job = pm.runBackground('ping -n 60 127.0.0.1', { nice: 10 })
  killAfter(t, home, job)
  assert.equal(priority(job.pid), 10)
  const out = cli(['--nice', '20', '--', 'cmd', '/c', 'echo x'], home)
  assert.equal(out.status, 2)
  assert.match(out.stderr, /-20/)
  assert.equal(JSON.parse(cli(['list', '--all', '--json'], home).stdout).length, 1, 'nothing started for the refused one')
})

/**
 * The double's own view of what it got (`GET /__inspect`), read with
 * node:http: Node's fetch (undici) fails under wine 8 ("fetch failed", cause "connect UNKNOWN").
 */
async function inspect(service) {
  const http = await import('node:http')
  return new Promise((resolve, reject) => {
    http.get(`${service.base}/__inspect`, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (d) => (body += d)).on('end', () => resolve(JSON.parse(body)))
    }).on('error', reject)
  })
}

// Batches go out quickly; the rate limits stay the service's.
const FAST = { message: { batch_window_ms: 100 }, subagent: { batch_window_ms: 100 } }

test('--wake registers a one-off rule with the service as the job starts; the end event fires it and the service removes it', { skip }, async (t) => {
  const service = await startInterruptService(t, FAST)
  const home = freshHome({ notify: { url: service.url, batch_window_ms: 100 } })
  const dir = scratch(t)
  const go = path.join(dir, 'go')
  const argv = nodeScript(dir, 'gate.cjs', `
const fs = require('node:fs')
const wait = setInterval(() => { if (fs.existsSync(${JSON.stringify(go)})) { clearInterval(wait); process.exit(4) } }, 20)
`)
  const started = cli(['--wake', 'job {{jobId}} {{status}}: {{outcome}}', '--wake-instruction', 'tell the user', '--json', '--', ...argv], home)
  assert.equal(started.status, 0, started.stderr)
  assert.equal(started.stderr, '', 'no warning for known keys')
  const { jobId, pid } = JSON.parse(started.stdout)
  killAfter(t, home, { jobId, pid })
  const rule = await until('the wake rule at the service while the job runs', async () => (await inspect(service)).rules.find((r) => r.id === `run-bg-${jobId}`))
  assert.deepEqual(rule, {
    enabled: true, id: `run-bg-${jobId}`, label: `run-bg wake for ${jobId}`, source: 'run-bg', condition: { jobId },
    action: 'message', one_off: true, message: 'job {{jobId}} {{status}}: {{outcome}}', instruction: 'tell the user',
  })
  await until('registered recorded', () => jobRecord(home, jobId).wake?.state === 'registered')
  assert.equal(checkJson(home, jobId).status, 'running')
  assert.match(cli(['check', jobId], home).stdout, new RegExp(`\\n  wake: registered run-bg-${jobId}\\r?\\n`))

  fs.writeFileSync(go, '')
  const delivered = async () => (await inspect(service)).dispatched.flatMap((batch) => batch.items)
  const got = await until('the wake-up', async () => (await delivered()).find((d) => d.data.jobId === jobId), 30000)
  assert.equal(got.text, `job ${jobId} failed: exit 4`)
  assert.equal(got.instruction, 'tell the user')
  await until('the rule recorded fired', () => jobRecord(home, jobId).wake?.state === 'fired', 30000)
  assert.equal((await inspect(service)).rules.length, 0, 'the service removed its one-off rule after the dispatch')
})

test('--wake with nothing listening: the job runs and ends all the same, the rule recorded as failed', { skip }, async (t) => {
  const net = await import('node:net')
  const server = net.createServer()
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address()
  await new Promise((r) => server.close(r))
  const home = freshHome({ notify: { url: `http://127.0.0.1:${port}/trigger`, timeout_ms: 2000 } })
  const job = startJob(home, ['cmd', '/c', 'exit 0'], ['--wake', 'done {{jobId}}'])
  killAfter(t, home, job)
  assert.equal(cli(['wait', job.jobId, '--timeout', '30s'], home).status, 0)
  const wake = await until('the wake recorded', () => {
    const w = jobRecord(home, job.jobId).wake
    return w && w.state !== 'pending' && w
  })
  assert.equal(wake.state, 'failed')
  assert.match(wake.reason, /connect|refused|listen/i)
})
