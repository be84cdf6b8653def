// Issue 37, the attacks on what a person reads and on `up`'s stack file:
// each test is the attack itself, failing on the code before the fix.
// - `up -f` a FIFO, /dev/zero, a 2 MiB file, a 4 MiB line, a BOM: bounded,
//   refused with a short message, never blocking or growing;
// - a stack folder whose name is no owner: refused, saying to give --owner;
// - `up --yield 20s` as `run-bg --yield 20s`;
// - `logs --all` on a terminal (a pty): a job's escape codes (OSC 52, the
//   title, clear screen, `\r` + erase-line) do not reach it; `--raw` and a
//   pipe still get the bytes;
// - bidi overrides in a label or command: shown written out by `list`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { makeHome, runBg, RUN_BG, waitFor, killPid } from './helpers.mjs'

function tempDir(t, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  // rm(1): a name that is no UTF-8 is one Node cannot name back.
  t.after(() => spawnSync('rm', ['-rf', '--', dir]))
  return dir
}

/** `run-bg up` with a deadline: a read that blocks or grows fails the test instead of hanging it. */
function up(home, args, cwd) {
  const r = spawnSync(RUN_BG, ['up', ...args], { env: { ...process.env, PROC_MANAGER_HOME: home }, cwd, encoding: 'utf8', timeout: 20_000, maxBuffer: 64 * 1024 * 1024 })
  if (r.error) throw new Error(`run-bg up ${args.join(' ')}: ${r.error.message}`)
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

test('up reads its stack file within bounds: a FIFO, /dev/zero and a 2 MiB file refused at once; a 4 MiB bad line quoted in a few hundred bytes; a BOM dropped', (t) => {
  const { home } = makeHome(t)
  const dir = tempDir(t, 'pm-stackfile-')
  const fifo = path.join(dir, 'Procfile.fifo')
  spawnSync('mkfifo', [fifo])
  const fromFifo = up(home, ['-f', fifo], dir)
  assert.equal(fromFifo.code, 2)
  assert.match(fromFifo.stderr, /is not a regular file \(a directory, FIFO or device\)/)
  const zero = up(home, ['-f', '/dev/zero'], dir)
  assert.equal(zero.code, 2)
  assert.match(zero.stderr, /not a regular file/)
  const big = path.join(dir, 'big.Procfile')
  fs.writeFileSync(big, `web: sleep 1\n${'#'.repeat(2 * 1024 * 1024)}\n`)
  const tooBig = up(home, ['-f', big], dir)
  assert.equal(tooBig.code, 2)
  assert.match(tooBig.stderr, /is \d+ bytes: a stack file is at most 1048576 bytes \(1 MiB\)/)
  const sparse = path.join(dir, 'sparse.Procfile')
  fs.closeSync(fs.openSync(sparse, 'w'))
  fs.truncateSync(sparse, 2 * 1024 * 1024 * 1024)
  const huge = up(home, ['-f', sparse], dir)
  assert.equal(huge.code, 2, 'a 2 GiB sparse file is refused by its size, not read')
  const line = path.join(dir, 'line.Procfile')
  fs.writeFileSync(line, `${'x'.repeat(900 * 1024)}\n`)
  const badLine = up(home, ['-f', line], dir)
  assert.equal(badLine.code, 2)
  assert.ok(badLine.stderr.length < 1000, `the refusal is ${badLine.stderr.length} bytes`)
  assert.match(badLine.stderr, /line 1: `x+… \[\d+ more chars\]` is not `name: command`/)
  fs.writeFileSync(path.join(dir, 'Procfile'), '\ufeffweb: sleep 600\n')
  const bom = up(home, [], dir)
  assert.equal(bom.code, 0, bom.stderr)
  assert.match(bom.stdout, /web/)
  assert.equal(runBg(home, ['list', '--json']).stdout.includes('"label":"web"'), true)
})

test('a stack folder whose name is no owner is refused, saying to give --owner; --owner then works; up --yield 20s as run-bg --yield 20s', (t) => {
  const { home } = makeHome(t)
  const parent = tempDir(t, 'pm-owner-')
  const long = path.join(parent, 'd'.repeat(220))
  fs.mkdirSync(long)
  fs.writeFileSync(path.join(long, 'Procfile'), 'web: sleep 600\n')
  const refused = up(home, [], long)
  assert.equal(refused.code, 2)
  assert.match(refused.stderr, /the stack's owner is its folder's name unless --owner gives one .*give --owner <name>/)
  const given = up(home, ['--owner', 'shop', '--yield', '20s'], long)
  assert.equal(given.code, 0, given.stderr)
  const latin1 = Buffer.concat([Buffer.from(parent + '/caf'), Buffer.from([0xe9])])
  try {
    fs.mkdirSync(latin1)
  } catch {
    return t.diagnostic('this filesystem refuses a non-UTF-8 name; that part skipped')
  }
  fs.writeFileSync(Buffer.concat([latin1, Buffer.from('/Procfile')]), 'web: sleep 600\n')
  // Node holds paths as text: the shell enters the folder whose name is bytes.
  const byFile = spawnSync('sh', ['-c', `cd "$(printf '%s/caf\\351' "$PARENT")" && exec "$RUN_BG" up`], {
    env: { ...process.env, PROC_MANAGER_HOME: home, PARENT: parent, RUN_BG }, encoding: 'utf8',
  })
  assert.equal(byFile.status, 2, byFile.stderr)
  assert.match(byFile.stderr, /is not UTF-8 text: give --owner <name>/)
})

/** `command` run in a pty (script(1)), its output as the terminal got it. */
function inPty(home, command, timeout = 20_000) {
  const r = spawnSync('script', ['-q', '-e', '-c', command, '/dev/null'], {
    env: { ...process.env, PROC_MANAGER_HOME: home, NO_COLOR: '1', TERM: 'xterm' }, encoding: 'latin1', timeout,
  })
  if (r.error) throw r.error
  return r.stdout
}

test('logs --all on a terminal: a job\'s escape codes never reach the person (OSC 52, title, clear screen, \\r + erase-line); --raw and a pipe get the bytes', async (t) => {
  if (spawnSync('script', ['--version']).status !== 0) return t.skip('script(1) from util-linux is needed for a pty')
  const { home } = makeHome(t)
  const hostile = [
    '\\033]52;c;ZXZpbA==\\007',          // set the clipboard to "evil"
    '\\033]0;owned\\007',                 // the window title
    '\\033[2J\\033[H',                   // clear the screen
    'real\\r\\033[2Kdb | FATAL forged',   // a line that seems another job's
  ].join('')
  const r = runBg(home, ['--label', 'web', '--', 'sh', '-c', `printf '${hostile}\\n'`])
  assert.equal(r.code, 0, r.stderr)
  const id = r.stdout.match(/started (\S+)/)[1]
  await waitFor(() => JSON.parse(runBg(home, ['list', '--json']).stdout).find((j) => j.jobId === id)?.status === 'success', { what: 'the job to end' })
  const shown = inPty(home, `${RUN_BG} logs --all`)
  for (const [name, seq] of [['OSC 52', '\x1b]52'], ['title', '\x1b]0;'], ['clear', '\x1b[2J'], ['erase line', '\x1b[2K'], ['carriage return', 'real\r']]) {
    assert.ok(!shown.includes(seq), `${name} reached the terminal: ${JSON.stringify(shown)}`)
  }
  assert.match(shown, /web +\| db \| FATAL forged/, 'the forged line stays under its own job\'s name')
  const raw = inPty(home, `${RUN_BG} logs --all --raw`)
  assert.ok(raw.includes('\x1b]52;c;ZXZpbA=='), '--raw passes the bytes')
  const piped = runBg(home, ['logs', '--all'])
  assert.ok(piped.stdout.includes('\x1b]52;c;ZXZpbA=='), 'a pipe gets the bytes as written')
  assert.equal(runBg(home, ['logs', id, '--raw']).code, 2, '--raw belongs to logs --all')
})

test('bidi overrides in a label or command are shown written out by list and check, not obeyed', (t) => {
  const { home } = makeHome(t)
  const r = runBg(home, ['--label', 'evil\u202etxt.exe', '--', 'sh', '-c', 'echo "a\u2066b"; sleep 600'])
  assert.equal(r.code, 0, r.stderr)
  const id = r.stdout.match(/started (\S+)/)[1]
  const list = runBg(home, ['list'])
  assert.ok(!list.stdout.includes('\u202e') && !list.stdout.includes('\u2066'), JSON.stringify(list.stdout))
  assert.match(list.stdout, /a\\u\{2066\}b/, 'the command shows the mark written out')
  const check = runBg(home, ['check', id])
  assert.ok(!check.stdout.includes('\u202e') && !check.stdout.includes('\u2066'), JSON.stringify(check.stdout))
})

/** `run-bg up`/`down` started at once, as a shell's `&`: resolves with each one's result. */
function concurrently(home, cwd, argvs) {
  return Promise.all(argvs.map((argv) => new Promise((resolve, reject) => {
    const child = spawn(RUN_BG, argv, { env: { ...process.env, PROC_MANAGER_HOME: home }, cwd })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout: out, stderr: err }))
  })))
}

