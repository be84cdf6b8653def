// The home under attack (issue 25): parents another user can change, a
// home swapped under a running job, and a home whose disk turns read-only.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { RUN_BG, runBg, startJob, readRegistry, waitFor, waitForQuiet, killPid, processStart } from './helpers.mjs'

const NOBODY = 65534
const notRoot = process.getuid() !== 0 && 'giving a directory to another user (uid 65534) needs root'

/**
 * A private scratch directory under /tmp (mkdtemp: root's, 0700), removed
 * after the test once every home in it is quiet (its jobs killed).
 */
function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-home-'))
  t.after(async () => {
    const homes = fs.readdirSync(dir, { recursive: true }).filter((f) => path.basename(f) === 'config.json')
    for (const home of homes.map((f) => path.join(dir, path.dirname(f)))) {
      runBg(home, ['kill', '--all', '--force'])
      await waitForQuiet(home)
    }
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
  })
  return dir
}

function writeConfig(home, config = {}) {
  fs.mkdirSync(home, { recursive: true, mode: 0o700 })
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null }, ...config }))
}

/** Kills `pid` after the test only if it is still the process seen now (not a reuse of its pid). */
function killAfter(t, pid) {
  const start = processStart(pid)
  t.after(() => {
    if (start !== null && processStart(pid) === start) killPid(pid)
  })
}

test('a home inside a directory another user owns or may write is refused, naming it and the fix', { skip: notRoot }, (t) => {
  const base = scratch(t)
  const theirs = path.join(base, 'theirs')
  fs.mkdirSync(theirs, { mode: 0o755 })
  fs.chownSync(theirs, NOBODY, NOBODY)
  const home = path.join(theirs, 'home')
  let r = runBg(home, ['--', 'true'])
  assert.equal(r.code, 2, `refused as bad usage: ${r.stdout}${r.stderr}`)
  assert.match(r.stderr, new RegExp(`parent directory ${theirs} is owned by uid ${NOBODY}`))
  assert.match(r.stderr, new RegExp(`chown 0 ${theirs}`))
  assert.equal(fs.existsSync(home), false, 'nothing is made in a directory refused')

  // Writable by others without the sticky bit: anyone may rename the home away.
  const open = path.join(base, 'open')
  fs.mkdirSync(open)
  fs.chmodSync(open, 0o777)
  r = runBg(path.join(open, 'home'), ['--', 'true'])
  assert.equal(r.code, 2, r.stderr)
  assert.match(r.stderr, new RegExp(`parent directory ${open} is writable by its group or others \\(mode 777\\)`))
  assert.match(r.stderr, new RegExp(`chmod go-w ${open}`))

  // Sticky, as /tmp (1777) is: others cannot rename what they do not own.
  fs.chmodSync(open, 0o1777)
  const sticky = path.join(open, 'home')
  writeConfig(sticky)
  const ack = startJob(sticky, ['true'])
  assert.ok(ack.jobId, 'a home in a sticky directory is used')
})

/**
 * A job queued in a scratch home, taken out of it before it can start: its
 * job.json and spec.json, as another user would plant them. Its command
 * creates `marker`.
 */
function queuedJobRecords(t, base, marker) {
  const scratchHome = path.join(base, 'scratch')
  writeConfig(scratchHome, { queues: { q: { max_parallel: 1 } } })
  const holder = startJob(scratchHome, ['sleep', '600'], ['--queue', 'q'])
  killAfter(t, holder.pid)
  const queued = startJob(scratchHome, ['sh', '-c', `touch ${marker}`], ['--queue', 'q'])
  assert.equal(queued.status, 'queued', JSON.stringify(queued))
  const dir = path.join(scratchHome, 'jobs', queued.jobId)
  const record = JSON.parse(fs.readFileSync(path.join(dir, 'job.json'), 'utf8'))
  const spec = fs.readFileSync(path.join(dir, 'spec.json'))
  // Gone from the scratch home before its slot frees: it never starts there.
  fs.rmSync(dir, { recursive: true })
  runBg(scratchHome, ['kill', '--all', '--force'])
  return { id: queued.jobId, record, spec }
}

