// `run-bg logs --all [--follow] [--owner]` and `followLogs()`: every job's
// output in one stream, each line prefixed with its job's name, against real
// jobs writing at their own pace.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { pm, makeHome, runBg, startJob, waitFor, killPid, RUN_BG } from './helpers.mjs'

/** `run-bg logs --all --follow …` running, its stdout collected as it comes. */
function follower(t, home, args = []) {
  const child = spawn(RUN_BG, ['logs', '--all', '--follow', ...args], {
    env: { ...process.env, PROC_MANAGER_HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const got = { out: '', err: '' }
  child.stdout.setEncoding('utf8').on('data', (d) => (got.out += d))
  child.stderr.setEncoding('utf8').on('data', (d) => (got.err += d))
  t.after(() => killPid(child.pid))
  // Complete lines only: the last piece may still be on its way.
  const lines = () => got.out.split('\n').slice(0, -1)
  return { child, got, lines }
}

/** `name  | text` → [name, text, the width the name was padded to]. */
function parse(line) {
  const m = /^(\S+)( *) \| (.*)$/.exec(line)
  assert.ok(m, `a prefixed line: ${JSON.stringify(line)}`)
  return { name: m[1], text: m[3], width: m[1].length + m[2].length }
}

/** A shell writer that says `<tag> start`, waits for `gate` to exist, then writes `<tag> 1` … `<tag> <n>`. */
function writer(tag, n, gate, pace) {
  return (
    `echo "${tag} start"; while [ ! -e ${gate} ]; do sleep 0.02; done; ` +
    `i=1; while [ $i -le ${n} ]; do ${pace(tag)}; i=$((i+1)); done`
  )
}

/** Each job's lines (after its name) in the order they came, and the names' end lines. */
function byName(lines) {
  const seen = new Map()
  for (const line of lines) {
    const { name, text } = parse(line)
    if (!seen.has(name)) seen.set(name, [])
    seen.get(name).push(text)
  }
  return seen
}

const numbered = (tag, n) => [`${tag} start`, ...Array.from({ length: n }, (_, i) => `${tag} ${i + 1}`)]
const ended = (texts) => texts.filter((l) => l.startsWith('[ended: '))
const output = (texts) => texts.filter((l) => !l.startsWith('[ended: '))

test('logs --all --follow: three writers at different rates and one that starts later, every line once, with its label, in order', async (t) => {
  const { home } = makeHome(t)
  const gate = path.join(home, 'gate')
  // Lines written in two pieces, so some reach the log without their newline yet.
  // db's log is written first, so it joins first: padded to web's width all the same.
  startJob(home, ['sh', '-c', writer('db', 300, gate, (tag) => `echo "${tag} $i"; [ $((i % 30)) -eq 0 ] && sleep 0.05`)], ['--label', 'db'])
  await waitFor(() => runBg(home, ['logs', '--all']).stdout.includes('db start'), { what: 'db to write first' })
  startJob(home, ['sh', '-c', writer('web', 150, gate, (tag) => `printf "${tag} "; sleep 0.005; echo $i`)], ['--label', 'web'])
  const f = follower(t, home)
  // Both starts came through the initial tails: the follow has begun.
  await waitFor(() => f.lines().some((l) => l.endsWith('| web start')) && f.lines().some((l) => l.endsWith('| db start')), {
    what: 'the tails of the jobs already running',
  })
  const before = f.lines().length
  fs.writeFileSync(gate, '')
  startJob(home, ['sh', '-c', writer('late', 200, gate, (tag) => `echo "${tag} $i"; sleep 0.002`)], ['--label', 'late-worker'])
  await waitFor(() => ended(byName(f.lines()).get('late-worker') ?? []).length === 1 && ended(byName(f.lines()).get('web') ?? []).length === 1 && ended(byName(f.lines()).get('db') ?? []).length === 1, {
    timeout: 30_000,
    what: `every job to end in the stream (so far: ${f.got.out.slice(-300)})`,
  })
  const got = byName(f.lines())
  assert.deepEqual([...got.keys()].sort(), ['db', 'late-worker', 'web'], 'each job under its label, nothing else')
  assert.deepEqual(output(got.get('web')), numbered('web', 150), 'web: every line once, in order, split writes joined')
  assert.deepEqual(output(got.get('db')), numbered('db', 300))
  assert.deepEqual(output(got.get('late-worker')), numbered('late', 200), 'the job started after the follow began joined from its first line')
  for (const name of ['web', 'db', 'late-worker']) {
    assert.match(ended(got.get(name))[0], /^\[ended: success \(exit 0\) after \S+\]$/, `${name} leaves the stream with its end`)
    assert.equal(got.get(name).at(-1), ended(got.get(name))[0], 'the end comes after its last line')
  }
  // Names are padded to a common width: web and db to 3 before late-worker joined, all to 11 after.
  const widths = f.lines().map((l) => parse(l).width)
  assert.ok(widths.slice(0, before).every((w) => w === 3), `widths before the join: ${widths.slice(0, before)}`)
  const joinedAt = f.lines().findIndex((l) => parse(l).name === 'late-worker')
  assert.ok(widths.slice(joinedAt).every((w) => w === 'late-worker'.length), 'widths after the join')
  assert.equal(f.got.out.includes('\x1b'), false, 'off a terminal: no escape codes')
  assert.equal(f.child.exitCode, null, 'it goes on following (new jobs may come)')
  assert.equal(f.got.err, '')
})

test('logs --all --follow across many log rotations loses and repeats nothing', async (t) => {
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 100 } })
  const gate = path.join(home, 'gate')
  const pad = 'x'.repeat(40)
  const pace = (tag) => `echo "${tag} $i ${pad}"; [ $((i % 100)) -eq 0 ] && sleep 0.01`
  startJob(home, ['sh', '-c', writer('a', 2000, gate, pace)], ['--label', 'a'])
  startJob(home, ['sh', '-c', writer('b', 2000, gate, pace)], ['--label', 'b'])
  const f = follower(t, home)
  await waitFor(() => f.lines().length >= 2, { what: 'the tails' })
  fs.writeFileSync(gate, '')
  await waitFor(() => ended(byName(f.lines()).get('a') ?? []).length + ended(byName(f.lines()).get('b') ?? []).length === 2, {
    timeout: 60_000,
    what: 'both jobs to end in the stream',
  })
  const got = byName(f.lines())
  for (const tag of ['a', 'b']) {
    assert.deepEqual(output(got.get(tag)).map((l) => l.replace(` ${pad}`, '')), numbered(tag, 2000), `${tag}: every line once, in order`)
  }
  const jobDir = path.join(home, 'jobs', readdir(home)[0])
  const rotated = fs.readdirSync(jobDir).filter((f) => /^output\.log\.\d+$/.test(f))
  assert.ok(rotated.length >= 15, `the log rotated while followed (${rotated.length} rotated files)`)
})

