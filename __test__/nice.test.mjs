// `--nice <n>` / `nice`: the job's main process runs at that niceness, set
// before its exec so that its whole tree inherits it; out of bounds is
// refused; a niceness below the current one without the privilege to take it
// fails the start, recorded and said so. Real jobs, read from /proc.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { makeHome, runBg, startJob, readRegistry, waitFor, killPid, connectMcp, pm, RUN_BG } from './helpers.mjs'

/** The fields of /proc/<pid>/stat after the command name ([0] is the 3rd, the state), or null once it is gone. */
function statFields(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  } catch {
    return null
  }
}

/** The nice field of /proc/<pid>/stat (the 19th field), or null once it is gone. */
function niceOf(pid) {
  const fields = statFields(pid)
  return fields && Number(fields[16])
}

/** The pids whose parent (the 4th field) is `pid`. */
const childrenOf = (pid) =>
  fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number).filter((p) => Number(statFields(p)?.[1]) === pid)

const ownNice = niceOf(process.pid)

test('run-bg --nice 7: the main process and the child it starts run at niceness 7', async (t) => {
  const { home, extraPids } = makeHome(t)
  const ack = startJob(home, ['sh', '-c', 'sleep 300 & wait'], ['--nice', '7'])
  t.after(() => killPid(ack.pid))
  assert.equal(niceOf(ack.pid), 7, 'the main process')
  const child = await waitFor(() => childrenOf(ack.pid)[0], { what: 'the job\'s child' })
  extraPids.push(child)
  assert.equal(niceOf(child), 7, 'its child inherits it')
  assert.notEqual(ownNice, 7, 'not merely the niceness everything here has')
})

test('runBackground({nice}) and MCP run_background take it too', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const job = pm.runBackground('sleep 301', { nice: 3 })
  t.after(() => killPid(job.pid))
  assert.equal(niceOf(job.pid), 3)
  const client = await connectMcp(t, home)
  const result = await client.callTool({ name: 'run_background', arguments: { command: 'sleep 302', nice: 11 } })
  assert.equal(result.isError, undefined, JSON.stringify(result.content))
  const pid = result.structuredContent.pid
  t.after(() => killPid(pid))
  assert.equal(niceOf(pid), 11)
})

test('a niceness out of -20..19, or not a whole number, is refused before anything starts', (t) => {
  const { home } = makeHome(t)
  for (const [value, why] of [['20', /bad --nice 20: give a niceness from -20 \(the most CPU\) to 19 \(the least\)/], ['-21', /bad --nice -21/]]) {
    const r = runBg(home, ['--nice', value, '--', 'true'])
    assert.equal(r.code, 2, r.stderr)
    assert.match(r.stderr, why)
  }
  process.env.PROC_MANAGER_HOME = home
  assert.throws(() => pm.runBackground('true', { nice: 19.5 }), /bad nice: 19\.5; give a whole number/)
  assert.throws(() => pm.runBackground('true', { nice: -40 }), /bad nice -40: give a niceness from -20/)
  assert.deepEqual(readRegistry(home), [], 'nothing was started')
})

/** Runs run-bg with no privilege to lower niceness: as root, inside a user namespace (its root is no root outside). */
function unprivileged(home, args) {
  if (process.getuid() !== 0) return runBg(home, args)
  const r = spawnSync('unshare', ['--user', '--map-root-user', RUN_BG, ...args], {
    env: { ...process.env, PROC_MANAGER_HOME: home }, encoding: 'utf8', timeout: 60_000,
  })
  if (r.error || /unshare: /.test(r.stderr)) return null
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

test('a niceness below the current one without the privilege to take it fails the start, recorded and said so', async (t) => {
  const { home } = makeHome(t)
  const lower = String(Math.max(-20, ownNice - 5))
  const r = unprivileged(home, ['--nice', lower, '--', 'sleep', '303'])
  if (r === null) return t.skip('no user namespace here to drop the privilege to lower niceness in')
  assert.equal(r.code, 1, `${r.stdout}${r.stderr}`)
  assert.match(r.stderr, new RegExp(`cannot run \`sleep\` at niceness ${lower}: .*; a niceness below the current one needs root, CAP_SYS_NICE or an RLIMIT_NICE that allows it`))
  const [job] = readRegistry(home)
  assert.equal(job.status, 'failed')
  assert.match(job.error, /niceness/)
})

test('as root, a negative niceness is taken', async (t) => {
  if (process.getuid() !== 0) return t.skip('lowering niceness needs root (or CAP_SYS_NICE); not root here')
  const { home } = makeHome(t)
  const ack = startJob(home, ['sleep', '304'], ['--nice', '-5'])
  t.after(() => killPid(ack.pid))
  assert.equal(niceOf(ack.pid), -5)
})
