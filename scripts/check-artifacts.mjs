#!/usr/bin/env node
// Checks a platform package directory (npm/<abi>/) against what its
// package.json promises, without running anything from it:
//   - the addon (`main`) and native/run-bg (native/run-bg.exe for win32)
//     exist; run-bg is executable;
//   - both are ELF files (PE files for win32) for the package's `cpu`;
//   - win32: the addon takes napi_* from node.exe, the process that loads it
//     (not from a libnode.dll, which no Node ships);
//   - glibc packages need no symbol version above GLIBC_FLOOR;
//   - musl packages: run-bg is static (no loader, no shared library), and
//     the addon needs no glibc library.
// Prints each file's size. Exits 1 naming every failed check.
//
// usage: node scripts/check-artifacts.mjs npm/<abi> [...]
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

// Rust's std supports glibc back to 2.17 and napi-rs's own prebuilt packages
// target it; our code asks for nothing newer (pidfd_open is a raw syscall;
// std looks up statx, gettid and the like at run time and falls back).
export const GLIBC_FLOOR = '2.17'

const ELF_MACHINE = { x64: 62, arm64: 183 }
const PE_MACHINE = { x64: 0x8664, arm64: 0xaa64 }

/** A PE file's COFF machine, or null if `file` is no PE file. */
function peMachine(file) {
  const fd = fs.openSync(file, 'r')
  try {
    const dos = Buffer.alloc(64)
    if (fs.readSync(fd, dos, 0, 64, 0) < 64 || dos.toString('latin1', 0, 2) !== 'MZ') return null
    const pe = Buffer.alloc(6)
    fs.readSync(fd, pe, 0, 6, dos.readUInt32LE(0x3c))
    return pe.toString('latin1', 0, 4) === 'PE\0\0' ? pe.readUInt16LE(4) : null
  } finally {
    fs.closeSync(fd)
  }
}

/** The DLLs a PE file imports (mingw's objdump), or null without that objdump. */
function peImports(file) {
  const out = spawnSync('x86_64-w64-mingw32-objdump', ['-p', file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (out.error || out.status !== 0) return null
  return [...out.stdout.matchAll(/DLL Name: (\S+)/g)].map((m) => m[1])
}

function compareVersions(a, b) {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number))
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0)
    if (d) return d
  }
  return 0
}

function readelf(args, file) {
  const out = spawnSync('readelf', [...args, '--wide', file], { encoding: 'utf8' })
  if (out.error) throw new Error(`cannot run readelf (binutils): ${out.error.message}`)
  if (out.status !== 0) throw new Error(`readelf ${args.join(' ')} ${file} failed: ${out.stderr.trim()}`)
  return out.stdout
}

/** The newest GLIBC_x.y symbol version a file needs, or null if none. */
export function glibcNeeded(file) {
  const versions = [...readelf(['--version-info'], file).matchAll(/Name: GLIBC_([0-9.]+)/g)].map((m) => m[1])
  return versions.sort(compareVersions).at(-1) ?? null
}

function elfMachine(file) {
  const fd = fs.openSync(file, 'r')
  try {
    const header = Buffer.alloc(20)
    fs.readSync(fd, header, 0, 20, 0)
    if (header.readUInt32BE(0) !== 0x7f454c46) return null
    return header[5] === 1 ? header.readUInt16LE(18) : header.readUInt16BE(18)
  } finally {
    fs.closeSync(fd)
  }
}

/** Returns { files: [{ file, size, note }], problems: [string] } for one npm/<abi> directory. */
export function checkPackage(dir) {
  const problems = []
  const files = []
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
  const [os] = manifest.os ?? []
  const [cpu] = manifest.cpu ?? []
  const [libc] = manifest.libc ?? []
  const addon = path.join(dir, manifest.main)
  const runBg = path.join(dir, (manifest.files ?? []).find((f) => f.startsWith('native/')) ?? 'native/run-bg')
  for (const file of [addon, runBg]) {
    const name = path.relative(process.cwd(), file)
    if (!fs.existsSync(file)) {
      problems.push(`${name} does not exist`)
      continue
    }
    const entry = { file: name, size: fs.statSync(file).size, notes: [] }
    files.push(entry)
    if (file === runBg && !(fs.statSync(file).mode & 0o111)) problems.push(`${name} is not executable`)
    if (os === 'win32') {
      const machine = peMachine(file)
      if (machine === null) problems.push(`${name} is not a PE file`)
      else if (machine !== PE_MACHINE[cpu]) problems.push(`${name} is built for PE machine 0x${machine.toString(16)}, not ${cpu}`)
      const imports = machine === null ? null : peImports(file)
      if (imports) {
        entry.notes.push(`imports ${imports.join(', ')}`)
        if (file === addon && !imports.some((d) => d.toLowerCase() === 'node.exe')) problems.push(`${name} does not import napi_* from node.exe`)
      }
      continue
    }
    if (os !== 'linux') continue
    const machine = elfMachine(file)
    if (machine === null) problems.push(`${name} is not an ELF file`)
    else if (machine !== ELF_MACHINE[cpu]) problems.push(`${name} is built for ELF machine ${machine}, not ${cpu} (${ELF_MACHINE[cpu]})`)
    if (machine === null) continue
    const needed = [...readelf(['--dynamic'], file).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1])
    if (libc === 'glibc') {
      const version = glibcNeeded(file)
      entry.notes.push(`needs GLIBC_${version ?? '(none)'}`)
      if (version && compareVersions(version, GLIBC_FLOOR) > 0) {
        problems.push(`${name} needs GLIBC_${version}, above the GLIBC_${GLIBC_FLOOR} floor`)
      }
    } else if (libc === 'musl') {
      const glibcLibs = needed.filter((lib) => /^(libc\.so\.6|ld-linux|libpthread\.so|libdl\.so)/.test(lib))
      if (glibcLibs.length) problems.push(`${name} needs glibc libraries: ${glibcLibs.join(', ')}`)
      if (file === runBg) {
        const interp = /Requesting program interpreter: ([^\]]+)\]/.exec(readelf(['--program-headers'], file))
        if (interp || needed.length) {
          problems.push(`${name} is not static (interpreter ${interp?.[1] ?? 'none'}; needs ${needed.join(', ') || 'nothing'})`)
        } else entry.notes.push('static')
      } else entry.notes.push(`needs ${needed.join(', ') || 'nothing'}`)
    }
  }
  return { files, problems }
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dirs = process.argv.slice(2)
  if (!dirs.length) {
    console.error('usage: check-artifacts.mjs npm/<abi> [...]')
    process.exit(2)
  }
  let failed = false
  for (const dir of dirs) {
    if (!fs.existsSync(path.join(dir, 'package.json'))) {
      console.error(`check-artifacts: ${dir} has no package.json (expected a platform package directory such as npm/linux-x64-gnu)`)
      failed = true
      continue
    }
    const { files, problems } = checkPackage(dir)
    for (const f of files) {
      console.log(`${f.file}: ${f.size} bytes (${(f.size / 1048576).toFixed(2)} MiB)${f.notes.length ? `, ${f.notes.join(', ')}` : ''}`)
    }
    for (const p of problems) console.error(`check-artifacts: ${p}`)
    failed ||= problems.length > 0
  }
  process.exit(failed ? 1 : 0)
}
