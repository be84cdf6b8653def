#!/usr/bin/env node
// Benchmarks proc-manager against plain-shell / plain-Node baselines, side by
// side in one run: repetitions are interleaved (the order rotates every rep,
// or is shuffled for the log rows) so that noise from a shared machine hits
// every variant alike. Reports median, p90 and the range, prints a table with
// targets, writes bench/out/results.json.
//
//   node bench/run.mjs [--quick] [--only=start,idle,footprint,bin,log,tail,kill,notify,snapshot,ready,queue,scale,fleet,top,harness]
//                      [--baseline=<checkout>] [--log-reps=N] [--seed=N] [--scale=10,100,1000]
//
// --baseline runs the same rows with another checkout's build (its
// native/run-bg and addon, e.g. an older commit's worktree after
// `node scripts/build.js` there) and prints a before/after table: the log
// rows interleave both builds sample by sample, the other groups run once per
// build, back to back (the order alternating from group to group).
//
// Every sample gets its own temp PROC_MANAGER_HOME; every process started is
// killed by pid (or through run-bg by job id), and every temp dir is removed,
// also on errors and Ctrl-C.

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { benchFleet, printFleet } from './fleet.mjs'
import { benchBin } from './bin.mjs'
import { benchFootprint } from './footprint.mjs'
import { benchHarness, printHarnessTexts } from './harness.mjs'
import { benchIdle } from './idle.mjs'
import { benchKill } from './kill.mjs'
import { BUILDS, GROUPS, GiB, MiB, ONLY, OUT_FILE, PLAN, QUICK, ROOT, RUN_BG, check, checks, cleanup, freeBytes, log, now, removeDir, rotate, runs, settle, spawnChild, tempDir, withBuild, writeConfig } from './kit.mjs'
import { benchThroughput, throughputOf } from './log.mjs'
import { benchNotify } from './notify.mjs'
import { benchQueue } from './queue.mjs'
import { benchReady } from './ready.mjs'
import { printComparison, printTable, rowsFor } from './report.mjs'
import { SCALE_NS, benchScale } from './scale.mjs'
import { benchSnapshot, compileStatloop } from './snapshot.mjs'
import { benchStart } from './start.mjs'
import { benchTail } from './tail.mjs'
import { benchTop } from './top.mjs'

// ---------------------------------------------------------------------- main