/** Puts the queued job's records into `home`, its log there too, as a planter would. */
function plant(home, planted, owner) {
  const dir = path.join(home, 'jobs', planted.id)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const record = { ...planted.record, log_path: path.join(dir, 'output.log') }
  fs.writeFileSync(path.join(dir, 'job.json'), JSON.stringify(record, null, 2))
  fs.writeFileSync(path.join(dir, 'spec.json'), planted.spec)
  for (const name of owner === NOBODY ? ['job.json', 'spec.json'] : []) fs.chownSync(path.join(dir, name), NOBODY, NOBODY)
  fs.writeFileSync(path.join(home, 'queue.pending'), '')
  return dir
}

test('a home swapped under a running job: its supervisor stays in its own, writes nothing into the planted one nor through a symlink there, and starts nothing from it', { skip: notRoot }, async (t) => {
  // The parent passes the check (root's 0700): the swap is done here, by
  // root, as another user could do it where a parent let them.
  const base = scratch(t)
  const marker = path.join(base, 'planted-job-ran')
  const planted = queuedJobRecords(t, base, marker)

  const home = path.join(base, 'home')
  writeConfig(home)
  // A hook: its log (hooks.log) and the notification's reads of the job's
  // log must go to the held home, not through the home's name.
  const ack = startJob(home, ['sh', '-c', 'sleep 1; exit 3'], ['--on-exit', 'echo HOOK-RAN'])
  killAfter(t, ack.pid)
  const supervisor = JSON.parse(fs.readFileSync(path.join(home, 'jobs', ack.jobId, 'job.json'), 'utf8')).supervisor.pid
  const supervisorStart = processStart(supervisor)

  const moved = path.join(base, 'home.moved')
  fs.renameSync(home, moved)
  fs.mkdirSync(home, { mode: 0o700 })
  plant(home, planted, NOBODY)
  // The job's directory in the planted home leads elsewhere.
  const target = path.join(base, 'rv-target')
  fs.mkdirSync(target, { mode: 0o700 })
  fs.symlinkSync(target, path.join(home, 'jobs', ack.jobId))
  const before = listTree(home)

  await waitFor(() => processStart(supervisor) !== supervisorStart, { timeout: 20_000, what: 'the supervisor to finish' })
  // A planted job would have been started before the supervisor exited; its
  // own supervisor may take a moment to run it.
  await waitFor(() => fs.existsSync(marker), { timeout: 1_000 }).catch(() => {})
  for (const job of readRegistry(home)) if (job.main && job.id !== planted.id) killAfter(t, job.main.pid)

  assert.equal(fs.existsSync(marker), false, 'the planted job was started by root')
  assert.deepEqual(listTree(home), before, 'the supervisor wrote into the planted home')
  // The notifier may still be running the hook when the supervisor is gone from view.
  const hooksLog = path.join(moved, 'jobs', ack.jobId, 'hooks.log')
  await waitFor(() => fs.existsSync(hooksLog) && fs.readFileSync(hooksLog, 'utf8').includes('HOOK-RAN'), { timeout: 10_000, what: 'the hook to log into the held home' })
  assert.deepEqual(fs.readdirSync(target), [], 'written through the symlink planted for the job directory')
  const ended = readRegistry(moved).find((j) => j.id === ack.jobId)
  assert.equal(ended?.status, 'failed', `the real job's end is in the renamed home: ${JSON.stringify(ended)}`)
  assert.equal(ended.exit_code, 3)
})

