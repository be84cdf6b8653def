// bench/run.mjs's table: one row per measured thing, with its target.

import { spawn, spawnSync } from 'node:child_process'
import { BUILDS, GiB, MiB, PLAN, ROTATING, check, cmdline, log, stats } from './kit.mjs'

// ----------------------------------------------------------------- reporting

export function row(name, unit, ours, base, target, passes) {
  const o = stats(ours)
  const b = stats(base)
  const ratio = o && b && b.median > 0 ? o.median / b.median : null
  return { name, unit, ours: o, baseline: b, ratio, target: target ?? '—', pass: passes ? passes(o, ratio) : null }
}

export function fmt(v, unit) {
  if (v == null || Number.isNaN(v)) return '—'
  const digits = unit === 'ticks' ? 0 : unit === 'ms' ? (v < 10 ? 2 : v < 100 ? 1 : 0) : 2
  return `${v.toFixed(digits)} ${unit}`
}

export function printTable(rows) {
  const header = ['measurement', 'ours med', 'ours p90', 'ours min–max', 'base med', 'base p90', 'base min–max', 'ratio', 'target', 'result']
  const range = (s, unit) => (s ? `${fmt(s.min, unit).split(' ')[0]}–${fmt(s.max, unit)}` : '—')
  const cells = rows.map((r) => [
    r.name,
    fmt(r.ours?.median, r.unit),
    fmt(r.ours?.p90, r.unit),
    range(r.ours, r.unit),
    fmt(r.baseline?.median, r.unit),
    fmt(r.baseline?.p90, r.unit),
    range(r.baseline, r.unit),
    r.ratio == null ? '—' : `${r.ratio.toFixed(2)}x`,
    r.target,
    r.pass == null ? 'info' : r.pass ? 'PASS' : 'FAIL',
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)))
  const line = (c) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join('  ')
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const c of cells) console.log(line(c))
}

/** Before (the baseline build) and after (this checkout), row by row: ours' medians and their ratios to the plain baseline. */
export function printComparison(before, after) {
  const header = ['measurement', 'before med', 'after med', 'after/before', 'before vs base', 'after vs base']
  const ratio = (r) => (r?.ratio == null ? '—' : `${r.ratio.toFixed(2)}x`)
  const cells = after.map((a) => {
    const b = before.find((r) => r.name === a.name)
    const change = b?.ours?.median > 0 && a.ours ? `${(a.ours.median / b.ours.median).toFixed(2)}x` : '—'
    return [a.name, fmt(b?.ours?.median, a.unit), fmt(a.ours?.median, a.unit), change, ratio(b), ratio(a)]
  })
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)))
  const line = (c) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join('  ')
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const c of cells) console.log(line(c))
}


