// The `fleet` group of bench/run.mjs: what the calls an agent makes most
// cost beside N running jobs (issue 40), at N = 10, 100, 1,000, side by side
// with the baseline build (--baseline) and with pueue's daemon when it is
// installed, every variant's homes holding their N jobs at once so that the
// noise of a shared machine hits all alike:
//
//   run-bg check <id>, list, summary (and pueue status), each call timed from
//   outside, repetitions interleaved in a rotating order;
//   run-bg kill --all (and pueue kill --all), timed until it returns; then
//   whether every job's main process and supervisor is gone at that moment
//   (pueue's tasks followed until they are);
//   the floor of a supervisor per job: N minimal C supervisors killed by a
//   minimal C killer (bench/minisup.c), to tell what the design costs from
//   what our supervisor and killer add to it; linked dynamically as ours is
//   (`floor`) and statically (`floor-static`, the lowest the design goes).
//
// Judged as ratios to pueue in the same run and as per-job slopes (what one
// more job adds to a call, from the smallest N to the largest).

import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const now = () => Number(process.hrtime.bigint()) / 1e6
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const MiB = 1024 ** 2

function median(samples) {
  if (!samples?.length) return null
  const s = [...samples].sort((a, b) => a - b)
  return s[Math.ceil(0.5 * s.length) - 1]
}

/** The fields of /proc/<pid>/stat after the command's name (f[0] the state, f[1] the parent, f[19] the start ticks), or null when gone. */
function statFields(pid) {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    return raw.slice(raw.lastIndexOf(')') + 2).split(' ')
  } catch {
    return null
  }
}

/** /proc/<pid>/stat alive with these start ticks, and no zombie. */
function isAlive(who) {
  const f = statFields(who.pid)
  return f != null && Number(f[19]) === who.start_ticks && f[0] !== 'Z' && f[0] !== 'X'
}

/** Every process below `root` now, with its start ticks: what a kill of them must leave gone. */
function descendants(root) {
  const children = new Map()
  for (const name of fs.readdirSync('/proc')) {
    const f = /^\d+$/.test(name) ? statFields(name) : null
    if (!f) continue
    const ppid = Number(f[1])
    if (!children.has(ppid)) children.set(ppid, [])
    children.get(ppid).push({ pid: Number(name), start_ticks: Number(f[19]) })
  }
  const out = []
  for (let todo = [root]; todo.length; ) for (const child of children.get(todo.pop()) ?? []) out.push(child), todo.push(child.pid)
  return out
}

/** Each job's own record, as its supervisor wrote it: the identities to look for after a kill. */
function recordedIdentities(home) {
  const dir = path.join(home, 'jobs')
  const out = []
  for (const id of fs.readdirSync(dir)) {
    try {
      const job = JSON.parse(fs.readFileSync(path.join(dir, id, 'job.json'), 'utf8'))
      for (const who of [job.main, job.supervisor]) if (who?.pid > 1) out.push({ id, ...who })
    } catch {}
  }
  return out
}

/** Runs `argv` (a file and its arguments) `count` times, `parallel` at a time. */
async function startMany(file, args, env, count, parallel) {
  let next = 0
  let failed = 0
  const one = () =>
    new Promise((resolve) => {
      const child = spawn(file, args(next++), { env, stdio: 'ignore' })
      child.on('exit', (code) => {
        if (code !== 0) failed++
        resolve()
      })
    })
  const worker = async () => {
    while (next < count) await one()
  }
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, worker))
  return failed
}

/** pueue and pueued on PATH (or beside each other in PUEUE_DIR), or null. */
function findPueue() {
  const look = (name) => {
    const dir = process.env.PUEUE_DIR
    if (dir && fs.existsSync(path.join(dir, name))) return path.join(dir, name)
    return spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim() || null
  }
  const [pueue, pueued] = [look('pueue'), look('pueued')]
  if (!pueue || !pueued) return null
  const version = spawnSync(pueue, ['--version'], { encoding: 'utf8' }).stdout.trim()
  return { pueue, pueued, version }
}

