// pm.watchJobs(): job ends as they happen, from any process of the user.
import { test } from 'node:test'
import assert from 'node:assert/strict'
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
