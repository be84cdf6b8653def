// The `log` group of bench/run.mjs (`--only=log`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { BUILDS, FINAL, MiB, PLAN, ROTATING, RUN_BG, UNBOUNDED, check, envFor, log, now, option, q, readJobs, removeDir, settle, shuffler, spawnChild, startJson, tempDir, withBuild, writeConfig } from './kit.mjs'

// ------------------------------------------------------------ 3. log throughput

/**
 * Resolves when `jobs.json` in `home` records job `id` as ended, woken by
 * inotify on `home` only: a watch on the job's directory would wake us for
 * every write into its log (the job timed then shares its cores with our
 * reads of the registry: 1 GiB of `yes` took 1.33× the `cat` pipe's time
 * observed that way, 1.13× observed through `home`, medians of 5).
 */
export function whenEnded(home) {
  let id = null
  let settle
  let finished = false
  const done = new Promise((resolve, reject) => {
    settle = { resolve, reject }
  })
  const look = () => {
    const job = id && readJobs(home).find((j) => j.id === id)
    if (job && FINAL.has(job.status)) finish(null, { t: now(), job })
  }
  const watcher = fs.watch(home, look)
  // A safety net only: inotify sees the registry's rename first. Rare, so
  // that the bench's own reads take no CPU from the job it times (the shell
  // baseline has nothing beside it).
  const poll = setInterval(look, 250)
  const timer = setTimeout(() => finish(new Error(`job ${id} did not end in 300 s`)), 300_000)
  function finish(error, value) {
    if (finished) return
    finished = true
    watcher.close()
    clearInterval(poll)
    clearTimeout(timer)
    error ? settle.reject(error) : settle.resolve(value)
  }
  return {
    track(jobId) {
      id = jobId
      look()
      return done
    },
  }
}

/** output.log* of a job: name, size, and first and last byte (to see where rotation cut). */
export function logFiles(log) {
  const dir = path.dirname(log)
  return fs
    .readdirSync(dir)
    .filter((f) => /^output\.log(\.\d+)?$/.test(f))
    .map((name) => {
      const fd = fs.openSync(path.join(dir, name), 'r')
      const size = fs.fstatSync(fd).size
      const byteAt = (pos) => {
        const b = Buffer.alloc(1)
        return size && fs.readSync(fd, b, 0, 1, pos) ? b[0] : null
      }
      const file = { name, size, first: byteAt(0), last: byteAt(size - 1) }
      fs.closeSync(fd)
      return file
    })
}

export async function runOurs(dir, argv, logs) {
  writeConfig(dir, { logs })
  const ended = whenEnded(dir)
  const t0 = now()
  const { jobId } = startJson(dir, argv, 'tp')
  const waiter = spawnChild(RUN_BG, ['wait', jobId], { env: envFor(dir), stdio: 'ignore' })
  const { t, job } = await ended.track(jobId)
  const waited = await waiter.exited
  const files = logFiles(job.log_path)
  const retained = files.reduce((sum, f) => sum + f.size, 0)
  return { seconds: (t - t0) / 1000, waitSeconds: (waited.t - t0) / 1000, waitCode: waited.code, status: job.status, retained, files }
}

