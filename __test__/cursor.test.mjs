// Incremental reading through every face: a check's cursor, then only what
// came after it (run-bg logs --since, readLog(id, {since}), MCP read_log
// since), across log rotations: nothing repeated, nothing lost, and what was
// rotated away and deleted said in bytes.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { pm, makeHome, runBg, startJob, connectMcp, waitFor, killPid, checkJson } from './helpers.mjs'

const LINES = 300
/** A line as the job writes it, BYTES with its newline (a 4,096-byte log file holds 157). */
const line = (phase, n) => `phase ${phase} line ${String(n).padStart(5, '0')} ......`
const BYTES = line(1, 0).length + 1
const phaseLines = (phase) => Array.from({ length: LINES }, (_, n) => line(phase, n))

/**
 * A job that writes LINES lines, waits for `<dir>/go1`, writes LINES more,
 * waits for `go2`, writes its last LINES and ends. Its waits poll a file the
 * test creates: the job never runs ahead of the reads.
 */
function phasedJob(t, home, dir) {
  const script = [
    'for phase in 1 2 3; do',
    `  n=0; while [ $n -lt ${LINES} ]; do printf 'phase %s line %05d ......\\n' $phase $n; n=$((n+1)); done`,
    `  [ $phase = 3 ] || while [ ! -e "${dir}/go$phase" ]; do sleep 0.02; done`,
    'done',
  ].join('\n')
  const job = startJob(home, ['sh', '-c', script])
  t.after(() => killPid(job.pid))
  return job.jobId
}

/** The three faces' reads since a cursor: `{ lines, cursor, rotatedAwayBytes }`, at most `lines` lines. */
function faces(home, mcp) {
  return {
    cli(id, since, lines) {
      const r = runBg(home, ['logs', id, '--since', String(since), '-n', String(lines), '--json'])
      assert.equal(r.code, 0, r.stderr)
      return JSON.parse(r.stdout)
    },
    js(id, since, lines) {
      return pm.readLog(id, { since, lines })
    },
    async mcp(id, since, lines) {
      const result = await mcp.callTool({ name: 'read_log', arguments: { jobId: id, since, lines } })
      assert.equal(result.isError, undefined, result.content[0].text)
      const text = result.content[0].text.split('\n')
      const rotated = text[0].match(/^\[([\d,]+) bytes rotated away since your cursor\]$/)
      const body = text.slice(rotated ? 2 : 1).filter((l) => !l.startsWith('['))
      assert.equal(body.length, result.structuredContent.lineCount)
      return {
        lines: body,
        cursor: result.structuredContent.cursor,
        rotatedAwayBytes: rotated ? Number(rotated[1].replaceAll(',', '')) : undefined,
      }
    },
  }
}

/** Each face's check cursor and tail: `{ cursor, tail }`. */
function checks(home, mcp) {
  return {
    cli: async (id) => checkJson(home, id, ['-n', '1000']),
    js: async (id) => pm.checkJob(id, { lines: 1000 }),
    async mcp(id) {
      const result = await mcp.callTool({ name: 'check_job', arguments: { jobId: id, lines: 1000 } })
      const text = result.content[0].text.split('\n')
      return { cursor: result.structuredContent.cursor, tail: text.slice(1).filter((l) => !l.startsWith('[')) }
    },
  }
}

