#!/usr/bin/env node
// Writes LIBNODE_PATH for an x86_64-pc-windows-gnu build of the addon:
// napi-build (crates/node/build.rs) links a windows-gnu addon against
// `-lnode` from LIBNODE_PATH, so the addon imports its napi_* functions from
// node.exe, the process that loads it. No Node release ships a MinGW import
// library, so this makes one from node.exe's own export table:
//
//   <dir>/node.def       LIBRARY node.exe + every napi_* / node_api_* export
//   <dir>/libnode.dll.a  dlltool's import library from it (what ld links)
//   <dir>/libnode.dll    empty: napi-build insists the file exists; ld takes
//                        libnode.dll.a first
//
// usage: node scripts/node-import-lib.mjs <dir> [node.exe]
//
// node.exe defaults to the running Node when it is a Windows one (the CI
// runner), else NODE_WIN (scripts/windows-env.sh's node.exe under wine).
// The export table is read here (no gendef needed: the Windows runner's
// MinGW may lack it); dlltool is $DLLTOOL, else x86_64-w64-mingw32-dlltool,
// else dlltool, else the one the GNU Rust toolchain carries, whichever runs. scripts/windows-env.sh makes the same
// library with gendef on Linux.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

function die(message) {
  console.error(`node-import-lib: ${message}`)
  process.exit(1)
}

/** The names a PE file exports (its export directory's name table). */
export function peExports(file) {
  const buf = fs.readFileSync(file)
  if (buf.length < 64 || buf.toString('latin1', 0, 2) !== 'MZ') throw new Error(`${file} is not a PE file (no MZ header)`)
  const pe = buf.readUInt32LE(0x3c)
  if (buf.toString('latin1', pe, pe + 4) !== 'PE\0\0') throw new Error(`${file} is not a PE file (no PE signature)`)
  const sections = buf.readUInt16LE(pe + 6)
  const optionalSize = buf.readUInt16LE(pe + 20)
  const optional = pe + 24
  const magic = buf.readUInt16LE(optional)
  // The data directories start at 96 (PE32) or 112 (PE32+); the export table is the first.
  const dirs = optional + (magic === 0x20b ? 112 : magic === 0x10b ? 96 : die(`${file}: unknown optional header magic 0x${magic.toString(16)}`))
  const exportRva = buf.readUInt32LE(dirs)
  if (!exportRva) return []
  const table = optional + optionalSize
  const offset = (rva) => {
    for (let i = 0; i < sections; i++) {
      const s = table + i * 40
      const va = buf.readUInt32LE(s + 12)
      const size = Math.max(buf.readUInt32LE(s + 8), buf.readUInt32LE(s + 16))
      if (rva >= va && rva < va + size) return rva - va + buf.readUInt32LE(s + 20)
    }
    throw new Error(`${file}: RVA 0x${rva.toString(16)} is in no section`)
  }
  const dir = offset(exportRva)
  const count = buf.readUInt32LE(dir + 24)
  const names = offset(buf.readUInt32LE(dir + 32))
  const out = []
  for (let i = 0; i < count; i++) {
    const at = offset(buf.readUInt32LE(names + i * 4))
    out.push(buf.toString('latin1', at, buf.indexOf(0, at)))
  }
  return out
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
if (isMain) {
  const [outDir, given] = process.argv.slice(2)
  if (!outDir || process.argv.length > 4) die('usage: node-import-lib.mjs <dir> [node.exe]')
  const nodeExe = given ?? (process.platform === 'win32' ? process.execPath : process.env.NODE_WIN)
  if (!nodeExe) die('give node.exe (this Node is no Windows one and NODE_WIN is not set)')
  if (!fs.existsSync(nodeExe)) die(`${nodeExe} does not exist`)
  let names
  try {
    names = peExports(nodeExe).filter((n) => /^(napi|node_api)_[A-Za-z0-9_]+$/.test(n)).sort()
  } catch (e) {
    die(e.message)
  }
  // Node has exported well over a hundred since Node-API 8; fewer means a wrong file.
  if (names.length < 100) die(`only ${names.length} napi_*/node_api_* exports in ${nodeExe}; is it node.exe?`)
  fs.mkdirSync(outDir, { recursive: true })
  const def = path.join(outDir, 'node.def')
  fs.writeFileSync(def, `LIBRARY node.exe\nEXPORTS\n${names.join('\n')}\n`)

  // The GNU host toolchain on Windows carries its own MinGW tools (rust-mingw), dlltool among them.
  const sysroot = spawnSync('rustc', ['--print', 'sysroot'], { encoding: 'utf8' })
  const rustMingw = sysroot.status === 0
    ? ['bin/self-contained', 'bin'].map((d) => path.join(sysroot.stdout.trim(), 'lib', 'rustlib', 'x86_64-pc-windows-gnu', d, 'dlltool.exe')).filter((f) => fs.existsSync(f))
    : []
  const candidates = [process.env.DLLTOOL, 'x86_64-w64-mingw32-dlltool', 'dlltool', ...rustMingw].filter(Boolean)
  const lib = path.join(outDir, 'libnode.dll.a')
  const tmp = `${lib}.tmp-${process.pid}`
  let used = null
  const tried = []
  for (const tool of candidates) {
    const r = spawnSync(tool, ['-m', 'i386:x86-64', '-d', def, '-l', tmp, '-D', 'node.exe'], { encoding: 'utf8' })
    if (r.error) {
      tried.push(`${tool}: ${r.error.code === 'ENOENT' ? 'not found' : r.error.message}`)
      continue
    }
    if (r.status !== 0) die(`${tool} failed (exit ${r.status}): ${r.stderr.trim()}`)
    used = tool
    break
  }
  if (!used) die(`no dlltool ran (${tried.join('; ')}); install MinGW-w64 binutils or set DLLTOOL`)
  fs.renameSync(tmp, lib)
  fs.writeFileSync(path.join(outDir, 'libnode.dll'), '')
  console.log(`node-import-lib: ${lib}: ${names.length} exports of ${nodeExe} (${used}); set LIBNODE_PATH=${path.resolve(outDir)}`)
}