/** A pueued of our own (its own config, socket and state in `dir`), with `n` `sleep 600` tasks running. */
async function startPueue(kit, tools, dir, n) {
  const config = path.join(dir, 'pueue.yml')
  fs.writeFileSync(
    config,
    [
      'shared:',
      `  pueue_directory: ${dir}/data`,
      `  runtime_directory: ${dir}/run`,
      '  use_unix_socket: true',
      `  unix_socket_path: ${dir}/run/pueue.sock`,
      'daemon:',
      '  callback: null',
      'client:',
      '  restart_in_place: false',
      '',
    ].join('\n'),
  )
  for (const sub of ['data', 'run']) fs.mkdirSync(path.join(dir, sub), { recursive: true })
  const daemon = kit.spawnChild(tools.pueued, ['-c', config], { stdio: 'ignore' })
  const cli = (...args) => spawnSync(tools.pueue, ['-c', config, ...args], { encoding: 'utf8', maxBuffer: 256 * MiB })
  const deadline = now() + 20_000
  while (cli('status').status !== 0) {
    if (now() > deadline) throw new Error('pueued did not answer within 20 s')
    await sleep(50)
  }
  // Its tasks outlive a daemon killed with SIGKILL: on any failure here they go first.
  const fail = (why) => {
    cli('kill', '--all')
    daemon.kill('SIGKILL')
    throw new Error(why)
  }
  cli('parallel', String(n))
  const failed = await startMany(tools.pueue, () => ['-c', config, 'add', '--', 'sleep', '600'], process.env, n, 8)
  if (failed) fail(`pueue add failed ${failed} times`)
  const running = () => {
    const r = cli('status', '--json')
    try {
      return Object.values(JSON.parse(r.stdout).tasks).filter((t) => t.status?.Running != null || t.status === 'Running').length
    } catch {
      return 0
    }
  }
  // 1,000 adds on a loaded 2-core host took over a minute.
  for (let seen = running(); seen < n; seen = running()) {
    if (now() > deadline + 60_000 + 120 * n) fail(`pueue: only ${seen} of ${n} tasks running`)
    await sleep(100)
  }
  return { config, daemon, cli, argv: (...args) => [tools.pueue, ['-c', config, ...args]] }
}

/** Our variant: a home with `n` running `sleep 600` jobs of `build`. */
async function startOurs(kit, build, n) {
  const home = kit.tempDir(`fleet-${build.name}-${n}`)
  kit.writeConfig(home)
  const env = { ...process.env, PROC_MANAGER_HOME: home }
  const failed = await startMany(build.runBg, (i) => ['--label', `f${i}`, '--', 'sleep', '600'], env, n, 4)
  kit.check(`fleet ${n} ${build.name}: every start exits 0`, failed === 0, `${failed} failed`)
  const ids = fs.readdirSync(path.join(home, 'jobs')).sort()
  return { home, env, ids, checkId: ids[Math.floor(ids.length / 2)] }
}

/**
 * bench/minisup.c built into bench/out, linked as ours is (dynamically) and,
 * where the C library has a static archive, statically: with a few pages to
 * map and unmap per process, the static one is the lowest a supervisor per
 * job can cost. Those gcc cannot build are skipped, saying why.
 */
function buildFloors(kit) {
  const bench = path.dirname(fileURLToPath(import.meta.url))
  const src = path.join(bench, 'minisup.c')
  fs.mkdirSync(path.join(bench, 'out'), { recursive: true })
  const floors = []
  for (const [name, flags] of [['floor', []], ['floor-static', ['-static']]]) {
    const out = path.join(bench, 'out', name === 'floor' ? 'minisup' : 'minisup-static')
    const r = spawnSync('gcc', ['-O2', ...flags, '-o', out, src], { encoding: 'utf8' })
    if (r.error || r.status !== 0) {
      kit.log(`fleet: ${['gcc', ...flags].join(' ')} could not build bench/minisup.c (${r.error?.message ?? r.stderr.trim().slice(0, 200)}); the ${name} rows are skipped`)
      continue
    }
    floors.push({ name, program: out })
  }
  return floors
}

