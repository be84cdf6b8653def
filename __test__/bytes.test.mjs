// Issue 25, item 2: Unix arguments, paths and environment values are bytes,
// not necessarily UTF-8. run-bg passes them to the job exactly, keeps them in
// its records, shows them written out (`caf\xe9`), and refuses a byte that is
// no UTF-8 only where text is required (a label, an owner, an id), with exit
// 2 and a message, never a panic.
//
// Node can pass only strings as arguments, so run-bg is called through bash,
// whose $'\xe9' makes the raw byte.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { RUN_BG, makeHome, checkJson, runBg, waitFor } from './helpers.mjs'

/** `bash -c <script>` with run-bg as "$RB" and `home` (when given); stdout and stderr as text. */
function bash(home, script, cwd) {
  const r = spawnSync('bash', ['-c', script], {
    env: { ...process.env, ...(home && { PROC_MANAGER_HOME: home }), RB: RUN_BG },
    encoding: 'utf8',
    cwd,
    timeout: 60_000,
  })
  if (r.error) throw r.error
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

const latin1 = (text) => Buffer.from(text, 'latin1')

/** A temp directory holding `caf\xe9` (Latin-1, no UTF-8); its path as bytes. */
function latin1Dir(t) {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-bytes-'))
  t.after(() => fs.rmSync(base, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }))
  const dir = Buffer.concat([Buffer.from(base), latin1('/caf\xe9')])
  fs.mkdirSync(dir)
  return { base, dir }
}

// The job writes its working directory, its arguments and $V, each ended by a NUL.
const PROBE = `sh -c 'printf "%s\\0" "$(pwd -P)" "$@" "$V" > "$OUT"' sh`

test('arguments, --cwd and --env values that are no UTF-8 reach the job byte for byte, and are shown written out', async (t) => {
  const { home } = makeHome(t)
  const { base, dir } = latin1Dir(t)
  const out = path.join(base, 'out')
  const r = bash(home, `OUT=${out} exec "$RB" --json --yield 20s --env $'V=\\xff\\xfe' --cwd $'${base}/caf\\xe9' -- ${PROBE} $'caf\\xe9' plain`)
  assert.equal(r.code, 0, r.stderr)
  assert.doesNotMatch(r.stderr, /panicked/)
  const check = JSON.parse(r.stdout)
  assert.equal(check.status, 'success', r.stdout)
  const nul = Buffer.from([0])
  assert.deepEqual(fs.readFileSync(out), Buffer.concat([dir, nul, latin1('caf\xe9'), nul, Buffer.from('plain'), nul, latin1('\xff\xfe'), nul]))
  assert.equal(check.cwd, `${base}/caf\\xe9`, 'the JSON view writes the byte out')
  assert.match(check.command, /\$'caf\\xe9' plain$/, 'as bash would type it')
  // The issue's own example: ls of a name that is no UTF-8 (it fails: there is no such file).
  const ls = bash(home, `cd ${base} && exec "$RB" --yield 20s -- ls $'caf\\xe9' $'nothing\\xe9'`)
  assert.equal(ls.code, 2, `ls's own exit code: ${ls.stderr}`)
  assert.match(ls.stdout, /failed \(exit 2\) .* · ls \$'caf\\xe9' \$'nothing\\xe9'/)
  assert.match(ls.stdout, /caf/)
  const listed = runBg(home, ['list'])
  assert.equal(listed.code, 0, listed.stderr)
  assert.match(listed.stdout, /ls \$'caf\\xe9' \$'nothing\\xe9'/)
  // The record keeps strings where every build reads strings (the bytes
  // written out), and the exact bytes beside them, only for such values.
  const record = JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8')).jobs.find((j) => j.id === check.jobId)
  assert.deepEqual(record.argv.slice(-2), ['caf\\xe9', 'plain'])
  assert.deepEqual(record.argv_bytes.slice(-2), [[...latin1('caf\xe9')], null])
  assert.equal(record.cwd, `${base}/caf\\xe9`)
  assert.deepEqual(record.cwd_bytes, [...dir])
  assert.deepEqual(record.env, { V: '\\xff\\xfe' })
  assert.deepEqual(record.env_bytes, { V: [0xff, 0xfe] })
})

