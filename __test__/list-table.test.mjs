// `run-bg list` for people: on a terminal (a pty from `script`, its width
// set with `stty cols`), an aligned table with CPU, memory, ports and the last
// line, fitted to the width, coloured unless NO_COLOR; off a terminal the
// compact lines agents read, unchanged; --json unchanged on both.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { makeHome, runBg, startJob, waitFor, RUN_BG } from './helpers.mjs'

const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0
const skip = process.platform !== 'linux' ? 'the table is checked on Linux (a pty from util-linux `script`)' : !hasScript ? 'util-linux `script` is not installed: no pty to run list on' : false

const q = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`

/** `run-bg <args>` on a pty `columns` wide: what it printed, \r removed. */
function onTerminal(home, args, columns, env = {}) {
  const command = `stty cols ${columns} rows 50; exec ${q(RUN_BG)} ${args.map(q).join(' ')}`
  const r = spawnSync('script', ['-qfec', command, '/dev/null'], {
    env: { ...process.env, NO_COLOR: '', ...env, PROC_MANAGER_HOME: home },
    encoding: 'utf8',
    timeout: 30_000,
  })
  if (r.error) throw r.error
  assert.equal(r.status, 0, r.stdout + r.stderr)
  return r.stdout.replace(/\r/g, '')
}

const stripColour = (text) => text.replace(/\x1b\[[0-9;]*m/g, '')
const lines = (text) => text.split('\n').filter((l) => l.length > 0)

/** A web server on a port of its own, printing a line a second; a busy loop; a job that failed. */
async function threeJobs(home) {
  const server =
    "const s=require('http').createServer((q,r)=>r.end('ok')).listen(0,'127.0.0.1',()=>{console.log('listening on '+s.address().port);setInterval(()=>console.log('tick '+Date.now()),1000)})"
  const web = startJob(home, [process.execPath, '-e', server], ['--label', 'web'])
  const busy = startJob(home, ['sh', '-c', 'while :; do :; done'], ['--label', 'busy'])
  const failed = startJob(home, ['sh', '-c', 'echo it broke; exit 3'], ['--label', 'broken'])
  const port = await waitFor(() => runBg(home, ['logs', web.jobId]).stdout.match(/listening on (\d+)/)?.[1], { what: 'the server to listen' })
  runBg(home, ['wait', failed.jobId])
  return { web, busy, failed, port }
}

test('off a terminal, list prints the compact lines agents read, and --json the same array', { skip }, async (t) => {
  const { home } = makeHome(t)
  const { web, busy, failed } = await threeJobs(home)
  const out = runBg(home, ['list'])
  assert.equal(out.code, 0, out.stderr)
  assert.doesNotMatch(out.stdout, /\x1b|CPU%|LAST LINE/)
  const shown = lines(out.stdout)
  assert.equal(shown.length, 3, out.stdout)
  assert.match(shown.find((l) => l.startsWith(web.jobId)), new RegExp(`^${web.jobId}  running for \\S+  \\S*node -e 'const s=`))
  assert.match(shown.find((l) => l.startsWith(busy.jobId)), new RegExp(`^${busy.jobId}  running for \\S+  sh -c 'while :; do :; done'$`))
  assert.match(shown.find((l) => l.startsWith(failed.jobId)), new RegExp(`^${failed.jobId}  failed \\(exit 3\\) after \\S+  sh -c 'echo it broke; exit 3'$`))
  const piped = JSON.parse(runBg(home, ['list', '--json']).stdout)
  const onPty = JSON.parse(stripColour(onTerminal(home, ['list', '--json'], 80)))
  assert.deepEqual(onPty.map((j) => j.jobId).sort(), piped.map((j) => j.jobId).sort())
  assert.deepEqual(Object.keys(onPty[0]).sort(), Object.keys(piped[0]).sort())
})

test('on a terminal, list is a table fitted to 200, 120, 90 and 60 columns, coloured unless NO_COLOR', { skip }, async (t) => {
  const { home } = makeHome(t)
  const { web, busy, failed, port } = await threeJobs(home)
  // The busy loop has used some CPU: its lifetime average is above zero.
  await waitFor(() => Number(stripColour(onTerminal(home, ['list'], 200)).match(new RegExp(`${busy.jobId} .*? (\\d+\\.\\d)  `))?.[1]) >= 1, {
    what: 'the busy job to show CPU',
  })
  for (const columns of [200, 120, 90, 60]) {
    const text = onTerminal(home, ['list'], columns)
    const shown = lines(stripColour(text))
    assert.equal(shown.length, 4, `${columns}: a header and three jobs:\n${text}`)
    for (const line of shown) assert.ok([...line].length <= columns, `${columns} columns: ${[...line].length}: ${line}`)
    const [header] = shown
    assert.match(header, columns > 60 ? /^ID +LABEL +STATUS +RUNTIME +CPU% +MEM +RESTARTS +PORTS/ : /^ID +LABEL +STATUS +RUNTIME +CPU% +MEM +PORTS/)
    // Each column starts where its header does.
    const at = (name) => header.indexOf(name)
    const row = (job) => shown.find((l) => l.startsWith(job.jobId))
    for (const job of [web, busy]) assert.equal(row(job).indexOf('running'), at('STATUS'), `${columns}: ${row(job)}`)
    assert.equal(row(failed).indexOf('failed'), at('STATUS'))
    assert.match(row(web).slice(at('PORTS')), new RegExp(`^${port}\\b`), `${columns}: the server's port: ${row(web)}`)
    assert.match(row(web).slice(at('LABEL')), /^web /)
    assert.match(row(web).slice(at('MEM')), /^ *\d+(\.\d)?[KMG] /, `${columns}: its memory: ${row(web)}`)
    assert.match(row(failed).slice(at('CPU%')), /^ *- +- /, 'an ended job has no CPU or memory')
    if (columns >= 120) {
      assert.match(header, /COMMAND +LAST LINE$/)
      assert.match(row(web).slice(at('LAST LINE')), /^(tick \d|listen)/, `${columns}: ${row(web)}`)
      assert.match(row(failed).slice(at('LAST LINE')), /^it broke$/)
    } else {
      assert.doesNotMatch(header, /LAST LINE/, `${columns}: the last line goes first`)
    }
    if (columns <= 60) assert.doesNotMatch(header, /COMMAND|RESTARTS/, 'then the command, then restarts')
    assert.match(text, /\x1b\[32mrunning/, 'running in green')
    assert.match(text, /\x1b\[31mfailed/, 'failed in red')
  }
  const plain = onTerminal(home, ['list'], 120, { NO_COLOR: '1' })
  assert.doesNotMatch(plain, /\x1b/, 'NO_COLOR: no escape at all')
  assert.match(plain, /^ID +LABEL +STATUS/)
})