test('check, then only what came after, through the CLI, JS and MCP, across rotations: nothing repeated, nothing lost', async (t) => {
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 50 } })
  process.env.PROC_MANAGER_HOME = home
  const dir = fs.mkdtempSync(path.join(home, 'signals-'))
  const mcp = await connectMcp(t, home)
  const id = phasedJob(t, home, dir)
  const read = faces(home, mcp)
  const check = checks(home, mcp)

  await waitFor(() => pm.checkJob(id, { lines: 1 }).tail[0] === line(1, LINES - 1), { what: 'phase 1 written' })
  const seen = {}
  const cursors = {}
  for (const face of Object.keys(read)) {
    const c = await check[face](id)
    assert.deepEqual(c.tail, phaseLines(1), `${face}: the check shows phase 1`)
    assert.equal(typeof c.cursor, 'number', `${face}: the check gives a cursor`)
    seen[face] = [...c.tail]
    cursors[face] = c.cursor
  }
  assert.equal(new Set(Object.values(cursors)).size, 1, `every face gives the same cursor: ${JSON.stringify(cursors)}`)

  for (const phase of [2, 3]) {
    fs.writeFileSync(path.join(dir, `go${phase - 1}`), '')
    const last = line(phase, LINES - 1)
    // Each face reads in pages of 70 lines while the job writes, until it has the phase's last line.
    for (const face of Object.keys(read)) {
      await waitFor(async () => {
        const page = await read[face](id, cursors[face], 70)
        assert.equal(page.rotatedAwayBytes, undefined, `${face}: nothing was deleted (keep 50)`)
        assert.ok(page.cursor >= cursors[face], `${face}: the cursor never goes back`)
        seen[face].push(...page.lines)
        cursors[face] = page.cursor
        return seen[face].at(-1) === last
      }, { what: `${face}: phase ${phase} read`, interval: 10 })
    }
  }
  const logDir = path.join(home, 'jobs', id)
  assert.ok(fs.existsSync(path.join(logDir, 'output.log.4')), 'the log rotated between the reads')
  const whole = [...phaseLines(1), ...phaseLines(2), ...phaseLines(3)]
  for (const face of Object.keys(read)) {
    assert.deepEqual(seen[face], whole, `${face}: every line the job wrote, once, in order`)
    const after = await read[face](id, cursors[face], 100)
    assert.deepEqual(after.lines, [], `${face}: nothing after the last cursor`)
  }

  // The CLI's text: the lines on stdout, the next cursor on stderr.
  const text = runBg(home, ['logs', id, '--since', String(cursors.cli - 2 * BYTES)])
  assert.equal(text.stdout, `${line(3, LINES - 2)}\n${line(3, LINES - 1)}\n`)
  assert.match(text.stderr, new RegExp(`^cursor ${cursors.cli}: run-bg logs ${id} --since ${cursors.cli} for what comes next\\n$`))
  // A cursor from elsewhere is refused, saying what is accepted.
  const bad = runBg(home, ['logs', id, '--since', String(cursors.cli + 1)])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, new RegExp(`bad since: ${cursors.cli + 1}; this job's log ends at ${cursors.cli}`))
  assert.throws(() => pm.readLog(id, { since: 1, fromLine: 1 }), /fromLine and since: give one, not both/)
  assert.throws(() => pm.readLog(id, { since: -1 }), /bad since: -1; give a whole number/)
})

test('a cursor whose lines were rotated away and deleted: every face says how many bytes, then goes on from the oldest kept', async (t) => {
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 1 } })
  process.env.PROC_MANAGER_HOME = home
  const dir = fs.mkdtempSync(path.join(home, 'signals-'))
  const mcp = await connectMcp(t, home)
  const id = phasedJob(t, home, dir)
  const read = faces(home, mcp)

  await waitFor(() => pm.checkJob(id, { lines: 1 }).tail[0] === line(1, LINES - 1), { what: 'phase 1 written' })
  const cursor = pm.checkJob(id).cursor
  assert.equal(cursor, LINES * BYTES, 'the cursor counts every byte written, the rotated ones too')
  fs.writeFileSync(path.join(dir, 'go1'), '')
  fs.writeFileSync(path.join(dir, 'go2'), '')
  await waitFor(() => pm.checkJob(id).status === 'success', { what: 'the job to end' })
  // Two files of at most 4,096 bytes are kept of 25,200 written.
  const kept = pm.readLog(id, { fromLine: 1, lines: 1000 })
  const dropped = LINES * 3 * BYTES - kept.lines.length * BYTES
  assert.ok(kept.lines.length < LINES * 2, `${kept.lines.length} lines kept`)
  assert.equal(kept.cursor, LINES * 3 * BYTES)
  for (const face of Object.keys(read)) {
    const page = await read[face](id, cursor, 1000)
    assert.equal(page.rotatedAwayBytes, dropped - cursor, `${face}: the bytes between the cursor and the oldest kept`)
    assert.deepEqual(page.lines, kept.lines, `${face}: from the oldest line kept`)
    assert.equal(page.cursor, LINES * 3 * BYTES, face)
  }
  assert.match(runBg(home, ['logs', id, '--since', String(cursor)]).stdout,
    new RegExp(`^\\[${dropped - cursor} bytes rotated away since your cursor\\]\\n${kept.lines[0]}\\n`))
})