const readdir = (home) => fs.readdirSync(path.join(home, 'jobs'))

test('logs --all: the last lines of each job, labelled, oldest writer first; --owner filters; -n sets how many', async (t) => {
  const { home } = makeHome(t)
  const first = startJob(home, ['sh', '-c', 'seq 1 30'], ['--label', 'first', '--owner', 'stack'])
  runBg(home, ['wait', first.jobId])
  const second = startJob(home, ['sh', '-c', 'seq 101 130; printf "no newline"'], ['--label', 'second', '--owner', 'stack'])
  runBg(home, ['wait', second.jobId])
  const other = startJob(home, ['sh', '-c', 'echo other'], ['--owner', 'someone-else'])
  runBg(home, ['wait', other.jobId])
  // The same label twice: each of those is named by its id.
  const twin = startJob(home, ['sh', '-c', 'echo twin'], ['--label', 'first', '--owner', 'twins'])
  runBg(home, ['wait', twin.jobId])

  const stack = runBg(home, ['logs', '--all', '--owner', 'stack', '-n', '3'])
  assert.equal(stack.code, 0, stack.stderr)
  assert.equal(
    stack.stdout,
    ['first  | 28', 'first  | 29', 'first  | 30', 'second | 129', 'second | 130', 'second | no newline', ''].join('\n'),
  )
  const all = runBg(home, ['logs', '--all'])
  assert.equal(all.code, 0, all.stderr)
  const names = byName(all.stdout.split('\n').slice(0, -1))
  assert.deepEqual([...names.keys()], [first.jobId, 'second', 'sh', twin.jobId], 'the job written to last comes last')
  assert.deepEqual(names.get(first.jobId), ['21', '22', '23', '24', '25', '26', '27', '28', '29', '30'], 'the default: 10 lines a job')
  assert.deepEqual(names.get('second').slice(-2), ['130', 'no newline'])
  assert.deepEqual(names.get('sh'), ['other'])
  assert.deepEqual(names.get(twin.jobId), ['twin'])
  assert.equal(all.stdout.includes('\x1b'), false, 'off a terminal: no escape codes')

  const none = runBg(home, ['logs', '--all', '--owner', 'nobody'])
  assert.deepEqual([none.code, none.stdout], [0, ''])
  const json = runBg(home, ['logs', '--all', '--owner', 'stack', '-n', '1', '--json'])
  assert.deepEqual(JSON.parse(json.stdout), {
    lines: [
      { id: first.jobId, label: 'first', line: '30' },
      { id: second.jobId, label: 'second', line: 'no newline' },
    ],
  })
  // One job's whole log is still `logs <id> --all`.
  assert.equal(runBg(home, ['logs', first.jobId, '--all']).stdout, Array.from({ length: 30 }, (_, i) => `${i + 1}\n`).join(''))
  const both = runBg(home, ['logs', first.jobId, '--owner', 'stack'])
  assert.equal(both.code, 2)
  assert.match(both.stderr, /give a job id or --owner, not both/)
  const cut = runBg(home, ['logs', first.jobId, '--all', '-n', '3'])
  assert.equal(cut.code, 2)
  assert.match(cut.stderr, /-n and --all of one job's log: give one, not both/)
  const bad = runBg(home, ['logs', '--owner', 'stack'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /give a job id \(run-bg logs <id>\), or --all for every job's output/)
})

test('logs --all on a terminal colours each name; NO_COLOR and a pipe give none', { skip: !hasScript() && 'needs script(1) for a terminal' }, async (t) => {
  const { home } = makeHome(t)
  const a = startJob(home, ['sh', '-c', 'echo alpha'], ['--label', 'a'])
  const b = startJob(home, ['sh', '-c', 'echo beta'], ['--label', 'b'])
  runBg(home, ['wait', a.jobId, b.jobId])
  const onTerminal = (env) =>
    spawnSync('script', ['-qfec', `${RUN_BG} logs --all`, '/dev/null'], {
      env: { ...process.env, PROC_MANAGER_HOME: home, ...env },
      encoding: 'utf8',
      timeout: 30_000,
    })
  const coloured = onTerminal({ NO_COLOR: '' })
  assert.equal(coloured.status, 0, coloured.stderr)
  // Each name in its own colour, the text itself untouched.
  const colourOf = (name) => new RegExp(`\\x1b\\[(\\d+)m${name} \\|\\x1b\\[0m `).exec(coloured.stdout)?.[1]
  assert.ok(colourOf('a') && colourOf('b'), `coloured names: ${JSON.stringify(coloured.stdout)}`)
  assert.notEqual(colourOf('a'), colourOf('b'), 'one colour a job')
  assert.match(coloured.stdout, /\|\x1b\[0m alpha\r?\n/, 'the text itself uncoloured')
  const plain = onTerminal({ NO_COLOR: '1' })
  assert.equal(plain.stdout.replace(/\r/g, ''), 'a | alpha\nb | beta\n')
})

function hasScript() {
  return spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0
}

/** This process's threads named by the addon. */
const ours = () =>
  fs.readdirSync('/proc/self/task').filter((tid) => {
    try {
      return fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').startsWith('proc-manager-')
    } catch {
      return false
    }
  }).length

test('followLogs({owner}) yields {id, label, line} of that owner\'s jobs, joined as they start; an abort ends it cleanly', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const early = startJob(home, ['sh', '-c', 'echo early-1; sleep 300'], ['--label', 'early', '--owner', 'me'])
  await waitFor(() => runBg(home, ['logs', early.jobId]).stdout === 'early-1\n', { what: 'the first line' })
  const controller = new AbortController()
  const lines = pm.followLogs({ owner: 'me', signal: controller.signal })
  const got = []
  const reading = (async () => {
    for await (const item of lines) got.push(item)
  })()
  await waitFor(() => got.length === 1, { what: 'the tail of the running job' })
  startJob(home, ['sh', '-c', 'echo not-mine'], ['--label', 'other', '--owner', 'you'])
  const late = startJob(home, ['sh', '-c', 'printf "late-1\\nlate-"; sleep 0.1; echo 2'], ['--label', 'late', '--owner', 'me'])
  await waitFor(() => got.length === 3, { what: 'the late job\'s lines' })
  assert.deepEqual(got, [
    { id: early.jobId, label: 'early', line: 'early-1' },
    { id: late.jobId, label: 'late', line: 'late-1' },
    { id: late.jobId, label: 'late', line: 'late-2' },
  ])
  controller.abort()
  await assert.rejects(reading, (e) => e.name === 'AbortError')
  await waitFor(() => ours() === 0, { what: 'the follow thread to end' })
  assert.equal(runBg(home, ['check', early.jobId, '--json']).stdout.includes('"running"'), true, 'the jobs run on')

  // lines: 0 gives only what comes next; break ends it too.
  const fresh = pm.followLogs({ owner: 'me', lines: 0 })
  const next = fresh.next()
  runBg(home, ['kill', early.jobId])
  const again = startJob(home, ['sh', '-c', 'echo again; sleep 300'], ['--label', 'again', '--owner', 'me'])
  assert.deepEqual((await next).value, { id: again.jobId, label: 'again', line: 'again' })
  await fresh.return()
  await waitFor(() => ours() === 0, { what: 'the follow thread to end after return()' })
  assert.throws(() => pm.followLogs({ owner: 'me', lines: -1 }), /lines/)
  assert.throws(() => pm.followLogs({ color: true }), /color/)
})