export async function benchThroughput(size) {
  const producers = {
    zero: { ours: ['head', '-c', String(size), '/dev/zero'], shell: `head -c ${size} /dev/zero` },
    yes: { ours: ['sh', '-c', `yes | head -c ${size}`], shell: `yes | head -c ${size}` },
  }
  const variants = {
    shell: async (dir, p) => {
      const file = path.join(dir, 'FILE')
      const t0 = now()
      const r = spawnSync('sh', ['-c', `${p.shell} | cat > ${q(file)}`], { stdio: 'ignore' })
      const seconds = (now() - t0) / 1000
      if (r.status !== 0) throw new Error(`baseline pipeline exited ${r.status}`)
      return { seconds, retained: fs.statSync(file).size }
    },
    // The same, with the file's removal timed too: a rotating log frees what
    // it drops while the job writes (page cache, blocks), which the plain
    // pipe pays only after its timing, when the bench removes its file.
    shellRm: async (dir, p) => {
      const file = path.join(dir, 'FILE')
      const size = path.join(dir, 'SIZE')
      const t0 = now()
      const r = spawnSync('sh', ['-c', `${p.shell} | cat > ${q(file)} && wc -c < ${q(file)} > ${q(size)} && rm ${q(file)}`], { stdio: 'ignore' })
      const seconds = (now() - t0) / 1000
      if (r.status !== 0) throw new Error(`baseline pipeline with rm exited ${r.status}`)
      return { seconds, retained: Number(fs.readFileSync(size, 'utf8')) }
    },
  }
  for (const build of BUILDS) {
    const suffix = build === BUILDS[0] ? '' : `@${build.name}`
    variants[`ours${suffix}`] = (dir, p) => withBuild(build, () => runOurs(dir, p.ours, ROTATING))
    variants[`oursUnbounded${suffix}`] = (dir, p) => withBuild(build, () => runOurs(dir, p.ours, UNBOUNDED))
  }
  const reps = Number(option('log-reps') ?? PLAN.logReps)
  const shuffle = shuffler(Number(option('seed') ?? 1))
  const pairs = Object.keys(producers).flatMap((pname) => Object.keys(variants).map((vname) => [pname, vname]))
  log(`log throughput: ${size / MiB} MiB × ${reps} reps × ${pairs.length} (producer, variant) pairs, shuffled each rep, settled before each sample`)
  const samples = {}
  for (let rep = 0; rep < reps; rep++) {
    for (const [pname, vname] of shuffle(pairs)) {
      const producer = producers[pname]
      const dir = tempDir('log')
      const settled = await settle() // untimed
      const r = { ...(await variants[vname](dir, producer)), settled }
      removeDir(dir)
      ;(samples[`${pname}.${vname}`] ??= []).push(r)
      log(`  rep ${rep} ${pname}.${vname}: ${r.seconds.toFixed(2)} s (load ${settled.load1.toFixed(2)}, settled in ${settled.waitedMs.toFixed(0)} ms)`)
      const what = `log ${pname}.${vname} rep ${rep}`
      if (vname === 'shell' || vname === 'shellRm') {
        check(`${what}: every byte written`, r.retained === size, `${r.retained}`)
        continue
      }
      check(`${what}: job succeeded, wait exited 0`, r.status === 'success' && r.waitCode === 0, `${r.status}, wait ${r.waitCode}`)
      if (vname.startsWith('oursUnbounded')) {
        check(`${what}: every byte logged`, r.retained === size, `${r.retained}`)
        continue
      }
      const sizes = r.files.map((f) => `${f.name}=${f.size}`).join(' ')
      check(`${what}: each file ≤ max_bytes, at most keep rotated`, r.files.length <= ROTATING.keep + 1 && r.files.every((f) => f.size <= ROTATING.max_bytes), sizes)
      if (pname === 'yes') {
        const rotated = r.files.filter((f) => f.name !== 'output.log')
        const aligned = r.files.every((f) => f.first === 0x79) && rotated.every((f) => f.last === 0x0a)
        check(`${what}: rotated files hold whole lines`, aligned, JSON.stringify(r.files))
      }
    }
  }
  return samples
}

/** The log samples as one build's rows read them: its own `ours*` under the plain names, the shared shell baseline. */
export function throughputOf(samples, build) {
  if (!samples) return null
  const suffix = build === BUILDS[0] ? '' : `@${build.name}`
  const out = {}
  for (const p of ['zero', 'yes']) {
    out[`${p}.shell`] = samples[`${p}.shell`]
    out[`${p}.shellRm`] = samples[`${p}.shellRm`]
    out[`${p}.ours`] = samples[`${p}.ours${suffix}`]
    out[`${p}.oursUnbounded`] = samples[`${p}.oursUnbounded${suffix}`]
  }
  return out
}
