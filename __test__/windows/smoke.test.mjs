// The Windows suite's placeholder: run by scripts/test-windows.sh with the
// Windows node.exe under wine (x86_64-pc-windows-gnu). It loads nothing of
// proc-manager; it shows the runner, its per-file subprocess and a child's
// exit code work there. Every test in __test__/windows/ skips elsewhere, as
// `npm test` on Linux also walks this directory.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'

const skip = process.platform !== 'win32' && 'Windows only (scripts/test-windows.sh runs it under wine)'

test('runs on win32 x64', { skip }, () => {
  assert.equal(process.platform, 'win32')
  assert.equal(process.arch, 'x64')
})

test('a child\'s exit code comes back: cmd /c exit 3 gives 3', { skip }, () => {
  const r = spawnSync('cmd', ['/c', 'exit 3'], { encoding: 'utf8' })
  assert.equal(r.error, undefined)
  assert.equal(r.status, 3)
})

test('a child\'s piped stdout comes back: node -e prints and exits 4', { skip }, () => {
  const r = spawnSync(process.execPath, ['-e', 'console.log("from child"); process.exit(4)'], { encoding: 'utf8' })
  assert.equal(r.stdout.trim(), 'from child')
  assert.equal(r.status, 4)
})