test('a job that ended but left a process writing: the check and the reads keep its unfinished line until no writer is left', async (t) => {
  const { home, cleanup } = makeHome()
  process.env.PROC_MANAGER_HOME = home
  const dir = fs.mkdtempSync(path.join(home, 'signals-'))
  // The main process ends at once; what it left behind writes `abc` (no
  // newline), then `def` and its newline, each when the test says so.
  const leftBehind = [
    `sh -c 'echo $PPID' > "${dir}/pid"`,
    `while [ ! -e "${dir}/go1" ]; do sleep 0.02; done; printf abc`,
    `while [ ! -e "${dir}/go2" ]; do sleep 0.02; done; echo def`,
  ].join('; ')
  const id = startJob(home, ['sh', '-c', `(${leftBehind}) & echo main`]).jobId
  // The process left behind is no job's main process: killed by its pid first.
  t.after(async () => {
    let pid = 0
    try { pid = Number(fs.readFileSync(path.join(dir, 'pid'), 'utf8')) } catch {}
    if (Number.isInteger(pid) && pid > 1) killPid(pid)
    await cleanup()
  })
  await waitFor(() => pm.checkJob(id).status === 'success', { what: 'the main process to end' })
  fs.writeFileSync(path.join(dir, 'go1'), '')
  await waitFor(() => pm.readLog(id, { fromLine: 1 }).lines.join('\n') === 'main\nabc', { what: '`abc` in the log' })

  const check = pm.checkJob(id, { lines: 5 })
  assert.equal(check.status, 'success')
  assert.equal(check.cursor, 'main\n'.length, 'a line still being written is not read yet: the cursor stays before it')
  assert.equal(checkJson(home, id).cursor, check.cursor, 'the CLI check says the same')
  const early = pm.readLog(id, { since: check.cursor })
  assert.deepEqual([early.lines, early.cursor], [[], check.cursor], 'a since-read leaves the unfinished line too')
  assert.equal(pm.readLog(id, { fromLine: 1, lines: 5 }).cursor, check.cursor, 'and so does a read by line number')

  fs.writeFileSync(path.join(dir, 'go2'), '')
  let read
  await waitFor(() => (read = pm.readLog(id, { since: check.cursor })).lines.length > 0, { what: 'the rest of the line' })
  assert.deepEqual(read.lines, ['abcdef'], 'the line as the log holds it, whole')
  assert.equal(read.cursor, 'main\nabcdef\n'.length)

  // A since-read of no lines would say `more` with the same cursor forever.
  assert.throws(() => pm.readLog(id, { since: 0, lines: 0 }), /bad lines: 0; give lines >= 1 with since/)
  const zero = runBg(home, ['logs', id, '--since', '0', '-n', '0'])
  assert.equal(zero.code, 2)
  assert.match(zero.stderr, /bad lines: 0; give lines >= 1 with since/)
})

/** Bytes this process has read through read(2) so far (`rchar` of /proc/self/io). */
const bytesRead = () => Number(fs.readFileSync('/proc/self/io', 'utf8').match(/^rchar: (\d+)$/m)[1])