/** The table's rows for one build's results; `notes` gets the baselines' descriptions. */
export function rowsFor({ start, idle, footprint, top, bin, throughput, tail, kill, notify, snap, ready, queue, scale, harness, build }, notes) {
  const size = `${PLAN.logBytes >= GiB ? `${PLAN.logBytes / GiB} GiB` : `${PLAN.logBytes / MiB} MiB`}`
  const secs = (key, field = 'seconds') => throughput[key].map((r) => r[field])
  const bound = ROTATING.max_bytes * (ROTATING.keep + 1)
  const mib = (kib) => kib / 1024
  const rows = []
  if (start) {
    rows.push(
      row('start: run-bg CLI → job running', 'ms', start.cli.running, start.shell.running, '≤ 3x base', (o, r) => r <= 3),
      row('start: run-bg CLI returns', 'ms', start.cli.returned, start.shell.returned),
      row('start: runBackground() returns', 'ms', start.js.returned, start.nodeSpawn.returned, 'med < 10 ms', (o) => o.median < 10),
      row('start: runBackground() → job running', 'ms', start.js.running, start.nodeSpawn.running),
    )
    notes.push('start = sh -c "nohup … &" (CLI rows) / child_process.spawn detached (JS rows)')
  }
  if (idle) {
    rows.push(
      row('idle: VmRSS (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.vmRssKiB)), idle.memory.node.map((m) => mib(m.vmRssKiB)), 'each ≤ 2 MiB', (o) => o.max <= 2),
      row('idle: RssAnon (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.rssAnonKiB)), idle.memory.node.map((m) => mib(m.rssAnonKiB))),
      row('idle: RssFile (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.rssFileKiB)), idle.memory.node.map((m) => mib(m.rssFileKiB))),
      row('idle: Private_Dirty (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.privateDirtyKiB)), idle.memory.node.map((m) => mib(m.privateDirtyKiB))),
      row('idle: Pss (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.pssKiB)), idle.memory.node.map((m) => mib(m.pssKiB))),
      row(`idle: CPU over ${PLAN.cpuWindowMs / 1000} s`, 'ticks', idle.cpuTicksInWindow.ours, idle.cpuTicksInWindow.node, 'each = 0', (o) => o.max === 0),
    )
    notes.push('idle = node -e setTimeout')
  }
  if (footprint) {
    rows.push(
      row('footprint: run-bg binary', 'MiB', [footprint.bytes[build.name] / MiB]),
      row('footprint: run-bg --version vs /bin/true', 'ms', footprint.latency[build.name], footprint.floor),
    )
    notes.push('footprint = wall time of spawnSync (its own cost included on both sides)')
  }
  if (top && build === BUILDS[0]) {
    rows.push(
      row(`top: idle CPU, ${top.jobs} jobs, ${top.seconds.toFixed(0)} s (% of a core)`, '%', [top.percent], null, '< 2 %', (o) => o.median < 2),
      row('top: run-bg-top VmRSS', 'MiB', [top.rssKiB / 1024]),
    )
  }
  if (bin) {
    rows.push(
      row('bin: linked run-bg --version vs native', 'ms', bin['version.linked'], bin['version.native']),
      row('bin: linked run-bg check vs native', 'ms', bin['check.linked'], bin['check.native']),
      row('bin: linked run-bg --version vs node shim', 'ms', bin['version.linked'], bin['version.shim'], '≤ 1.2x base', (o, r) => r <= 1.2),
      row('bin: linked run-bg check vs node shim', 'ms', bin['check.linked'], bin['check.shim'], '≤ 1.2x base', (o, r) => r <= 1.2),
      row('bin: npx run-bg --version vs native', 'ms', bin.npx, bin['version.native']),
    )
    notes.push('bin = the packed packages installed offline into an empty project: node_modules/.bin/run-bg (a link')
    notes.push('      to bin/run-bg.js, the Node shim npm links on every platform) and node bin/run-bg.js vs the')
    notes.push("      platform package's native/run-bg, interleaved; wall time of spawnSync; check = of an ended job.")
    notes.push('      The sh launcher linked before (no Node; not runnable by npm on Windows) was 1.47x / 1.22x native.')
  }
  if (throughput) {
    rows.push(
      row(`log ${size} zero: rotating`, 's', secs('zero.ours'), secs('zero.shell'), '≤ 1.0x base', (o, r) => r <= 1.0),
      row(`log ${size} zero: no rotation`, 's', secs('zero.oursUnbounded'), secs('zero.shell')),
      row(`log ${size} yes: rotating`, 's', secs('yes.ours'), secs('yes.shell'), '≤ 1.0x base', (o, r) => r <= 1.0),
      row(`log ${size} yes: no rotation`, 's', secs('yes.oursUnbounded'), secs('yes.shell')),
      row(`log ${size} yes: rotating vs cat + rm`, 's', secs('yes.ours'), secs('yes.shellRm')),
      row(`log ${size} zero: rotating vs cat + rm`, 's', secs('zero.ours'), secs('zero.shellRm')),
      row('log: `run-bg wait` lag after end', 'ms', ['zero.ours', 'yes.ours', 'zero.oursUnbounded', 'yes.oursUnbounded'].flatMap((k) => throughput[k].map((r) => (r.waitSeconds - r.seconds) * 1000))),
      row('log: disk use after (rotating)', 'MiB', [...throughput['zero.ours'], ...throughput['yes.ours']].map((r) => r.retained / MiB), null, `≤ ${bound / MiB} MiB`, (o) => o.max <= bound / MiB),
    )
    notes.push('log = sh -c "<producer> | cat > FILE"; cat + rm = the same, then `rm FILE` timed too (freeing its page cache,')
    notes.push('      which a rotating log pays for the files it drops while the job writes)')
  }
  if (tail) {
    rows.push(
      row(`tail ${size}: run-bg check vs tail -n 20`, 'ms', tail.samples.cli, tail.samples.tail, '≤ 2x base', (o, r) => r <= 2),
      row(`tail ${size}: checkJob() vs JS read`, 'ms', tail.samples.js, tail.samples.jsRead, 'med < 5 ms', (o) => o.median < 5),
    )
    notes.push('tail = tail -n 20 (CLI) / fs read of the last 64 KiB (JS)')
  }
  if (kill) {
    const n = PLAN.treeSize
    rows.push(
      row('kill: sleep job, --grace 5s', 'ms', kill['single.ours'], kill['single.baseline'], 'med < 500 ms', (o) => o.median < 500),
      row(`kill: ${n}-proc tree, --grace 1s`, 'ms', kill['plain.ours'], kill['plain.baseline'], 'each < 2000 ms', (o) => o.max < 2000),
      row(`kill: ${n}-proc tree ignoring TERM, --grace 1s`, 'ms', kill['ignoresTerm.ours'], kill['ignoresTerm.baseline'], 'each < 2000 ms', (o) => o.max < 2000),
    )
    notes.push('kill = wall time of `run-bg kill` (a process spawn included) vs, in-process, kill(2) of each pid then a tight')
    notes.push(`       poll of /proc/<pid>/stat until gone or a zombie (SIGKILL after 1 s when TERM is ignored); trees: ${stats(kill['plain.ours.procs'])?.median} / ${stats(kill['ignoresTerm.ours.procs'])?.median} processes`)
  }
  if (notify) {
    rows.push(
      row("notify: POST after the job's last write", 'ms', notify.ours, notify.baseline, 'med < 100 ms', (o) => o.median < 100),
      row('notify: POST after the recorded endedAt', 'ms', notify.oursEndedAt),
      row('notify: recorded endedAt after last write', 'ms', notify.endedAtAfterMark),
    )
    notes.push("notify = listener's Date.now() at the request − the job's last command, `date +%s%3N`; baseline: the bench")
    notes.push("         awaits its own child's 'exit' event, then POSTs with http.request to the same listener")
  }
  if (snap) {
    const x = PLAN.snapExtra
    const seen = snap.visible.snapshot?.median
    rows.push(
      row(`snap +${x}: snapshot() vs ps -eo (spawn incl.)`, 'ms', snap.samples.snapshot, snap.samples.ps, '≤ 0.5x base', (o, r) => r <= 0.5),
      row(`snap +${x}: snapshot() vs C stat loop`, 'ms', snap.samples.snapshot, snap.samples.c, '≤ 2x base', (o, r) => r <= 2),
      row(`snap +${x}: snapshot() vs C stat+cmdline`, 'ms', snap.samples.snapshot, snap.samples.cCmdline),
      row(`snap +${x}: run-bg ps --json vs ps -eo`, 'ms', snap.samples.cli, snap.samples.ps),
      row(`snap +${x}: C stat+cmdline vs C stat loop`, 'ms', snap.samples.cCmdline, snap.samples.c),
      row(`snap +${x}: JS stat loop vs C stat loop`, 'ms', snap.samples.js, snap.samples.c),
    )
    notes.push(`snap = ${seen} processes. ps -eo pid,ppid,rss,lstart,args: wall time of spawnSync, stdout to a pipe (its process`)
    notes.push('       spawn is part of what a user pays). C stat loop (bench/statloop.c): average per pass over /proc reading')
    notes.push('       only <pid>/stat; snapshot() also reads <pid>/cmdline (C stat+cmdline is that floor), loads config.json,')
    notes.push('       and converts every process to a JS object through napi; JS stat loop = readdirSync + readFileSync')
  }
  if (ready) {
    rows.push(
      row('ready: readyAt after the port opened', 'ms', ready.readyAt, null, 'med ≤ 150 ms', (o) => o.median <= 150),
      row('ready: --yield returns after the port opened', 'ms', ready.returned, null, 'med < 200 ms', (o) => o.median < 200),
      row('ready: --yield returns after readyAt', 'ms', ready.returned.map((r, i) => r - ready.readyAt[i])),
      row(`ready: CPU over ${PLAN.probeWindowMs / 1000} s probing (vs idle supervisor)`, 'ticks', ready.probeTicks, ready.idleTicks, '≤ 2 ticks', (o) => o.max <= 2),
    )
    notes.push('ready = a node server listening 500 ms after its start; its own Date.now() at listen vs readyAt / run-bg\'s return')
  }
  if (queue) {
    rows.push(
      row("queue: next job's startedAt after one's endedAt", 'ms', queue.started, null, 'med < 10 ms', (o) => o.median < 10),
      row("queue: next job's first command after endedAt", 'ms', queue.running),
    )
  }
  if (scale) {
    for (const [n, s] of Object.entries(scale)) {
      const last = s.start.slice(-Math.max(1, Math.ceil(s.start.length / 10)))
      // Per job, a call's fixed cost (starting run-bg, 10-20 ms) is what a
      // small N measures: the target is the slope, judged from N = 100 on.
      const perJob = ['≤ 2 ms (N ≥ 100)', (o) => (Number(n) < 100 ? null : o.median <= 2)]
      rows.push(
        row(`scale ${n}: start (CLI), each`, 'ms', s.start),
        row(`scale ${n}: start, the last tenth`, 'ms', last),
        row(`scale ${n}: list --json`, 'ms', s.list),
        row(`scale ${n}: PSS per supervisor`, 'MiB', s.pss, null, 'each ≤ 0.3 MiB', (o) => o.max <= 0.3),
        ...(s.anon ? [row(`scale ${n}: RssAnon per supervisor`, 'MiB', s.anon)] : []),
        row(`scale ${n}: kill --all, per job`, 'ms', [s.killPerJob], null, ...perJob),
        row(`scale ${n}: kill --all, total`, 'ms', [s.killMs]),
        ...(s.lostLookPerJob == null ? [] : [
          row(`scale ${n}: first list after every supervisor died, per job`, 'ms', [s.lostLookPerJob], null, ...perJob),
          row(`scale ${n}: prune of them, per job`, 'ms', [s.prunePerJob], null, ...perJob),
        ]),
        ...(s.orphansKillPerJob == null ? [] : [
          row(`scale ${n}: first list after the supervisors died, orphans alive, per job`, 'ms', [s.orphanLookPerJob], null, ...perJob),
          row(`scale ${n}: orphans --kill of them, per job`, 'ms', [s.orphansKillPerJob], null, ...perJob),
          row(`scale ${n}: then until every watcher exited`, 'ms', [s.watchersGoneMs]),
        ]),
        ...(s.notifySettledMs == null ? [] : [
          row(`scale ${n}: kill --all, notifying a 503 service, until every supervisor exited`, 'ms', [s.notifySettledMs]),
          row(`scale ${n}: machine CPU meanwhile`, 's', [s.notifyCpuSeconds], null, '≤ 0.02 s a job', (o) => o.median <= 0.02 * Number(n)),
        ]),
      )
    }
    notes.push('scale = N `sleep 600` jobs in one home (registry.max_jobs 200): wall time of each `run-bg` call; PSS from')
    notes.push('        smaps_rollup of every supervisor 8 s after the last start (the lower of two reads 250 ms apart);')
    notes.push('        pueue beside it only when installed')
  }
  if (harness?.hookCost && build === BUILDS[0]) {
    rows.push(row('harness: a hook with nothing to say (post-tool-use, spawned), vs spawning `true`', 'ms', harness.hookCost.ours, harness.hookCost.base, '< 50 ms', (s) => s.median < 50))
  }
  if (harness && !harness.skipped && build === BUILDS[0]) {
    const base = stats(harness.builtin)
    const o = stats(harness.ours)
    const goal = 'ours ≤ built-in + 0.5 s'
    rows.push(
      row('harness: job end → wake request, ours vs built-in', 'ms', harness.ours, harness.builtin, goal, (s) => base != null && s.median <= base.median + 500),
      row('harness: ours − built-in, medians', 'ms', o && base ? [o.median - base.median] : null, null, '≤ 500 ms', (s) => s.median <= 500),
      row('harness: ours − built-in, max', 'ms', o && base ? [o.max - base.max] : null),
      row('harness: ours, job end → the hook records the tell', 'ms', harness.toldAfterEnd),
      row('harness: ours, the tell recorded → wake request', 'ms', harness.wakeAfterTold),
      row('harness: claude spawn → session named', 'ms', harness.oursStart, harness.builtinStart),
      row('harness: claude exit after stdin closed', 'ms', harness.oursExit, harness.builtinExit),
    )
    const n = (v) => `${harness[v].length}${harness.misses[v] ? ` (+${harness.misses[v]} never woken)` : ''}`
    notes.push(`harness = Claude Code ${harness.version} against the stub model, in a private network namespace, a fresh session per round`)
    notes.push('          (stream-json, stdin open until the wake\'s turn ends), rounds interleaved. Ours: `run-bg --label b -- sh -c')
    notes.push("          '<job>'` through Bash, hooks of `run-bg hooks install claude-code`, from ended_at in its job.json; built-in:")
    notes.push('          Bash run_in_background, no hooks, from the job\'s `date +%s%3N` just before its `exit 1`; to the stub\'s')
    notes.push(`          receipt of the request bringing the wake. Rounds: ours ${n('ours')}, built-in ${n('builtin')}; session idle when`)
    notes.push(`          the job ended: ours ${harness.idle.ours}, built-in ${harness.idle.builtin}. The tell: the mtime of <session>.told in the`)
    notes.push('          home (the hook appends the job as it tells, then exits 2; kernel file times, a few ms coarse)')
  }

  return rows
}
