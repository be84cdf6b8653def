// The `tail` group of bench/run.mjs (`--only=tail`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { MiB, PLAN, RUN_BG, UNBOUNDED, check, envFor, inHome, log, now, pm, removeDir, rotate, runBg, startJson, tempDir, writeConfig } from './kit.mjs'

// ----------------------------------------------------------------------- 4. tail

export const TAIL_TEXT = ' some text for the tail benchmark, sixty bytes\n'
export const tailLine = (i) => `line ${String(i).padStart(9, '0')}${TAIL_TEXT}`
export const LINE_BYTES = tailLine(0).length
// Runs inside the job: writes `argv[1]` numbered lines of LINE_BYTES, in 1 MiB-ish chunks.
export const TAIL_GENERATOR = `
const fs = require('fs'), n = Number(process.argv[1]), text = ${JSON.stringify(TAIL_TEXT)}
const L = 14 + text.length, per = 16384, buf = Buffer.alloc(per * L)
for (let k = 0; k < per; k++) buf.write('line 000000000' + text, k * L, 'latin1')
for (let s = 0; s < n; s += per) {
  const m = Math.min(per, n - s)
  for (let k = 0; k < m; k++) for (let v = s + k, o = k * L + 13, d = 0; d < 9; d++, v = Math.floor(v / 10)) buf[o - d] = 48 + (v % 10)
  for (let off = 0; off < m * L; ) off += fs.writeSync(1, buf, off, m * L - off)
}`

export function tailInJs(file, n) {
  const fd = fs.openSync(file, 'r')
  try {
    const size = fs.fstatSync(fd).size
    const buf = Buffer.alloc(Math.min(size, 64 * 1024))
    fs.readSync(fd, buf, 0, buf.length, size - buf.length)
    const lines = buf.toString('utf8').split('\n')
    if (lines.at(-1) === '') lines.pop()
    return lines.slice(-n)
  } finally {
    fs.closeSync(fd)
  }
}

export async function benchTail(size) {
  const home = tempDir('tail')
  writeConfig(home, { logs: UNBOUNDED })
  const lines = Math.floor(size / LINE_BYTES)
  log(`tail: writing a ${((lines * LINE_BYTES) / MiB).toFixed(0)} MiB log through a real job`)
  const t0 = now()
  const { jobId, logPath } = startJson(home, [process.execPath, '-e', TAIL_GENERATOR, String(lines)], 'tailgen')
  const waited = runBg(home, ['wait', jobId])
  const genSeconds = (now() - t0) / 1000
  if (waited.status !== 0) throw new Error(`tail generator job failed: ${waited.stdout}${waited.stderr}`)
  check('tail: log holds every byte', fs.statSync(logPath).size === lines * LINE_BYTES, `${fs.statSync(logPath).size}`)

  const expected = Array.from({ length: 20 }, (_, i) => tailLine(lines - 20 + i).slice(0, -1))
  const same = (got) => JSON.stringify(got) === JSON.stringify(expected)
  const cli = runBg(home, ['check', jobId]).stdout.trimEnd().split('\n')
  check('tail: tail -n 20 gives the last lines', same(spawnSync('tail', ['-n', '20', logPath], { encoding: 'utf8' }).stdout.trimEnd().split('\n')))
  check('tail: run-bg check gives the last lines', same(cli.slice(1)), cli[0])
  check('tail: checkJob gives the last lines', same(inHome(home, () => pm.checkJob(jobId)).tail))
  check('tail: JS read gives the last lines', same(tailInJs(logPath, 20)))

  const variants = {
    tail: () => spawnSync('tail', ['-n', '20', logPath], { stdio: ['ignore', 'pipe', 'ignore'] }),
    cli: () => spawnSync(RUN_BG, ['check', jobId], { env: envFor(home), stdio: ['ignore', 'pipe', 'ignore'] }),
    js: () => pm.checkJob(jobId), // inside inHome() below
    jsRead: () => tailInJs(logPath, 20),
  }
  log(`tail: ${PLAN.tailReps} reps (+${PLAN.warmup} warm-up) × ${Object.keys(variants).length} variants`)
  const samples = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
  inHome(home, () => {
    for (let rep = -PLAN.warmup; rep < PLAN.tailReps; rep++) {
      for (const name of rotate(Object.keys(variants), rep)) {
        const t = now()
        variants[name]()
        if (rep >= 0) samples[name].push(now() - t)
      }
    }
  })
  removeDir(home)
  return { samples, genSeconds, lines, bytes: lines * LINE_BYTES }
}