test('a start record of 100 MB, or with one digit changed: check answers without reading it, says it is corrupt, and a read by cursor is refused saying why', async (t) => {
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 1 } })
  process.env.PROC_MANAGER_HOME = home
  const mcp = await connectMcp(t, home)
  // Three times what two 4,096-byte files hold: files were dropped.
  const written = 3 * LINES
  const script = `n=0; while [ $n -lt ${written} ]; do printf 'phase 1 line %05d ......\\n' $n; n=$((n+1)); done`
  const job = startJob(home, ['sh', '-c', script])
  const id = job.jobId
  await waitFor(() => pm.checkJob(id).status === 'success', { what: 'the job to end' })
  const good = pm.checkJob(id, { lines: 3 })
  assert.equal(good.cursor, written * BYTES)
  assert.equal(good.logProblem, undefined)
  const kept = pm.readLog(id, { since: 0, lines: 1000 })
  assert.ok(kept.rotatedAwayBytes > 0, 'the test needs files rotated away: a wrong record shifts every cursor')
  const record = path.join(path.dirname(job.logPath), '.output.log.start')
  const original = fs.readFileSync(record)

  // Sparse: no disk, but 100 MB of zeros to whoever reads it whole.
  fs.truncateSync(record, 100 * 1024 * 1024)
  const before = bytesRead()
  const huge = pm.checkJob(id, { lines: 3 })
  const read = bytesRead() - before
  assert.ok(read < 1024 * 1024, `check read ${read} bytes`)
  assert.match(huge.logProblem ?? '', /start record .*\.output\.log\.start is corrupt \(it is 104857600 bytes; a start record is 93\)/)
  assert.deepEqual(huge.tail, good.tail, 'the lines are shown as before')
  const started = Date.now()
  const cli = runBg(home, ['check', id])
  assert.equal(cli.code, 0, cli.stderr)
  assert.ok(Date.now() - started < 5000, `run-bg check took ${Date.now() - started} ms`)
  assert.match(cli.stdout, /\[no cursor: the log's start record .* is corrupt/)

  // One digit of the position changed: still shaped like a record.
  const changed = Buffer.from(original)
  const at = original.length - 1 - 17 - 1
  changed[at] = changed[at] === 0x30 ? 0x31 : 0x30
  fs.writeFileSync(record, changed)
  const flipped = pm.checkJob(id, { lines: 3 })
  assert.match(flipped.logProblem ?? '', /is corrupt \(its checksum does not match what it says\)/, `cursor ${flipped.cursor}`)
  assert.throws(() => pm.readLog(id, { since: good.cursor }), /cannot read after cursor \d+: the log's start record .* is corrupt/)
  const cliSince = runBg(home, ['logs', id, '--since', String(good.cursor)])
  assert.notEqual(cliSince.code, 0)
  assert.match(cliSince.stderr, /is corrupt \(its checksum does not match/)
  const mcpSince = await mcp.callTool({ name: 'read_log', arguments: { jobId: id, since: good.cursor } })
  assert.equal(mcpSince.isError, true)
  assert.match(mcpSince.content[0].text, /is corrupt/)
  const mcpCheck = await mcp.callTool({ name: 'check_job', arguments: { jobId: id } })
  assert.match(mcpCheck.content[0].text, /\[no cursor: the log's start record .* is corrupt/)
  assert.doesNotMatch(mcpCheck.content[0].text, /read_log with since/)
})

/** The width of each line fastWriter's job writes: its number in 12 digits, a space, x's and the newline. */
const WIDTH = 100

/**
 * A job writing 2,000 numbered lines every 10 ms into 64 KiB log files, one
 * kept, and an MCP client for its home; resolves after several rotations.
 */
async function fastWriter(t) {
  const { home } = makeHome(t, { logs: { max_bytes: 65536, keep: 1 } })
  process.env.PROC_MANAGER_HOME = home
  const mcp = await connectMcp(t, home)
  const writer = `let i = 0; setInterval(() => { let s = ''; for (let k = 0; k < 2000; k++) s += String(i++).padStart(12, '0') + ' ' + 'x'.repeat(${WIDTH - 14}) + '\\n'; process.stdout.write(s) }, 10)`
  const job = startJob(home, [process.execPath, '-e', writer])
  t.after(() => killPid(job.pid))
  await waitFor(() => pm.checkJob(job.jobId).cursor > 4 * 65536, { what: 'several rotations' })
  return { home, mcp, jobId: job.jobId }
}

test('read_log since a cursor that fell behind a fast writer (keep 1): every answer starts where its cursor and rotatedAwayBytes say and ends at its cursor', async (t) => {
  // 64 KiB files, two kept: a read of 1000 lines (100 KB) is cut to what fits
  // in an answer, which needs a second read for the cursor; the writer
  // rotates files every few milliseconds, so often between the two.
  const { home, mcp, jobId } = await fastWriter(t)
  const read = faces(home, mcp)
  let since = 0
  let rotated = 0
  const wrong = []
  for (let call = 0; call < 60; call++) {
    const page = await read.mcp(jobId, since, 1000)
    const numbers = page.lines.map((l) => Number(l.slice(0, 12)))
    const start = since + (page.rotatedAwayBytes ?? 0)
    if (numbers.length === 0) {
      if (page.cursor !== since) wrong.push(`call ${call}: no lines, cursor ${since} -> ${page.cursor}`)
    } else if (numbers[0] * WIDTH !== start || page.cursor !== (numbers.at(-1) + 1) * WIDTH ||
      numbers.some((n, i) => i > 0 && n !== numbers[i - 1] + 1)) {
      wrong.push(`call ${call}: since ${since} + ${page.rotatedAwayBytes ?? 0} rotated away, lines ${numbers[0]}..${numbers.at(-1)} (bytes ${numbers[0] * WIDTH}..${(numbers.at(-1) + 1) * WIDTH}), cursor ${page.cursor}`)
    }
    rotated += page.rotatedAwayBytes ?? 0
    since = page.cursor
  }
  assert.ok(rotated > 0, 'the reader fell behind')
  assert.deepEqual(wrong, [], `${wrong.length} of 60 answers misplaced their lines`)
})

test('read_log fromLine 1 on a fast writer (keep 1): a cut answer offers the cursor right after its last line shown, and says how many lines it left out', async (t) => {
  // The cursor of a cut answer used to come from a second read that took
  // as many lines from the same line number: after a rotation between the
  // two, line 1 was another line, so the cursor offered skipped 1,310-5,240
  // lines never shown (14 of 80 answers).
  const { mcp, jobId } = await fastWriter(t)
  const wrong = []
  for (let call = 0; call < 80; call++) {
    const result = await mcp.callTool({ name: 'read_log', arguments: { jobId, fromLine: 1, lines: 1000 } })
    assert.equal(result.isError, undefined, result.content[0].text)
    const answer = result.content[0].text
    assert.ok(answer.length <= 16_000, `${answer.length} characters`)
    const [head, ...rest] = answer.split('\n')
    const body = rest.filter((l) => !l.startsWith('['))
    const numbers = body.map((l) => Number(l.slice(0, 12)))
    const note = answer.match(/\n\[([\d,]+) more lines not shown: answers stop at 16,000 characters; use read_log with since (\d+)\]\n/)
    const { fromLine, lineCount, cursor } = result.structuredContent
    if (!note) {
      wrong.push(`call ${call}: ${lineCount} of 1,000 lines shown without saying the rest were left out: ${head}`)
      continue
    }
    const [, more, since] = note
    if (Number(since) !== (numbers.at(-1) + 1) * WIDTH || cursor !== Number(since)) {
      wrong.push(`call ${call}: lines ${numbers[0]}..${numbers.at(-1)} shown (they end at byte ${(numbers.at(-1) + 1) * WIDTH}), since ${since} offered, cursor ${cursor}`)
    }
    if (Number(more.replaceAll(',', '')) + lineCount !== Math.min(1000, result.structuredContent.totalLines - fromLine + 1)) {
      wrong.push(`call ${call}: ${lineCount} shown + ${more} not shown is not the 1,000 asked for (${head})`)
    }
  }
  assert.deepEqual(wrong, [], `${wrong.length} of 80 answers`)
})

test('read_log with no range (the last lines) that does not fit says which of the lines asked for it left out', async (t) => {
  // 100 last lines of 211 characters do not fit in 16,000: the answer was
  // "lines 228–300 of 300" and never said 201–227, also asked for, were left out.
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const mcp = await connectMcp(t, home)
  const job = startJob(home, ['sh', '-c', `i=1; while [ $i -le 300 ]; do printf '%05d %0205d\\n' $i 0; i=$((i+1)); done`])
  await waitFor(() => pm.checkJob(job.jobId).status === 'success', { what: 'the job to end' })
  const result = await mcp.callTool({ name: 'read_log', arguments: { jobId: job.jobId } })
  const answer = result.content[0].text
  assert.ok(answer.length <= 16_000, `${answer.length} characters`)
  const body = answer.split('\n').slice(1).filter((l) => !l.startsWith('['))
  assert.equal(body[0].length, 211)
  const { fromLine, lineCount } = result.structuredContent
  const note = answer.match(/\n\[([\d,]+) more lines not shown: answers stop at 16,000 characters; use read_log with fromLine (\d+)\]\n/)
  assert.ok(note, `the lines left out are said: ${answer.split('\n')[0]} … ${answer.split('\n').slice(-2).join(' ')}`)
  assert.equal(fromLine, 201, 'the last 100 lines start at 201')
  assert.equal(Number(body[0].slice(0, 5)), 201)
  assert.equal(Number(note[1]) + lineCount, 100, 'shown and not shown make the 100 asked for')
  assert.equal(Number(note[2]), 201 + lineCount)
})

test('a start record grown past its size on a running job is cut back at the next rotation: cursors work again', async (t) => {
  // The writer rewrote only the record's first bytes, so a record grown
  // past its size (here 100 MB, sparse) stayed corrupt for good.
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 1 } })
  process.env.PROC_MANAGER_HOME = home
  const dir = fs.mkdtempSync(path.join(home, 'signals-'))
  const id = phasedJob(t, home, dir)
  await waitFor(() => pm.checkJob(id, { lines: 1 }).tail[0] === line(1, LINES - 1), { what: 'phase 1 written' })
  const record = path.join(home, 'jobs', id, '.output.log.start')
  fs.truncateSync(record, 100 * 1024 * 1024)
  assert.match(pm.checkJob(id).logProblem ?? '', /is corrupt \(it is 104857600 bytes/)
  // Phase 2 writes 9,000 bytes into 4,096-byte files: rotations.
  fs.writeFileSync(path.join(dir, 'go1'), '')
  await waitFor(() => pm.checkJob(id, { lines: 1 }).tail[0] === line(2, LINES - 1), { what: 'phase 2 written' })
  const healed = pm.checkJob(id)
  assert.equal(healed.logProblem, undefined, 'the record was rewritten whole')
  assert.equal(healed.cursor, 2 * LINES * BYTES)
  assert.ok(fs.statSync(record).size < 4096, `${fs.statSync(record).size} bytes`)
  const page = pm.readLog(id, { since: LINES * BYTES, lines: 1000 })
  const skipped = (page.rotatedAwayBytes ?? 0) / BYTES
  assert.deepEqual(page.lines, phaseLines(2).slice(skipped), 'placed where everything written says')
  assert.equal(page.cursor, 2 * LINES * BYTES)
})
