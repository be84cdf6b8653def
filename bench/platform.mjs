// The platform bench: what issue 27 asks to compare on each system, run by
// the same script on Linux (node) and on Windows (node.exe under wine, by
// scripts/bench-windows.sh): a snapshot of the process table (on Windows
// with each of its readers, Toolhelp32 and sysinfo) against the system's own
// lister (`ps -e` / `tasklist`), the start latency of a job
// (runBackground until it answers) and of run-bg's CLI start, and a kill of
// a job's tree (cmd -> ping / sh -> sleep) until every process is gone.
// Medians of N runs, side by side in one run; each with its own home.
//
//   node bench/platform.mjs [--runs=N]
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const pm = createRequire(import.meta.url)(root)
const windows = process.platform === 'win32'
const runs = Number(process.argv.find((a) => a.startsWith('--runs='))?.slice(7) ?? 15)
process.env.PROC_MANAGER_HOME = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-bench-'))
// No interrupt service here: ends are not announced, which would keep each
// supervisor retrying after its job ended.
fs.writeFileSync(path.join(process.env.PROC_MANAGER_HOME, 'config.json'), JSON.stringify({ notify: { url: null } }))
const runBg = path.join(root, 'native', windows ? 'run-bg.exe' : 'run-bg')

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const ms = (f) => {
  const t = process.hrtime.bigint()
  f()
  return Number(process.hrtime.bigint() - t) / 1e6
}
const sleep = (t) => new Promise((r) => setTimeout(r, t))

const rows = []
function row(name, samples, note = '') {
  rows.push({ name, median: median(samples), note })
}

const lister = windows ? ['tasklist', []] : ['ps', ['-e']]
const listed = spawnSync(lister[0], lister[1], { encoding: 'utf8' })
// On Windows each reader of the process table (PROC_MANAGER_WINDOWS_PROCESS_TABLE,
// read by the addon on each snapshot), their samples interleaved, first one
// then the other going first, so that neither gets the quieter moments.
const sources = windows ? ['toolhelp', 'sysinfo'] : [null]
const samples = new Map(sources.map((s) => [s, []]))
const tables = new Map()
for (let i = 0; i < runs; i++) {
  for (const source of i % 2 ? [...sources].reverse() : sources) {
    if (source) process.env.PROC_MANAGER_WINDOWS_PROCESS_TABLE = source
    samples.get(source).push(ms(() => tables.set(source, pm.snapshot().processes)))
  }
}
delete process.env.PROC_MANAGER_WINDOWS_PROCESS_TABLE
for (const source of sources) {
  const table = tables.get(source)
  const withArgv = table.filter((p) => !p.command.startsWith('[')).length
  row(`snapshot() of the process table${source ? ` via ${source}` : ''}`, samples.get(source), `${table.length} processes, ${withArgv} with a command line`)
}
row(`\`${lister[0]}${lister[1].length ? ' ' + lister[1].join(' ') : ''}\` (the system's lister, spawned)`, Array.from({ length: runs }, () => ms(() => spawnSync(lister[0], lister[1]))), `${(listed.stdout || '').split('\n').filter(Boolean).length} lines out`)

const quick = windows ? 'exit /b 0' : 'true'
row('runBackground() until it answers', Array.from({ length: runs }, () => ms(() => pm.runBackground(quick, { label: 'quick' }))))
row('`run-bg -- <quick command>` (the CLI, spawned)', Array.from({ length: runs }, () => ms(() => spawnSync(runBg, ['--label', 'cli', '--', ...(windows ? ['cmd', '/c', 'exit 0'] : ['true'])]))))

const kills = []
for (let i = 0; i < Math.min(runs, 8); i++) {
  const job = pm.runBackground(windows ? 'cmd /c ping -n 60 127.0.0.1' : 'sh -c "sleep 60"', { label: 'tree' })
  // Until the grandchild runs, so the kill has a tree to end.
  const deadline = Date.now() + 20000
  let tree = []
  while (Date.now() < deadline) {
    const procs = pm.snapshot().processes
    const below = new Set([job.pid])
    for (let grew = true; grew; ) {
      grew = false
      for (const p of procs) if (!below.has(p.pid) && below.has(p.ppid)) (below.add(p.pid), (grew = true))
    }
    tree = [...below]
    if (tree.length >= 3) break
    await sleep(50)
  }
  const t = process.hrtime.bigint()
  await pm.killJob(job.jobId, { graceMs: 2000 })
  while (Date.now() < deadline) {
    const live = new Set(pm.snapshot().processes.map((p) => p.pid))
    if (!tree.some((pid) => live.has(pid))) break
    await sleep(10)
  }
  kills.push(Number(process.hrtime.bigint() - t) / 1e6)
}
row('killJob() of a three-process tree until none is left', kills)

console.log(`platform bench: ${process.platform} ${os.release()} (node ${process.version}), ${runs} runs, medians`)
console.log('| measure | median (ms) | note |')
console.log('|---|---|---|')
for (const r of rows) console.log(`| ${r.name} | ${r.median.toFixed(1)} | ${r.note} |`)