test('two `up` at once start the stack once; a `down` racing an `up` leaves all of it or none, never half', async (t) => {
  const { home } = makeHome(t)
  const dir = tempDir(t, 'pm-stackrace-')
  const names = Array.from({ length: 20 }, (_, i) => `p${i}`)
  fs.writeFileSync(path.join(dir, 'Procfile'), names.map((n) => `${n}: sleep 600`).join('\n') + '\n')
  const running = () => JSON.parse(runBg(home, ['list', '--json']).stdout).filter((j) => j.status === 'running')
  const ups = await concurrently(home, dir, [['up'], ['up'], ['up'], ['up']])
  for (const r of ups) assert.equal(r.code, 0, r.stderr)
  assert.equal(running().length, names.length, `${running().length} jobs run for ${names.length} processes`)
  assert.equal(ups.map((r) => (r.stdout.match(/started/g) || []).length).reduce((a, b) => a + b), names.length, 'each process started once in all')
  assert.equal(runBg(home, ['down'], { cwd: dir }).code, 0)
  await waitFor(() => running().length === 0, { what: 'the stack to be down' })
  for (let round = 0; round < 3; round++) {
    const [upped, downed] = await concurrently(home, dir, [['up'], ['down']])
    assert.equal(upped.code, 0, upped.stderr)
    assert.equal(downed.code, 0, downed.stderr)
    const left = running().length
    assert.ok(left === 0 || left === names.length, `round ${round}: ${left} of ${names.length} processes left running`)
    runBg(home, ['down'], { cwd: dir })
    await waitFor(() => running().length === 0, { what: 'the stack to be down' })
  }
})