test('a job started from a working directory that is no UTF-8 runs there', async (t) => {
  const { home } = makeHome(t)
  const { base, dir } = latin1Dir(t)
  const out = path.join(base, 'out')
  const r = bash(home, `cd $'${base}/caf\\xe9' && OUT=${out} exec "$RB" --json --yield 20s -- ${PROBE} x`)
  assert.equal(r.code, 0, r.stderr)
  assert.doesNotMatch(r.stderr, /does not exist|panicked/)
  assert.equal(JSON.parse(r.stdout).status, 'success', r.stdout)
  assert.deepEqual(fs.readFileSync(out).subarray(0, dir.length + 1), Buffer.concat([dir, Buffer.from([0])]))
})

test('a --cwd that is no UTF-8 and does not exist is named with its byte written out', async (t) => {
  const { home } = makeHome(t)
  const r = bash(home, `exec "$RB" --cwd $'/nonexistent/caf\\xe9' -- true`)
  assert.equal(r.code, 1, r.stderr)
  assert.match(r.stderr, /working directory `\/nonexistent\/caf\\xe9` does not exist/)
})

test('send passes text that is no UTF-8 to the job as its bytes', async (t) => {
  const { home } = makeHome(t)
  const { base } = latin1Dir(t)
  const out = path.join(base, 'got')
  const r = bash(home, `OUT=${out} exec "$RB" --json --stdin pipe -- sh -c 'head -n 1 > "$OUT"'`)
  assert.equal(r.code, 0, r.stderr)
  const { jobId } = JSON.parse(r.stdout)
  const sent = bash(home, `exec "$RB" send ${jobId} $'caf\\xe9'`)
  assert.equal(sent.code, 0, sent.stderr)
  assert.match(sent.stdout, /sent 5 bytes/)
  await waitFor(() => checkJson(home, jobId).status === 'success', { what: 'the job to read its line and end' })
  assert.deepEqual(fs.readFileSync(out), latin1('caf\xe9\n'))
})

test('where text is required, a byte that is no UTF-8 is refused with exit 2 and says what is accepted', async (t) => {
  const { home } = makeHome(t)
  const cases = [
    [`--label $'caf\\xe9' -- true`, /`caf\\xe9` \(the value of --label\) is not UTF-8 text/],
    [`--owner=$'caf\\xe9' -- true`, /`--owner=caf\\xe9` is not UTF-8 text/],
    [`--cwd $'/tmp/d\\xe9' --env=$'V=\\xe9' --label $'l\\xe9' -- true`, /`l\\xe9` \(the value of --label\) is not UTF-8 text/],
    [`check $'caf\\xe9'`, /`caf\\xe9` is not UTF-8 text/],
    [`check --json $'caf\\xe9'`, /`caf\\xe9` is not UTF-8 text/],
    [`send $'caf\\xe9' x`, /`caf\\xe9` is not UTF-8 text/],
    [`kill $'caf\\xe9'`, /`caf\\xe9` is not UTF-8 text/],
  ]
  const own = [
    [`$'caf\\xe9'`, /unknown command `caf\\xe9`/],
    [`--env $'K\\xe9=v' -- true`, /bad --env `K\\xe9=v`: the name is not UTF-8 text/],
  ]
  for (const [args, said] of [...cases, ...own]) {
    const r = bash(home, `exec "$RB" ${args}`)
    assert.equal(r.code, 2, `${args}: exit ${r.code}: ${r.stderr}`)
    assert.doesNotMatch(r.stderr, /panicked/, args)
    assert.match(r.stderr, said, args)
    if (cases.some(([a]) => a === args)) assert.match(r.stderr, /may be any bytes; .*text: give them in UTF-8/, args)
  }
  const registry = path.join(home, 'jobs.json')
  const jobs = fs.existsSync(registry) ? JSON.parse(fs.readFileSync(registry, 'utf8')).jobs : []
  assert.equal(jobs.length, 0, 'nothing was started')
})

test('a home whose path is no UTF-8 works: the job runs, its log is read, its log path is shown written out', async (t) => {
  const { base } = latin1Dir(t)
  const home = Buffer.concat([Buffer.from(base), latin1('/home\xe9')])
  fs.mkdirSync(home, { mode: 0o700 })
  fs.writeFileSync(Buffer.concat([home, Buffer.from('/config.json')]), JSON.stringify({ notify: { url: null } }))
  const inHome = (args) => bash(null, `export PROC_MANAGER_HOME=$'${base}/home\\xe9'; exec "$RB" ${args}`)
  t.after(() => inHome('kill --all --force'))
  const r = inHome('--json --yield 20s -- echo hi')
  assert.equal(r.code, 0, r.stderr)
  const check = JSON.parse(r.stdout)
  assert.equal(check.status, 'success', r.stdout)
  assert.deepEqual(check.tail, ['hi'])
  assert.equal(check.logPath, `${base}/home\\xe9/jobs/${check.jobId}/output.log`)
  const logs = inHome(`logs ${check.jobId}`)
  assert.equal(logs.code, 0, logs.stderr)
  assert.equal(logs.stdout, 'hi\n')
})

