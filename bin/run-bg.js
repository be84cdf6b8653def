#!/usr/bin/env node
// The run-bg command npm links (node_modules/.bin/run-bg, run-bg.cmd and
// run-bg.ps1 on Windows; on PATH after `npm install -g`): it runs the native
// run-bg (see platform.js for where it is looked for) with inherited stdio
// and passes its exit status and signal on, or says what to install when
// there is none.
//
// Why a Node script and not a launcher without Node: npm links one file for
// every platform, and on Windows cmd-shim writes run-bg.cmd/.ps1 to run the
// interpreter named on this file's #! line. A `#!/bin/sh` launcher (the one
// before this, a few ms on Linux) made them call sh, which a Windows without
// Git Bash lacks; no #! line is read as sh by every Unix kernel and as node
// by cmd-shim (`env -S` could, but busybox's env, Alpine's, has no -S), and
// a platform package's own bin loses to this package's (npm links the first
// bin of a name in path order, and `npm install -g` links only this one).
// So the command costs a Node start (bench/run.mjs's bin rows); for a tight
// loop run the platform package's native/run-bg, which findRunBg names.
'use strict'
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const { constants } = require('node:os')
const { findRunBg } = require('../platform.js')

let binary
try {
  binary = findRunBg()
} catch (error) {
  console.error(error.message)
  process.exit(1)
}
const args = process.argv.slice(2)

// `npx run-bg …` (npm sets npm_command=exec): npm runs this through a
// `sh -c` of its own that exits with us, and on a signal ends that shell
// alone. So the caller is the process that ran npx, and npx ended (our
// parent gone) ends run-bg, as a signal to us would.
const underNpx = process.env.npm_command === 'exec' && process.platform !== 'win32'

/** A process's parent and command line, or null. */
function parentAndCommand(pid) {
  try {
    if (process.platform === 'linux') {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
      // The name in parentheses may hold spaces and parentheses itself.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      const command = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
      return { ppid, command }
    }
    const ps = spawnSync('ps', ['-o', 'ppid=,command=', '-p', String(pid)], { encoding: 'utf8' })
    const found = /^\s*(\d+)\s+(.*)$/.exec(ps.stdout?.trim() ?? '')
    return found && { ppid: Number(found[1]), command: found[2] }
  } catch {
    return null
  }
}

/**
 * Under npx, the process that ran npx: past npm's `sh -c` (gone where sh is
 * bash, which execs its last command) and npm itself; else null.
 */
function npxCaller() {
  let npm = parentAndCommand(process.ppid)
  if (npm && /^(\S*\/)?(sh|bash|dash|zsh) /.test(npm.command)) npm = parentAndCommand(npm.ppid)
  if (!npm || !/^npm exec\b|npx-cli\.js|npm-cli\.js|^(\S*\/)?npx /.test(npm.command)) return null
  return npm.ppid > 1 ? npm.ppid : null
}
const npxParent = underNpx ? npxCaller() : null

// `run-bg --tie` ties a job to whoever ran run-bg: that is our caller, not
// this shim, which exits with run-bg. The binary trusts this only when the
// shim (this pid) is its parent.
const caller = npxParent || process.ppid
const env = { ...process.env, PROC_MANAGER_TIE_PARENT: `${process.pid}:${caller}` }

function cannotRun(error) {
  const how = process.env.PROC_MANAGER_BINARY_PATH === binary ? ' (from PROC_MANAGER_BINARY_PATH)' : ''
  console.error(`run-bg: cannot run ${binary}${how}: ${error.message}`)
  process.exit(1)
}

if (process.platform === 'win32') {
  // No signals to pass on (Ctrl+C reaches every process of the console),
  // so run-bg runs to its end while we wait. (Under wine, a child started
  // with spawn and inherited pipes kept our caller's pipes open after we
  // exited; spawnSync does not.)
  const result = spawnSync(binary, args, { stdio: 'inherit', env })
  if (result.error) cannotRun(result.error)
  process.exit(result.status ?? 1)
}

// A signal sent to this process alone (a tool's timeout kills the pid it
// started) reaches run-bg as well, so no `run-bg wait` or `logs --follow`
// outlives the command that was killed; one that comes before run-bg is
// started is passed on once it is.
const passed = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT']
let child = null
let early = null
for (const signal of passed) process.on(signal, () => (child ? child.kill(signal) : (early = signal)))
child = spawn(binary, args, { stdio: 'inherit', env })
if (early) child.kill(early)
// Only where npm was found above us: a run-bg merely handed npm_command by
// a tool npx started, whose own parent may well exit first, runs on.
if (npxParent) {
  const parent = process.ppid
  const watch = setInterval(() => {
    if (process.ppid !== parent) {
      clearInterval(watch)
      child.kill('SIGTERM')
    }
  }, 200)
  watch.unref()
}
child.on('error', cannotRun)
child.on('exit', (code, signal) => {
  if (signal) {
    // Ended by a signal: end by the same one, as the shell that ran us
    // expects; one Node ignores (SIGPIPE) gives 128 + its number instead.
    for (const s of passed) process.removeAllListeners(s)
    process.kill(process.pid, signal)
    process.exit(128 + (constants.signals[signal] ?? 0))
  }
  process.exit(code ?? 1)
})