test('a launch spec or record another user owns is refused, never started', { skip: notRoot }, async (t) => {
  const base = scratch(t)
  const marker = path.join(base, 'foreign-spec-ran')
  const planted = queuedJobRecords(t, base, marker)
  const home = path.join(base, 'home')
  writeConfig(home)
  const dir = plant(home, planted, 0)

  // The spec alone another user's: the job fails to start, saying why.
  fs.chownSync(path.join(dir, 'spec.json'), NOBODY, NOBODY)
  const r = runBg(home, ['check', planted.id, '--json'])
  const ended = () => !['queued', 'running'].includes(readRegistry(home).find((j) => j.id === planted.id)?.status)
  await waitFor(ended, { timeout: 10_000, what: 'the queued job to be taken from the queue' })
  const failed = readRegistry(home).find((j) => j.id === planted.id)
  assert.equal(failed.status, 'failed', JSON.stringify(failed))
  assert.match(failed.error, /launch spec .*spec\.json: it is owned by uid 65534, not by you \(uid 0\)/, `${r.stdout}${r.stderr}`)
  assert.equal(fs.existsSync(marker), false)

  // A record another user owns is not taken for a job at all: it is listed
  // as a corrupt record, saying whose it is, and never run.
  const other = path.join(home, 'jobs', 'planted-000001')
  fs.mkdirSync(other, { mode: 0o700 })
  fs.writeFileSync(path.join(other, 'job.json'), JSON.stringify({ ...planted.record, id: 'planted-000001' }))
  fs.chownSync(path.join(other, 'job.json'), NOBODY, NOBODY)
  const list = runBg(home, ['list', '--all', '--json'])
  assert.equal(list.code, 0, list.stderr)
  const shown = JSON.parse(list.stdout).find((j) => j.jobId === 'planted-000001')
  assert.equal(shown?.status, 'corrupt', list.stdout)
  assert.match(shown.error, /job\.json cannot be read \(it is owned by uid 65534, not by you/)
  assert.equal(fs.existsSync(marker), false)
})

/** Every path under `dir` with its size, to see that nothing was written. */
function listTree(dir) {
  const out = []
  const walk = (d) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name)
      const st = fs.lstatSync(p)
      out.push(`${path.relative(dir, p)} ${st.isDirectory() ? 'dir' : st.size}`)
      if (st.isDirectory()) walk(p)
    }
  }
  walk(dir)
  return out
}

/** Whether this process may make a private mount namespace and remount in it. */
function mountNamespaceRefusal() {
  if (process.platform !== 'linux') return 'mount namespaces are Linux only'
  if (process.getuid() !== 0) return 'bind-mounting the home read-only needs root (in a private mount namespace)'
  const r = spawnSync('unshare', ['--mount', 'sh', '-c', 'd=$(mktemp -d) && mount --bind "$d" "$d" && mount -o remount,bind,ro "$d"; s=$?; umount "$d" 2>/dev/null; rmdir "$d"; exit $s'], { encoding: 'utf8' })
  if (r.error) return `unshare(1) cannot run: ${r.error.message}`
  if (r.status !== 0) return `a private mount namespace with a read-only bind mount is not permitted here: ${r.stderr.trim()}`
  return null
}