async function main() {
  const unknown = ONLY?.filter((g) => !GROUPS.includes(g)) ?? []
  if (unknown.length) throw new Error(`--only: unknown group ${unknown.join(', ')}; groups: ${GROUPS.join(', ')}`)
  if (!fs.existsSync(RUN_BG)) throw new Error(`${RUN_BG} missing; run \`node scripts/build.js\``)
  // Git ignores bench/out (the compiled C loop, results.json): a fresh clone has none.
  fs.mkdirSync(path.dirname(OUT_FILE), { recursive: true })
  const began = now()
  const meta = {
    date: new Date().toISOString(),
    quick: QUICK,
    only: ONLY,
    plan: { ...PLAN },
    node: process.version,
    kernel: os.release(),
    cpus: os.cpus().length,
    loadavgStart: os.loadavg(),
    commit: spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim(),
    tmpdir: os.tmpdir(),
    binary: { path: RUN_BG, mtime: fs.statSync(RUN_BG).mtime.toISOString(), bytes: fs.statSync(RUN_BG).size },
    warnings: [],
  }
  const free = freeBytes(os.tmpdir())
  meta.freeBytes = free
  if (free < 5 * GiB) {
    const scaled = Math.max(16 * MiB, Math.floor(free / 5 / MiB) * MiB)
    if (free < 100 * MiB) throw new Error(`only ${(free / MiB).toFixed(0)} MiB free in ${os.tmpdir()}`)
    if (scaled < PLAN.logBytes) {
      const warning = `only ${(free / GiB).toFixed(2)} GiB free in ${os.tmpdir()}: log sizes scaled down to ${scaled / MiB} MiB`
      log(`WARNING: ${warning}`)
      meta.warnings.push(warning)
      PLAN.logBytes = PLAN.tailBytes = scaled
      meta.plan = { ...PLAN }
    }
  }

  if (runs('snapshot')) compileStatloop() // first: no point measuring anything if it cannot build
  meta.builds = BUILDS.map((b) => ({ name: b.name, root: b.root, commit: b.commit, bytes: fs.statSync(b.runBg).size }))
  // Each group once per build, back to back, the order alternating from group to group.
  let turn = 0
  const perBuild = async (group, fn) => {
    if (!runs(group)) return Object.fromEntries(BUILDS.map((b) => [b.name, null]))
    const out = {}
    for (const build of rotate(BUILDS, turn++)) out[build.name] = await withBuild(build, fn)
    return out
  }
  const load = {}
  const timed = async (group, fn) => {
    const before = os.loadavg()
    const r = await fn()
    load[group] = { start: before, end: os.loadavg() }
    return r
  }
  const start = await timed('start', () => perBuild('start', benchStart))
  const idle = await timed('idle', () => perBuild('idle', benchIdle))
  const footprint = runs('footprint') ? await timed('footprint', benchFootprint) : null
  const top = runs('top') ? await timed('top', benchTop) : null
  const bin = runs('bin') ? await timed('bin', benchBin) : null
  const throughputAll = runs('log') ? await timed('log', () => benchThroughput(PLAN.logBytes)) : null
  const tail = await timed('tail', () => perBuild('tail', () => benchTail(PLAN.tailBytes)))
  const kill = await timed('kill', () => perBuild('kill', benchKill))
  const notify = await timed('notify', () => perBuild('notify', benchNotify))
  const snap = await timed('snapshot', () => perBuild('snapshot', benchSnapshot))
  const ready = await timed('ready', () => perBuild('ready', benchReady))
  const queue = await timed('queue', () => perBuild('queue', benchQueue))
  const scale = await timed('scale', () => perBuild('scale', benchScale))
  // Every build at once, side by side (bench/fleet.mjs).
  const fleetKit = { builds: BUILDS, ns: SCALE_NS, quick: QUICK, tempDir, removeDir, check, log, writeConfig, spawnChild, settle }
  const fleet = runs('fleet') ? await timed('fleet', () => benchFleet(fleetKit)) : null
  const harness = runs('harness') ? await timed('harness', benchHarness) : null
  meta.loadavgEnd = os.loadavg()
  meta.seconds = (now() - began) / 1000
  meta.loadByGroup = load

  const notes = []
  const tables = {}
  for (const build of BUILDS) {
    const b = build.name
    const r = rowsFor({ start: start[b], idle: idle[b], footprint, top, bin, throughput: throughputOf(throughputAll, build), tail: tail[b], kill: kill[b], notify: notify[b], snap: snap[b], ready: ready[b], queue: queue[b], scale: scale[b], harness, build }, build === BUILDS[0] ? notes : [])
    tables[b] = r
  }
  const rows = tables.after
  console.log(`\nproc-manager bench${QUICK ? ' (--quick)' : ''}${ONLY ? ` --only=${ONLY.join(',')}` : ''}: ${meta.cpus} CPUs, load ${meta.loadavgStart.map((l) => l.toFixed(2)).join(' ')} → ${meta.loadavgEnd.map((l) => l.toFixed(2)).join(' ')}, ${meta.seconds.toFixed(0)} s`)
  console.log(notes.map((n, i) => `${i ? '      ' : 'base: '}${n}`).join('\n') + '\n')
  printTable(rows)
  if (harness && !harness.skipped) printHarnessTexts(harness)
  printFleet(fleet, BUILDS)
  const groupLoad = Object.entries(load).filter(([g]) => runs(g)).map(([g, l]) => `${g} ${l.start[0].toFixed(2)}→${l.end[0].toFixed(2)}`).join(', ')
  console.log(`\nload average (1 min) by group: ${groupLoad}`)
  if (tables.before) {
    console.log(`\nbefore (${BUILDS[1].commit}, ${BUILDS[1].root}) → after (${BUILDS[0].commit}): ours' medians`)
    printComparison(tables.before, tables.after)
  }
  const failedChecks = checks.filter((c) => !c.ok)
  console.log(`\nsanity checks: ${checks.length - failedChecks.length}/${checks.length} ok${failedChecks.map((c) => `\n  FAILED ${c.name}: ${c.detail}`).join('')}`)
  for (const w of meta.warnings) console.log(`warning: ${w}`)

  const raw = { start, idle, footprint, top, bin, throughput: throughputAll, tail, kill, notify, snapshot: snap, ready, queue, scale, fleet, harness }
  fs.writeFileSync(OUT_FILE, `${JSON.stringify({ meta, rows, tables, checks, raw }, null, 2)}\n`)
  console.log(`results: ${path.relative(process.cwd(), OUT_FILE) || OUT_FILE}`)
}

try {
  await main()
} catch (e) {
  log(`bench failed: ${e.stack ?? e}`)
  cleanup()
  process.exitCode = 1
}