// A build from before bytes were kept (b3bdddc or earlier), named by
// PROC_MANAGER_EARLIER_RUN_BG: a home is shared by whatever run-bg versions
// an agent's tools bring along. The Rust test registry_format reads the new
// record with the earlier record shape wherever this one skips.
const EARLIER_RUN_BG = process.env.PROC_MANAGER_EARLIER_RUN_BG

test('a record holding bytes that are no UTF-8 is read by an earlier run-bg sharing the home: it lists the job and leaves jobs.json in place', async (t) => {
  if (!EARLIER_RUN_BG || !fs.existsSync(EARLIER_RUN_BG)) {
    t.skip('PROC_MANAGER_EARLIER_RUN_BG names no earlier run-bg build (one from b3bdddc) to read the record with')
    return
  }
  const { home } = makeHome(t)
  const { base, dir } = latin1Dir(t)
  const out = path.join(base, 'out')
  const r = bash(home, `OUT=${out} exec "$RB" --json --yield 20s --env $'V=\\xff\\xfe' --cwd $'${base}/caf\\xe9' -- ${PROBE} $'caf\\xe9'`)
  assert.equal(r.code, 0, r.stderr)
  const { jobId, status } = JSON.parse(r.stdout)
  assert.equal(status, 'success', r.stdout)
  const earlier = (args) => {
    const run = spawnSync(EARLIER_RUN_BG, args, { env: { ...process.env, PROC_MANAGER_HOME: home }, encoding: 'utf8', timeout: 60_000 })
    return { code: run.status, stdout: run.stdout, stderr: run.stderr }
  }
  const listed = earlier(['list'])
  const check = earlier(['check', jobId, '--json'])
  assert.deepEqual(fs.readdirSync(home).filter((name) => name.startsWith('jobs.json.corrupt')), [], `the earlier build set jobs.json aside: ${listed.stderr}`)
  assert.equal(listed.code, 0, listed.stderr)
  assert.match(listed.stdout, new RegExp(`^${jobId} +success`, 'm'), listed.stdout)
  assert.equal(check.code, 0, check.stderr)
  const seen = JSON.parse(check.stdout)
  assert.equal(seen.status, 'success')
  assert.match(seen.command, /caf\\+xe9'?$/, 'the earlier build shows the text written out')
  // This build still has the exact bytes, and runs them so (a restart of the record's argv is what reads them back).
  const record = JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8')).jobs.find((j) => j.id === jobId)
  assert.equal(typeof record.cwd, 'string')
  assert.ok(record.argv.every((word) => typeof word === 'string'), JSON.stringify(record.argv))
  assert.ok(Object.values(record.env).every((value) => typeof value === 'string'), JSON.stringify(record.env))
  const now = checkJson(home, jobId)
  assert.match(now.command, / \$'caf\\xe9'$/, 'this build still has the bytes')
  assert.equal(now.cwd, `${base}/caf\\xe9`)
  assert.deepEqual(fs.readFileSync(out).subarray(0, dir.length), dir)
})

test('a job queued behind another starts with the exact bytes of its arguments, --cwd and --env values, read back from its record', async (t) => {
  const { home } = makeHome(t)
  const { base, dir } = latin1Dir(t)
  const out = path.join(base, 'out')
  const gate = path.join(base, 'gate')
  const first = bash(home, `exec "$RB" --json -- sh -c 'while [ ! -e ${gate} ]; do sleep 0.05; done'`)
  assert.equal(first.code, 0, first.stderr)
  const queued = bash(home, `OUT=${out} exec "$RB" --json --after ${JSON.parse(first.stdout).jobId} --env $'V=\\xff\\xfe' --cwd $'${base}/caf\\xe9' -- ${PROBE} $'caf\\xe9'`)
  assert.equal(queued.code, 0, queued.stderr)
  const { jobId } = JSON.parse(queued.stdout)
  assert.equal(checkJson(home, jobId).status, 'queued')
  fs.writeFileSync(gate, '')
  await waitFor(() => checkJson(home, jobId).status === 'success', { what: 'the queued job to run and end' })
  const nul = Buffer.from([0])
  assert.deepEqual(fs.readFileSync(out), Buffer.concat([dir, nul, latin1('caf\xe9'), nul, latin1('\xff\xfe'), nul]))
})
