#!/usr/bin/env node
// npm links `bin` entries at install time, before the native binary exists,
// so the bin is this shim: it runs the native run-bg with inherited stdio and
// passes its exit status on.
'use strict'
const { spawnSync } = require('node:child_process')
const path = require('node:path')

const binary = process.env.PROC_MANAGER_SUPERVISOR || path.join(__dirname, '..', 'native', 'run-bg')
const result = spawnSync(binary, process.argv.slice(2), { stdio: 'inherit' })
if (result.error) {
  console.error(`run-bg: cannot run ${binary}: ${result.error.message} (was the package built? run \`npm run build\`)`)
  process.exit(1)
}
if (result.signal) process.kill(process.pid, result.signal)
process.exit(result.status ?? 1)