/** N minimal C supervisors of a `sleep 600` each (bench/minisup.c): the floor of a supervisor per job. */
function startFloor(kit, { name, program }, n) {
  const dir = kit.tempDir(`fleet-${name}-${n}`)
  const r = spawnSync(program, ['start', dir, String(n)], { encoding: 'utf8', timeout: 120_000 })
  kit.check(`fleet ${n} ${name}: ${n} minimal supervisors started`, r.status === 0, `exit ${r.status}: ${r.stderr?.slice(0, 200)}`)
  const identities = []
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.pids'))) {
    const [supervisor, job] = fs.readFileSync(path.join(dir, file), 'utf8').trim().split(' ').map(Number)
    for (const pid of [supervisor, job]) {
      const f = statFields(pid)
      if (f) identities.push({ pid, start_ticks: Number(f[19]) })
    }
  }
  return { name, dir, program, identities, killed: false }
}

/** Times one call of `file args`, returning ms and the child's result. */
function timed(file, args, env) {
  const t = now()
  const r = spawnSync(file, args, { env, encoding: 'utf8', maxBuffer: 256 * MiB, timeout: 600_000 })
  return { ms: now() - t, r }
}

/** Rows: the read calls, interleaved, then one kill each. */
async function fleetAt(kit, n, tools, reps) {
  const variants = []
  const samples = {}
  let pueue = null
  const floors = []
  try {
    for (const build of kit.builds) variants.push({ name: build.name, build, ...(await startOurs(kit, build, n)) })
    if (tools) {
      const dir = kit.tempDir(`fleet-pueue-${n}`)
      pueue = { name: 'pueue', dir, ...(await startPueue(kit, tools, dir, n)) }
    }
    // Each call of each variant once per rep, in an order rotating rep by rep.
    const calls = []
    for (const v of variants) {
      calls.push([v.name, 'check', v.build.runBg, ['check', v.checkId], v.env])
      calls.push([v.name, 'list', v.build.runBg, ['list'], v.env])
      calls.push([v.name, 'summary', v.build.runBg, ['summary'], v.env])
    }
    if (pueue) calls.push(['pueue', 'status', ...pueue.argv('status'), process.env])
    for (let rep = -1; rep < reps; rep++) {
      const order = calls.map((_, i) => calls[(i + rep + calls.length) % calls.length])
      for (const [variant, what, file, args, env] of order) {
        const { ms, r } = timed(file, args, env)
        if (rep < 0) {
          // The first round warms the page cache and checks the answers.
          const ok = r.status === 0
          kit.check(`fleet ${n} ${variant}: ${what} exits 0`, ok, r.stderr?.slice(0, 200))
          if (ok && what === 'list') {
            const running = r.stdout.split('\n').filter((l) => /\brunning\b/.test(l)).length
            kit.check(`fleet ${n} ${variant}: list shows every job running`, running === n, `${running} of ${n}`)
          }
          if (ok && what === 'check') kit.check(`fleet ${n} ${variant}: check says running`, /running/.test(r.stdout), r.stdout.slice(0, 200))
          if (ok && what === 'summary') {
            const lines = r.stdout.split('\n').filter((l) => /running/.test(l)).length
            kit.check(`fleet ${n} ${variant}: summary has a line for every job`, lines === n, `${lines} of ${n}`)
          }
          continue
        }
        ;(samples[`${variant}.${what}`] ??= []).push(ms)
      }
    }
    // One kill --all each. pueue's first: it answers before its tasks are
    // gone, so it is followed until they are (its row beside ours, which
    // returns only then), and the next kill starts with none of its
    // processes left in the table a kill of ours reads (killed after ours,
    // its 2,000 processes made our read of the table a third longer). Ours
    // then in an order rotating with N.
    const turn = Math.round(Math.log10(n))
    // Each kill starts on a quiet machine: starting 1,000 processes (a
    // floor's, just before its kill) leaves the cores busy for a while.
    const quiet = () => kit.settle(5000, { dropCaches: false })
    if (pueue) {
      await quiet()
      const tasks = descendants(pueue.daemon.pid)
      const started = now()
      const { ms, r } = timed(...pueue.argv('kill', '--all'), process.env)
      kit.check(`fleet ${n} pueue: kill --all exits 0`, r.status === 0, r.stderr.slice(0, 200))
      samples['pueue.kill'] = [ms]
      // Looked for as it returned, as ours are (a look at 2,000 processes
      // takes a tenth of a second: none left then counts as gone on return).
      let left = tasks.filter(isAlive)
      samples['pueue.killSurvivors'] = [left.length]
      let gone = ms
      const deadline = now() + 60_000
      while (left.length && now() < deadline) {
        await sleep(2)
        left = left.filter(isAlive)
        gone = now() - started
      }
      kit.check(`fleet ${n} pueue: every task process gone within 60 s of kill --all`, left.length === 0, `${left.length} of ${tasks.length} alive`)
      samples['pueue.killGone'] = [gone]
    }
    // The floors next, each alone in the table with ours, as pueue was:
    // started only now, one at a time (a floor's killer reads the whole
    // table, and the reads above were timed without them).
    for (const built of kit.floors) {
      const floor = startFloor(kit, built, n)
      floors.push(floor)
      await quiet()
      const { ms, r } = timed(floor.program, ['kill', floor.dir], process.env)
      floor.killed = true
      const left = floor.identities.filter(isAlive)
      kit.check(`fleet ${n} ${floor.name}: every minimal supervisor and its job gone as the kill returns`, r.status === 0 && left.length === 0 && r.stdout.includes(`killed=${n}`), `exit ${r.status}, ${left.length} alive, ${r.stdout.trim()}`)
      samples[`${floor.name}.kill`] = [ms]
      samples[`${floor.name}.killGone`] = [ms]
      samples[`${floor.name}.killSurvivors`] = [left.length]
    }
    for (const v of variants.map((_, i) => variants[(i + turn) % variants.length])) {
      const recorded = recordedIdentities(v.home)
      await quiet()
      const { ms, r } = timed(v.build.runBg, ['kill', '--all', '--json'], v.env)
      const alive = recorded.filter(isAlive)
      let reported = []
      try {
        reported = JSON.parse(r.stdout)
      } catch {}
      const killed = reported.filter((o) => o.status === 'killed').length
      kit.check(`fleet ${n} ${v.name}: kill --all exits 0, every job reported killed once`, r.status === 0 && killed === n && new Set(reported.map((o) => o.jobId)).size === n, `exit ${r.status}, ${killed} of ${n} killed; ${r.stderr.slice(0, 200)}`)
      kit.check(`fleet ${n} ${v.name}: no main process or supervisor alive when kill --all returns`, alive.length === 0, `${alive.length} alive: ${alive.slice(0, 5).map((w) => `${w.id}:${w.pid}`).join(' ')}`)
      samples[`${v.name}.kill`] = [ms]
      samples[`${v.name}.killSurvivors`] = [alive.length]
      // It returns once they are gone: the same figure (checked above).
      samples[`${v.name}.killGone`] = [ms]
    }
    return samples
  } finally {
    for (const v of variants) kit.removeDir(v.home)
    for (const floor of floors) {
      if (!floor.killed) spawnSync(floor.program, ['kill', floor.dir], { timeout: 60_000 })
      kit.removeDir(floor.dir)
    }
    if (pueue) {
      // Its tasks outlive a daemon killed with SIGKILL, when an error came before its kill --all.
      if (!samples['pueue.kill']) pueue.cli('kill', '--all')
      pueue.daemon.kill('SIGKILL')
    }
  }
}

