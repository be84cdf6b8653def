// The views on Windows: `logs --all --follow` and `logs --all` against real
// jobs writing at their own pace (as __test__/logs-all.test.mjs on Linux),
// the `list` table, and `top`'s answer off a console. The full-screen `top`
// itself is not driven here: that needs a console wine cannot give a
// program whose output a test reads (see docs/architecture.md#windows).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { skip, freshHome, scratch, until, cli, startJob, killAfter, endAll, nodeScript, runBg } from './helpers.mjs'

/** A node.exe writer: `<tag> start`, then once `gate` exists `<tag> 1` … `<tag> <n>`, a pause every `every` lines. */
const WRITER = `
const fs = require('node:fs')
const [tag, n, gate, every] = process.argv.slice(2)
console.log(tag + ' start')
const wait = setInterval(() => {
  if (!fs.existsSync(gate)) return
  clearInterval(wait)
  let i = 1
  const burst = () => {
    for (let k = 0; k < Number(every) && i <= Number(n); k++, i++) process.stdout.write(tag + ' ' + i + '\\n')
    if (i <= Number(n)) setTimeout(burst, 20)
  }
  burst()
}, 20)
`

/** `run-bg logs --all --follow` running, its stdout collected as it comes. */
function follower(t, home) {
  const child = spawn(runBg, ['logs', '--all', '--follow'], { env: { ...process.env, PROC_MANAGER_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] })
  const got = { out: '', err: '' }
  child.stdout.setEncoding('utf8').on('data', (d) => (got.out += d))
  child.stderr.setEncoding('utf8').on('data', (d) => (got.err += d))
  t.after(() => endAll([child.pid]))
  // Complete lines only: the last piece may still be on its way.
  const lines = () => got.out.split(/\r?\n/).slice(0, -1)
  return { child, got, lines }
}

/** Each job's lines (after its name), in the order they came. */
function byName(lines) {
  const seen = new Map()
  for (const line of lines) {
    const m = /^(\S+) *\| (.*)$/.exec(line)
    assert.ok(m, `a prefixed line: ${JSON.stringify(line)}`)
    if (!seen.has(m[1])) seen.set(m[1], [])
    seen.get(m[1]).push(m[2].trimEnd())
  }
  return seen
}

const numbered = (tag, n) => [`${tag} start`, ...Array.from({ length: n }, (_, i) => `${tag} ${i + 1}`)]
const ended = (texts = []) => texts.filter((l) => l.startsWith('[ended: '))
const output = (texts = []) => texts.filter((l) => !l.startsWith('[ended: '))

test('logs --all --follow: two writers at different rates and one that starts later, every line once, with its label, in order', { skip }, async (t) => {
  const home = freshHome()
  const dir = scratch(t)
  const gate = path.join(dir, 'gate')
  const writer = (tag, n, every) => nodeScript(dir, 'writer.cjs', WRITER, [tag, String(n), gate, String(every)])
  const db = startJob(home, writer('db', 300, 30), ['--label', 'db'])
  killAfter(t, home, db)
  await until('db to write first', () => cli(['logs', '--all'], home).stdout.includes('db start'))
  const web = startJob(home, writer('web', 150, 5), ['--label', 'web'])
  killAfter(t, home, web)
  const f = follower(t, home)
  await until('the tails of the jobs already running', () => f.lines().some((l) => /\| web start/.test(l)) && f.lines().some((l) => /\| db start/.test(l)))
  fs.writeFileSync(gate, '')
  const late = startJob(home, writer('late', 200, 10), ['--label', 'late-worker'])
  killAfter(t, home, late)
  await until(`every job to end in the stream (so far: ${f.got.out.slice(-300)})`, () => {
    const got = byName(f.lines())
    return ['db', 'web', 'late-worker'].every((name) => ended(got.get(name)).length === 1)
  }, 60000)
  const got = byName(f.lines())
  assert.deepEqual([...got.keys()].sort(), ['db', 'late-worker', 'web'], 'each job under its label, nothing else')
  assert.deepEqual(output(got.get('web')), numbered('web', 150), 'web: every line once, in order')
  assert.deepEqual(output(got.get('db')), numbered('db', 300))
  assert.deepEqual(output(got.get('late-worker')), numbered('late', 200), 'the job started after the follow began joined from its first line')
  for (const name of ['web', 'db', 'late-worker']) {
    assert.match(ended(got.get(name))[0], /^\[ended: success \(exit 0\) after \S+\]$/, `${name} leaves the stream with its end`)
    assert.equal(got.get(name).at(-1), ended(got.get(name))[0], 'the end comes after its last line')
  }
  assert.equal(f.got.out.includes('\x1b'), false, 'off a console: no escape codes')
  assert.equal(f.child.exitCode, null, 'it goes on following (new jobs may come)')
  assert.equal(f.got.err, '')
})

test('logs --all: the last lines of each job, labelled; -n sets how many', { skip }, async (t) => {
  const home = freshHome()
  for (const label of ['alpha', 'beta']) {
    const job = startJob(home, ['cmd', '/c', `for /L %i in (1,1,5) do @echo ${label} %i`], ['--label', label])
    killAfter(t, home, job)
    assert.equal(cli(['wait', job.jobId, '--timeout', '30s'], home).status, 0)
  }
  const all = cli(['logs', '--all'], home)
  assert.equal(all.status, 0, all.stderr)
  const got = byName(all.stdout.split(/\r?\n/).filter(Boolean))
  assert.deepEqual(got.get('alpha'), ['alpha 1', 'alpha 2', 'alpha 3', 'alpha 4', 'alpha 5'])
  assert.deepEqual(got.get('beta'), ['beta 1', 'beta 2', 'beta 3', 'beta 4', 'beta 5'])
  const two = byName(cli(['logs', '--all', '-n', '2'], home).stdout.split(/\r?\n/).filter(Boolean))
  assert.deepEqual(two.get('alpha'), ['alpha 4', 'alpha 5'])
})

test('the list table shows each job with its status; top off a console refuses and says what to use instead', { skip }, async (t) => {
  const home = freshHome()
  const running = startJob(home, ['ping', '-n', '60', '127.0.0.1'], ['--label', 'stays'])
  killAfter(t, home, running)
  const done = startJob(home, ['cmd', '/c', 'exit 3'], ['--label', 'fails'])
  assert.equal(cli(['wait', done.jobId, '--timeout', '30s'], home).status, 3, 'wait exits with the job\'s code')
  const table = cli(['list', '--all'], home)
  assert.equal(table.status, 0, table.stderr)
  const rows = table.stdout.split(/\r?\n/)
  assert.match(rows.find((r) => r.startsWith(running.jobId)) ?? '', /running/)
  assert.match(rows.find((r) => r.startsWith(done.jobId)) ?? '', /failed/)
  const top = cli(['top'], home, { timeout: 20000 })
  assert.equal(top.status, 2, top.stderr)
  assert.match(top.stderr, /needs a terminal.*run-bg list --json/)
})
