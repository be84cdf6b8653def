// What the three harness drivers (claude.mjs, codex.mjs, gemini.mjs) share:
// where scripts/install-harnesses.sh puts the harnesses, an installed
// package's version, and whether a private network namespace (where each
// harness runs against its stub, loopback only) can be made here.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

export const HARNESS_DIR = process.env.PM_HARNESS_DIR || path.join(os.homedir(), '.cache', 'proc-manager-harnesses')

/** An installed npm package's directory under HARNESS_DIR (`@openai/codex`). */
export const packageDir = (name) => path.join(HARNESS_DIR, 'node_modules', ...name.split('/'))

/** The installed version of package `name` (its package.json), or null. */
export function packageVersion(name) {
  try {
    return JSON.parse(fs.readFileSync(path.join(packageDir(name), 'package.json'), 'utf8')).version
  } catch {
    return null
  }
}

/** `unshare`'s flags for a network namespace: root needs no user namespace. */
export const UNSHARE_NET = process.getuid?.() === 0 ? ['-n'] : ['-r', '-n']

let netnsChecked
/** Why a private network namespace with `lo` up cannot be made here, or null when it can. */
export function netnsSkipReason() {
  if (netnsChecked !== undefined) return netnsChecked
  const args = [...UNSHARE_NET, 'sh', '-c', 'ip link set lo up && echo up']
  const r = spawnSync('unshare', args, { encoding: 'utf8', timeout: 10_000 })
  if (r.error) netnsChecked = `unshare not usable: ${r.error.message}`
  else if (r.status !== 0 || !r.stdout.includes('up')) netnsChecked = `cannot make a private network namespace (unshare ${args.join(' ')}: exit ${r.status}: ${r.stderr.trim()})`
  else netnsChecked = null
  return netnsChecked
}
