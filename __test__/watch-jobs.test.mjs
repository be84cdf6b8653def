// pm.watchJobs(): job ends as they happen, from any process of the user.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { EventEmitter } from 'node:events'
import fs from 'node:fs'
import path from 'node:path'
import { makeHome, runBg, startJob, pm } from './helpers.mjs'

test('watchJobs yields each end from now on of jobs started by another process, with the POST\'s data, and stops on break', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const before = startJob(home, ['true'])
  runBg(home, ['wait', before.jobId])

  const ends = pm.watchJobs({ owner: 'agent-a' })
  // Started by the CLI, another process; the JS thread is blocked in spawnSync meanwhile.
  const failing = startJob(home, ['sh', '-c', 'echo "error: it broke"; exit 3'], ['--owner', 'agent-a'])
  const others = startJob(home, ['true'], ['--owner', 'agent-b'])
  const killed = startJob(home, ['sleep', '30'], ['--owner', 'agent-a'])
  runBg(home, ['wait', failing.jobId, others.jobId])
  runBg(home, ['kill', killed.jobId])

  const got = []
  for await (const end of ends) {
    got.push(end)
    if (got.length === 2) break
  }
  assert.deepEqual(got.map((e) => [e.jobId, e.status]), [[failing.jobId, 'failed'], [killed.jobId, 'killed']])
  const [failed, stopped] = got
  assert.equal(failed.eventId, `${failing.jobId}:failed`)
  assert.deepEqual([failed.exitCode, failed.signal, failed.outcome, failed.owner], [3, '', 'exit 3', 'agent-a'])
  assert.match(failed.message, /failed, exit 3, .*; first error: error: it broke$/)
  assert.deepEqual(failed.lastLines, ['error: it broke'])
  assert.equal(stopped.exitCode, 143)
  assert.deepEqual(await ends.next(), { done: true }, 'ended by break')

  // An abort stops it too, rejecting the pending next().
  const controller = new AbortController()
  const watching = pm.watchJobs({ signal: controller.signal })
  const pending = watching.next()
  controller.abort()
  await assert.rejects(pending, { name: 'AbortError' })
  assert.throws(() => pm.watchJobs({ ownr: 'x' }), /ownr/)
})

test('jobEvents: the same ends as an EventEmitter (\'end\'), closed by close(); an abort emits the AbortError, then \'close\'', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const events = pm.jobEvents({ owner: 'agent-e' })
  assert.ok(events instanceof EventEmitter)
  const got = []
  const two = new Promise((resolve) => events.on('end', (end) => got.push(end) === 2 && resolve()))
  const go = path.join(home, 'go')
  const wait = `while [ ! -e ${go} ]; do sleep 0.02; done`
  const failing = startJob(home, ['sh', '-c', `${wait}; echo "error: no"; exit 5`], ['--owner', 'agent-e'])
  const other = startJob(home, ['sh', '-c', wait], ['--owner', 'agent-x'])
  const fine = startJob(home, ['sh', '-c', wait], ['--owner', 'agent-e'])
  fs.writeFileSync(go, '')
  runBg(home, ['wait', failing.jobId, other.jobId, fine.jobId])
  await two
  const byId = Object.fromEntries(got.map((end) => [end.jobId, end]))
  assert.deepEqual(Object.keys(byId).sort(), [failing.jobId, fine.jobId].sort())
  const failed = byId[failing.jobId]
  assert.deepEqual([failed.eventId, failed.status, failed.exitCode, failed.signal, failed.outcome, failed.owner],
    [`${failing.jobId}:failed`, 'failed', 5, '', 'exit 5', 'agent-e'])
  assert.match(failed.message, /; first error: error: no$/)
  assert.equal(byId[fine.jobId].status, 'success')

  const closed = new Promise((resolve) => events.once('close', resolve))
  events.close()
  await closed
  const later = startJob(home, ['true'], ['--owner', 'agent-e'])
  runBg(home, ['wait', later.jobId])
  await new Promise((resolve) => setImmediate(resolve))
  assert.equal(got.length, 2, 'nothing after close()')

  const controller = new AbortController()
  const aborted = pm.jobEvents({ signal: controller.signal })
  const failure = new Promise((resolve) => aborted.once('error', resolve))
  const closedToo = new Promise((resolve) => aborted.once('close', resolve))
  controller.abort()
  assert.equal((await failure).name, 'AbortError')
  await closedToo
  assert.throws(() => pm.jobEvents({ ownr: 'x' }), /unknown option `ownr` for jobEvents/)
})