test('a read-only home keeps the outcome: shown while it cannot be written, recorded once it can; kill still kills and says what it could not record', async (t) => {
  const why = mountNamespaceRefusal()
  if (why) return t.skip(why)
  const base = scratch(t)
  const home = path.join(base, 'home')
  writeConfig(home)
  // One shell in one private mount namespace: the supervisors it starts and
  // the checks it runs all see the home read-only, then writable again.
  const script = `
    set -u
    ack() { sed 's/.*"jobId":"\\([^"]*\\)".*"pid":\\([0-9]*\\).*/\\1 \\2/'; }
    set -- $("$RB" --json -- sh -c 'sleep 1; exit 5' | ack); id=$1
    set -- $("$RB" --json -- sleep 30 | ack); victim=$1; victim_pid=$2
    echo "VICTIM $victim $victim_pid"
    mount --bind "$H" "$H" && mount -o remount,bind,ro "$H" || exit 90
    touch "$H/probe" 2>/dev/null && exit 91
    i=0
    while "$RB" check "$id" --json | grep -q '"status":"running"'; do
      i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.05
    done
    echo "WHILE_RO $("$RB" check "$id" --json)"
    start=$(date +%s%N)
    out=$("$RB" kill "$victim" 2>&1); code=$?
    echo "KILL $code $(( ($(date +%s%N) - start) / 1000000 )) $out"
    kill -0 "$victim_pid" 2>/dev/null && echo "VICTIM_ALIVE"
    echo "VICTIM_CHECK $("$RB" check "$victim" --json)"
    mount -o remount,bind,rw "$H" || exit 92
  `
  const r = spawnSync('unshare', ['--mount', 'sh', '-c', script], {
    env: { ...process.env, RB: RUN_BG, H: home, PROC_MANAGER_HOME: home },
    encoding: 'utf8',
    timeout: 60_000,
  })
  const victimLine = r.stdout.match(/^VICTIM (\S+) (\d+)$/m)
  if (victimLine) killAfter(t, Number(victimLine[2]))
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`)
  const line = (name) => r.stdout.match(new RegExp(`^${name} (.*)$`, 'm'))?.[1]

  // While read-only: the real outcome, from the supervisor that keeps it.
  const whileRo = JSON.parse(line('WHILE_RO'))
  assert.equal(whileRo.status, 'failed', JSON.stringify(whileRo))
  assert.equal(whileRo.exitCode, 5)
  assert.match(whileRo.error, /not recorded yet: .*Read-only file system/)

  // kill: the tree goes, at once, and it says what could not be recorded.
  const [, code, ms, said] = line('KILL').match(/^(\d+) (\d+) ([\s\S]*)$/)
  assert.equal(Number(code), 0, said)
  assert.match(said, /^killed \S+ \(killed\): 1 process\(es\) signalled/)
  assert.match(said, /its end could not be recorded \(.*Read-only file system.*\): its supervisor \(pid \d+\) keeps it/)
  assert.ok(Number(ms) < 2000, `kill took ${ms} ms`)
  assert.ok(!r.stdout.includes('VICTIM_ALIVE'), 'the killed job still runs')
  assert.equal(JSON.parse(line('VICTIM_CHECK')).status, 'killed')

  // Writable again: both outcomes are recorded, for good.
  const id = whileRo.jobId
  const victim = victimLine[1]
  await waitFor(() => {
    const jobs = readRegistry(home)
    return jobs.find((j) => j.id === id)?.status === 'failed' && jobs.find((j) => j.id === victim)?.status === 'killed'
  }, { timeout: 15_000, what: 'the kept outcomes to be recorded' })
  assert.equal(readRegistry(home).find((j) => j.id === id).exit_code, 5)
  const after = JSON.parse(runBg(home, ['check', id, '--json']).stdout)
  assert.equal(after.status, 'failed')
  assert.ok(!after.error, `recorded: no note left (${after.error})`)
})

/**
 * How to run a command as a user other than root inside a user namespace
 * (`unshare -r`), where `/` and `/tmp` show as owned by the overflow uid:
 * root steps down to uid 1000 first (as root, `unshare -r` maps root to
 * itself). `null` and why when this machine does not allow it.
 */
function inUserNamespace() {
  const prefix = process.getuid() === 0 ? ['setpriv', '--reuid=1000', '--regid=1000', '--clear-groups', 'unshare', '-r'] : ['unshare', '-r']
  const probe = spawnSync(prefix[0], [...prefix.slice(1), 'stat', '-c', '%u', '/'], { encoding: 'utf8' })
  if (probe.status !== 0) return { skip: `cannot enter a user namespace here (${prefix.join(' ')}): ${probe.stderr || probe.error}`.trim() }
  if (probe.stdout.trim() === '0') return { skip: 'in this user namespace / shows as owned by root: nothing to test' }
  return { prefix }
}
const userNamespace = inUserNamespace()

test('inside a user namespace (bubblewrap, unshare -r) a home under / and /tmp owned by the overflow uid is used', { skip: userNamespace.skip }, async (t) => {
  const base = scratch(t)
  // Reachable by uid 1000 when root steps down to it; its own directory inside.
  fs.chmodSync(base, 0o711)
  const mine = path.join(base, 'mine')
  fs.mkdirSync(mine, { mode: 0o700 })
  if (process.getuid() === 0) fs.chownSync(mine, 1000, 1000)
  const home = path.join(mine, 'pm')
  const [cmd, ...prefixArgs] = userNamespace.prefix
  // Started and waited for in the namespace: the job's end is recorded before it is left.
  // The home and its config are made in there too (the notifier off: with
  // the default URL it would retry, its supervisor waiting, into the clean-up;
  // the config is also what the clean-up finds the home by).
  const script = 'set -e; mkdir -m 700 "$PROC_MANAGER_HOME"; echo \'{"notify":{"url":null}}\' > "$PROC_MANAGER_HOME/config.json"; id=$("$0" --json -- sh -c "exit 4" | sed -n \'s/.*"jobId":"\\([^"]*\\)".*/\\1/p\'); "$0" wait "$id" >/dev/null || true; "$0" check "$id" --json'
  const r = spawnSync(cmd, [...prefixArgs, 'sh', '-c', script, RUN_BG], {
    encoding: 'utf8',
    env: { ...process.env, PROC_MANAGER_HOME: home },
    timeout: 30_000,
  })
  assert.equal(r.status, 0, `started, waited for and checked in the namespace: ${r.stdout}${r.stderr}`)
  assert.doesNotMatch(r.stderr, /refusing|not safe/, r.stderr)
  const checked = JSON.parse(r.stdout)
  assert.equal(checked.status ?? checked.job?.status, 'failed', r.stdout)
})

test('a home whose parent became unsafe: list, check and kill still work with a warning naming the directory and the fix; start is refused', async (t) => {
  const base = scratch(t)
  const parent = path.join(base, 'parent')
  fs.mkdirSync(parent, { mode: 0o755 })
  const home = path.join(parent, 'home')
  writeConfig(home)
  const ack = startJob(home, ['sleep', '60'])
  killAfter(t, ack.pid)
  // An older version took such a home; or the directory was opened up since.
  fs.chmodSync(parent, 0o777)
  const warning = new RegExp(`warning: .*parent directory ${parent} is writable.*chmod go-w ${parent}`)

  let r = runBg(home, ['list', '--json'])
  assert.equal(r.code, 0, `list works: ${r.stderr}`)
  assert.match(r.stderr, warning)
  assert.ok(JSON.parse(r.stdout).some((j) => (j.id ?? j.jobId) === ack.jobId), r.stdout)
  r = runBg(home, ['check', ack.jobId])
  assert.equal(r.code, 0, `check works: ${r.stderr}`)
  assert.match(r.stderr, warning)

  r = runBg(home, ['--', 'true'])
  assert.equal(r.code, 2, `start is refused: ${r.stdout}${r.stderr}`)
  assert.match(r.stderr, new RegExp(`refusing to start a job in the proc-manager home ${home}: its parent directory ${parent} is writable`))

  r = runBg(home, ['kill', ack.jobId])
  assert.equal(r.code, 0, `kill works: ${r.stdout}${r.stderr}`)
  assert.match(r.stderr, warning)
  await waitFor(() => processStart(ack.pid) === null, { what: 'the job to be killed' })
})

test('a supervisor whose home is removed (rm -rf) before it can record the end gives up and exits', async (t) => {
  const base = scratch(t)
  const home = path.join(base, 'home')
  writeConfig(home)
  const ack = startJob(home, ['sh', '-c', 'sleep 1; exit 3'])
  killAfter(t, ack.pid)
  const supervisor = JSON.parse(fs.readFileSync(path.join(home, 'jobs', ack.jobId, 'job.json'), 'utf8')).supervisor.pid
  const supervisorStart = processStart(supervisor)
  killAfter(t, supervisor)
  fs.rmSync(home, { recursive: true, force: true })
  // The job ends after 1 s; its end can be written nowhere: the supervisor
  // must not stay for ever retrying.
  await waitFor(() => processStart(supervisor) !== supervisorStart, { timeout: 10_000, what: 'the supervisor to exit' })
})

test('a supervisor holding only an end it cannot write (read-only home) ends on SIGTERM', async (t) => {
  const why = mountNamespaceRefusal()
  if (why) return t.skip(why)
  const base = scratch(t)
  const home = path.join(base, 'home')
  writeConfig(home)
  const script = `
    set -u
    id=$("$RB" --json -- sh -c 'sleep 1; exit 5' | sed 's/.*"jobId":"\\([^"]*\\)".*/\\1/')
    sup=$("$NODE" -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).supervisor.pid)' "$H/jobs/$id/job.json")
    echo "SUPERVISOR $sup"
    mount --bind "$H" "$H" && mount -o remount,bind,ro "$H" || exit 90
    deadline=$(($(date +%s) + 40))
    until "$RB" check "$id" --json | grep -q 'not recorded yet'; do
      [ "$(date +%s)" -gt "$deadline" ] && exit 93; sleep 0.05
    done
    kill -TERM "$sup"
    deadline=$(($(date +%s) + 10))
    while kill -0 "$sup" 2>/dev/null; do
      [ "$(date +%s)" -gt "$deadline" ] && break; sleep 0.05
    done
    if kill -0 "$sup" 2>/dev/null; then echo STAYED; kill -KILL "$sup"; else echo ENDED; fi
    mount -o remount,bind,rw "$H" || exit 92
  `
  const r = spawnSync('unshare', ['--mount', 'sh', '-c', script], {
    env: { ...process.env, RB: RUN_BG, H: home, NODE: process.execPath, PROC_MANAGER_HOME: home },
    encoding: 'utf8',
    timeout: 90_000,
  })
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`)
  assert.match(r.stdout, /^ENDED$/m, `the supervisor stayed 10 s after SIGTERM: ${r.stdout}${r.stderr}`)
})
