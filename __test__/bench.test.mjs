// The bench runs from a fresh clone: nothing it needs may be a file that git
// ignores (bench/out is one).
import test from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { root } from './helpers.mjs'

/** The bench's committed files, as a clone has them. */
function committedBenchFiles() {
  const r = spawnSync('git', ['ls-files', '-z', 'bench'], { cwd: root, encoding: 'utf8' })
  if (r.status === 0 && r.stdout) return r.stdout.split('\0').filter(Boolean)
  // Not a git checkout: what is there, less what the bench itself makes.
  return fs.readdirSync(path.join(root, 'bench')).filter((f) => f !== 'out').map((f) => path.join('bench', f))
}

test('the bench runs in a checkout without bench/out, as a fresh clone is', (t) => {
  if (spawnSync('gcc', ['--version']).status !== 0) {
    t.skip('no gcc: the bench compiles bench/statloop.c with it')
    return
  }
  // A copy of the checkout's bench beside links to the built package: the
  // bench finds everything relative to its own directory.
  const clone = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-bench-clone-'))
  t.after(() => fs.rmSync(clone, { recursive: true, force: true }))
  for (const file of committedBenchFiles()) {
    fs.mkdirSync(path.dirname(path.join(clone, file)), { recursive: true })
    fs.copyFileSync(path.join(root, file), path.join(clone, file))
  }
  const built = fs.readdirSync(root).filter((f) => f.endsWith('.node'))
  // __test__: the harness group drives Claude Code with the tests' stub and driver.
  for (const name of ['package.json', 'index.js', 'native', 'node_modules', '__test__', ...built]) {
    fs.symlinkSync(path.join(root, name), path.join(clone, name))
  }
  assert.ok(!fs.existsSync(path.join(clone, 'bench', 'out')))
  // The snapshot group is the one that compiles the C loop into bench/out.
  const r = spawnSync(process.execPath, [path.join(clone, 'bench', 'run.mjs'), '--quick', '--only=snapshot'], {
    cwd: clone, encoding: 'utf8', timeout: 300_000,
  })
  assert.equal(r.status, 0, `bench failed:\n${r.stderr}\n${r.stdout}`)
  const results = JSON.parse(fs.readFileSync(path.join(clone, 'bench', 'out', 'results.json'), 'utf8'))
  assert.ok(results.rows.length > 0, 'results.json has the table')
})
