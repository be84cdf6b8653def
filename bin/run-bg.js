#!/usr/bin/env node
// The Node shim: it runs the native run-bg (see platform.js for where it is
// looked for) with inherited stdio and passes its exit status on. The linked
// command is bin/run-bg, a sh launcher that execs run-bg itself; it hands
// this shim what it cannot decide, such as a missing platform package (the
// message here then says what to install). Run with node, bin/run-bg is this
// shim too.
'use strict'
const { spawnSync } = require('node:child_process')
const { findRunBg } = require('../platform.js')

let binary
try {
  binary = findRunBg()
} catch (error) {
  console.error(error.message)
  process.exit(1)
}
// `run-bg --tie` ties a job to whoever ran run-bg: that is our caller, not
// this shim, which exits with run-bg. The binary trusts this only when the
// shim (this pid) is its parent.
const env = { ...process.env, PROC_MANAGER_TIE_PARENT: `${process.pid}:${process.ppid}` }
const result = spawnSync(binary, process.argv.slice(2), { stdio: 'inherit', env })
if (result.error) {
  const how = process.env.PROC_MANAGER_BINARY_PATH === binary ? ' (from PROC_MANAGER_BINARY_PATH)' : ''
  console.error(`run-bg: cannot run ${binary}${how}: ${result.error.message}`)
  process.exit(1)
}
if (result.signal) process.kill(process.pid, result.signal)
process.exit(result.status ?? 1)
