// The `notify` group of bench/run.mjs (`--only=notify`).

import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { isAlive } from './kill.mjs'
import { PLAN, check, killChild, log, now, q, readJobs, removeDir, rotate, runBg, sleep, spawnChild, startJson, tempDir, writeConfig } from './kit.mjs'

// --------------------------------------------------------- 6. notification latency

/** An HTTP listener in a child process; it appends `{at: Date.now(), url, body}` per request and answers `status`. */
export async function startListener({ status = 200 } = {}) {
  const dir = tempDir('listener')
  const record = path.join(dir, 'requests.jsonl')
  const script = `
    const http = require('node:http'), fs = require('node:fs')
    const server = http.createServer((req, res) => {
      let body = ''
      req.on('data', (d) => (body += d))
      req.on('end', () => {
        fs.appendFileSync(${JSON.stringify(record)}, JSON.stringify({ at: Date.now(), url: req.url, body }) + '\\n')
        res.statusCode = ${status}
        res.end(${status} === 200 ? 'ok' : '{"error":"busy"}')
      })
    })
    server.listen(0, '127.0.0.1', () => console.log(server.address().port))
  `
  const child = spawnChild(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(Number(String(d).trim())))
    child.exited.then(({ code }) => reject(new Error(`listener exited ${code}`)))
  })
  const requests = () => {
    try {
      return fs.readFileSync(record, 'utf8').split('\n').filter(Boolean).map((l) => {
        const r = JSON.parse(l)
        return { ...r, json: JSON.parse(r.body) }
      })
    } catch {
      return []
    }
  }
  return { url: `http://127.0.0.1:${port}/trigger`, port, child, dir, requests }
}

export async function waitForRequest(listener, jobId, timeoutMs = 10_000) {
  const deadline = now() + timeoutMs
  for (;;) {
    const hit = listener.requests().find((r) => r.json?.data?.jobId === jobId)
    if (hit) return hit
    if (now() > deadline) throw new Error(`no request for ${jobId} within ${timeoutMs} ms`)
    await sleep(5)
  }
}

export function postJson(url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume()
      res.on('end', resolve)
    })
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}

export const readMark = (file) => Number(fs.readFileSync(file, 'utf8').trim())
export const JOB_WITH_MARK = (mark) => `sleep 0.2; date +%s%3N > ${q(mark)}`

export async function benchNotify() {
  log(`notification latency: ${PLAN.notifyReps} reps (+${PLAN.warmup} warm-up) × 2 variants`)
  const listener = await startListener()
  const samples = { ours: [], oursEndedAt: [], endedAtAfterMark: [], baseline: [] }
  const ids = []
  const variants = {
    async ours() {
      const home = tempDir('notify')
      writeConfig(home, { notify: { url: listener.url } })
      const mark = path.join(home, 'MARK')
      try {
        const { jobId } = startJson(home, ['sh', '-c', JOB_WITH_MARK(mark)], 'n')
        ids.push(jobId)
        const request = await waitForRequest(listener, jobId)
        const checked = JSON.parse(runBg(home, ['check', jobId, '--json']).stdout)
        const job = readJobs(home).find((j) => j.id === jobId)
        // The supervisor leaves once the notification is recorded as delivered: let it, before its home goes.
        const deadline = now() + 5000
        while (job?.supervisor && isAlive(job.supervisor.pid, String(job.supervisor.start_ticks)) && now() < deadline) await sleep(5)
        check(`notify ${jobId}: success announced, endedAt recorded`, request.json.data.status === 'success' && checked.endedAt > 0, `${request.json.data.status} ${checked.endedAt}`)
        const markAt = readMark(mark)
        return { latency: request.at - markAt, fromEndedAt: request.at - checked.endedAt, endedAtAfterMark: checked.endedAt - markAt }
      } finally {
        removeDir(home)
      }
    },
    async baseline() {
      const dir = tempDir('notify-base')
      const mark = path.join(dir, 'MARK')
      try {
        const child = spawnChild('sh', ['-c', JOB_WITH_MARK(mark)], { stdio: 'ignore' })
        await child.exited
        const token = `base-${path.basename(dir)}`
        await postJson(listener.url, { source: 'bench', data: { jobId: token } })
        const request = await waitForRequest(listener, token)
        return { latency: request.at - readMark(mark) }
      } finally {
        removeDir(dir)
      }
    },
  }
  try {
    for (let rep = -PLAN.warmup; rep < PLAN.notifyReps; rep++) {
      for (const name of rotate(Object.keys(variants), rep)) {
        const r = await variants[name]()
        if (rep < 0) continue
        samples[name].push(r.latency)
        if (name === 'ours') {
          samples.oursEndedAt.push(r.fromEndedAt)
          samples.endedAtAfterMark.push(r.endedAtAfterMark)
        }
      }
    }
    await sleep(300) // a duplicate would show up by now
    const counts = ids.map((id) => listener.requests().filter((r) => r.json?.data?.jobId === id).length)
    check('notify: each job announced exactly once', counts.every((c) => c === 1), JSON.stringify(counts))
  } finally {
    await killChild(listener.child)
    removeDir(listener.dir)
  }
  return samples
}