/** The fleet group: `ns` job counts, every build of `kit.builds`, pueue beside when installed. */
export async function benchFleet(kit) {
  const tools = findPueue()
  if (!tools) kit.log('fleet: pueue/pueued are not installed (or PUEUE_DIR names no folder holding both); its rows are skipped')
  const reps = kit.quick ? 5 : 11
  // The floor of a supervisor per job, beside: bench/minisup.c (gcc).
  kit.floors = buildFloors(kit)
  const out = { ns: kit.ns, pueue: tools?.version ?? null, floors: kit.floors.map((f) => f.name), reps, at: {} }
  for (const n of kit.ns) {
    kit.log(`fleet: ${n} running jobs per variant (${kit.builds.map((b) => b.name).join(', ')}${tools ? ', pueue' : ''}): check, list, summary × ${reps}, then kill --all`)
    out.at[n] = await fleetAt(kit, n, tools, reps)
  }
  return out
}

/** The group's table: medians per N, ratios to pueue and to the baseline build, per-job slopes. */
export function printFleet(result, builds) {
  if (!result) return
  const { ns, at } = result
  const floors = result.floors ?? []
  const others = [...(result.pueue ? ['pueue'] : []), ...floors]
  const names = [...builds.map((b) => b.name), ...others]
  const ours = builds.map((b) => b.name)
  const calls = [
    ['check', 'check <id>', 'status'],
    ['list', 'list', 'status'],
    ['summary', 'summary', 'status'],
    ['kill', 'kill --all, until it returns', 'kill'],
    ['killGone', 'kill --all, until every process is gone', 'killGone'],
  ]
  const fmt = (v) => (v == null ? '—' : v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0))
  const header = ['fleet (ms, medians)', ...ns.flatMap((n) => names.map((name) => `${name}@${n}`)), ...ours.map((x) => `${x} µs/job`), ...others.flatMap((other) => ns.map((n) => `${builds[0].name}/${other}@${n}`))]
  const rows = []
  for (const [key, label, pueueKey] of calls) {
    const med = (name, n) => median(at[n]?.[`${name}.${name === 'pueue' ? pueueKey : key}`])
    const cells = [label, ...ns.flatMap((n) => names.map((name) => fmt(med(name, n))))]
    const [lo, hi] = [ns[0], ns[ns.length - 1]]
    for (const name of ours) {
      const slope = hi > lo && med(name, hi) != null && med(name, lo) != null ? ((med(name, hi) - med(name, lo)) / (hi - lo)) * 1000 : null
      cells.push(slope == null ? '—' : slope.toFixed(1))
    }
    for (const other of others) {
      for (const n of ns) cells.push(med(other, n) ? `${(med(builds[0].name, n) / med(other, n)).toFixed(2)}x` : '—')
    }
    rows.push(cells)
  }
  const survivors = ['processes alive as kill --all returned', ...ns.flatMap((n) => names.map((name) => String(at[n]?.[`${name}.killSurvivors`]?.[0] ?? '—')))]
  rows.push(survivors)
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (c) => c.map((x, i) => (i === 0 ? (x ?? '').padEnd(widths[i]) : (x ?? '').padStart(widths[i]))).join('  ')
  console.log(`\nfleet: N running \`sleep 600\` jobs per variant${result.pueue ? `, ${result.pueue} beside` : ', pueue not installed'}${floors.length ? `; ${floors.join(', ')} = a minimal C supervisor per job and a minimal killer (bench/minisup.c)${floors.includes('floor-static') ? ', linked dynamically as ours is and statically' : ''}` : ''}; ${result.reps} reps of each read, one kill --all`)
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const r of rows) console.log(line(r))
}
