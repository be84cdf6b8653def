// index.d.ts is generated: `node scripts/options-dts.mjs` writes it from the
// one definition of each part (the options from the core's schemas, the
// functions from the addon's #[napi] items), and this is the check CI runs
// (`npm test` takes every file here): a file that differs from what the
// generator writes fails, naming what to run. Each way it can go stale is
// planted below and must be caught.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { root, pm } from './helpers.mjs'
import { rewritten, napiFunctions } from '../scripts/options-dts.mjs'

const dtsPath = path.join(root, 'index.d.ts')
const generate = (dts) => rewritten(dts, pm.startOptionsSchema(), pm.verbOptionsSchema(), napiFunctions())

test('index.d.ts is what scripts/options-dts.mjs writes (run `npm run build && node scripts/options-dts.mjs`)', () => {
  const dts = fs.readFileSync(dtsPath, 'utf8')
  const next = generate(dts)
  if (next !== dts) {
    const [a, b] = [dts.split('\n'), next.split('\n')]
    const at = a.findIndex((line, i) => line !== b[i])
    assert.fail(`index.d.ts differs from the generator's output from line ${at + 1}:\n  file:      ${a[at]}\n  generated: ${b[at]}`)
  }
  assert.equal(generate(next), next, 'the generator writes the same file again')
})

test('every function the addon exports is declared from its #[napi] item, and only those', () => {
  const functions = napiFunctions()
  const exported = Object.keys(pm).filter((name) => typeof pm[name] === 'function' && !/^[A-Z]/.test(name))
  const jsOnly = ['jobEvents']
  assert.deepEqual(exported.filter((name) => !functions.has(name) && !jsOnly.includes(name)), [], 'exports no #[napi] item declares')
  assert.deepEqual([...functions.keys()].filter((name) => !exported.includes(name)), [], '#[napi] items the addon does not export')
  for (const [name, { doc }] of functions) assert.ok(doc.join(' ').length > 20, `${name}: its #[napi] item has a doc`)
})

test('a stale index.d.ts is caught: a function\'s doc or signature edited by hand, an option left out, a function missing or gone', () => {
  const dts = generate(fs.readFileSync(dtsPath, 'utf8'))
  const planted = [
    dts.replace(/^export declare function checkJob\(jobId: string/m, 'export declare function checkJob(id: string'),
    dts.replace(/(\n \* )(Kills every running job)/, '$1Kills each running job'),
    dts.replace(/(export interface ReadLogOptions \{\n)[\s\S]*?\n(  fromLine\?: number\n)/, '$1'),
    dts.replace(/(export interface UpOptions \{\n[\s\S]*?)  outliveSession\?: boolean\n/, '$1'),
  ]
  planted.forEach((stale, i) => {
    assert.notEqual(stale, dts, `plant ${i} took`)
    assert.notEqual(generate(stale), stale, `plant ${i}: the check would fail`)
    assert.equal(generate(stale), dts, `plant ${i}: the generator mends it`)
  })
  const withoutFunction = dts.replace(/^export declare function reconcile\(\): ReconcileResult\n/m, '')
  assert.throws(() => generate(withoutFunction), /no place for reconcile/)
  const withGone = dts.replace(/^(export declare function reconcile\(\): ReconcileResult\n)/m, '$1export declare function reconciled(): void\n')
  assert.throws(() => generate(withGone), /declares functions the addon has not: reconciled/)
})
