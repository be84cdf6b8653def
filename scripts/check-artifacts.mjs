#!/usr/bin/env node
// Checks a platform package directory (npm/<abi>/) against what its
// package.json promises, without running anything from it:
//   - the addon (`main`) and the executables under native/ (run-bg and
//     run-bg-top; .exe for win32) exist, the executables executable;
//   - both are ELF files (PE files for win32) for the package's `cpu`;
//   - win32: the addon takes napi_* from node.exe, the process that loads it
//     (not from a libnode.dll, which no Node ships);
//   - glibc packages need no symbol version above GLIBC_FLOOR;
//   - musl packages: the executables are static (no loader, no shared library), and
//     the addon needs no glibc library;
//   - darwin packages (read by machO() below, no tool needed): thin 64-bit
//     Mach-O files for the package's `cpu`, run-bg an executable and the
//     addon a dylib, linked against /usr/lib/libSystem.B.dylib and nothing
//     else (libiconv and libcharset, also the system's, allowed: see
//     MACOS_SYSTEM_EXTRAS), for macOS MACOS_FLOOR (LC_BUILD_VERSION's minos), code-signed
//     for arm64 (which runs nothing unsigned); the addon exports
//     napi_register_module_v1 and leaves to dynamic lookup nothing but the
//     napi_* functions Node gives it, and run-bg nothing at all.
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

// The oldest macOS the darwin packages are built for (MACOSX_DEPLOYMENT_TARGET
// in build-target.mjs): Big Sur, the first with Apple silicon.
export const MACOS_FLOOR = '11.0'
const MACHO_CPU = { x64: 0x01000007, arm64: 0x0100000c }
const MACHO_FILETYPE = { 2: 'executable', 6: 'dylib', 8: 'bundle' }
const LIBSYSTEM = '/usr/lib/libSystem.B.dylib'
// The libc crate links libiconv for every crate that uses it (its iconv_*
// declarations: see its apple/mod.rs), and the zig link keeps it:
// run-bg-top (crossterm) carries it, with libcharset. Both ship with every
// macOS, in its dyld shared cache as libSystem is; nothing else may appear.
const MACOS_SYSTEM_EXTRAS = ['/usr/lib/libiconv.2.dylib', '/usr/lib/libcharset.1.dylib']

function uleb128(buf, at) {
  let value = 0
  let shift = 0
  for (;;) {
    if (at >= buf.length) throw new Error('truncated ULEB128')
    const byte = buf[at++]
    value += (byte & 0x7f) * 2 ** shift
    shift += 7
    if (!(byte & 0x80)) return [value, at]
  }
}

function cString(buf, at, end = buf.length) {
  const stop = buf.indexOf(0, at)
  return buf.toString('latin1', at, stop < 0 || stop > end ? end : stop)
}

/** The names in a Mach-O export trie (the symbols dyld lets others bind to). */
function trieNames(buf, start, size) {
  const names = []
  const seen = new Set()
  const stack = [[0, '']]
  while (stack.length) {
    const [offset, prefix] = stack.pop()
    if (offset >= size || seen.has(offset)) continue
    seen.add(offset)
    let [terminal, at] = uleb128(buf, start + offset)
    if (terminal > 0) names.push(prefix)
    at += terminal
    const children = buf[at++]
    for (let i = 0; i < children; i++) {
      const edge = cString(buf, at, start + size)
      at += edge.length + 1
      let child
      ;[child, at] = uleb128(buf, at)
      stack.push([child, prefix + edge])
    }
  }
  return names
}

/**
 * What a Mach-O file says of itself, from its header and load commands:
 * { cpu, type, twoLevel, dylibs, dylinker, platform, minos, sdk, signed,
 *   exports, dynamicLookup }; null when the file is not a thin 64-bit
 * little-endian Mach-O (a universal one gives { universal: true }).
 */
export function machO(file) {
  const buf = fs.readFileSync(file)
  if (buf.length < 32) return null
  if (buf.readUInt32BE(0) === 0xcafebabe) return { universal: true }
  if (buf.readUInt32LE(0) !== 0xfeedfacf) return null
  const info = {
    cpu: buf.readUInt32LE(4),
    type: MACHO_FILETYPE[buf.readUInt32LE(12)] ?? `filetype ${buf.readUInt32LE(12)}`,
    twoLevel: (buf.readUInt32LE(24) & 0x80) !== 0,
    dylibs: [],
    dylinker: null,
    platform: null,
    minos: null,
    sdk: null,
    signed: false,
    exports: [],
    dynamicLookup: [],
  }
  const version = (v) => `${v >>> 16}.${(v >> 8) & 0xff}.${v & 0xff}`
  let symtab = null
  const ncmds = buf.readUInt32LE(16)
  let at = 32
  for (let i = 0; i < ncmds; i++) {
    const cmd = buf.readUInt32LE(at)
    const size = buf.readUInt32LE(at + 4)
    switch (cmd) {
      case 0xc: // LC_LOAD_DYLIB
      case 0x20: // LC_LAZY_LOAD_DYLIB
      case 0x80000018: // LC_LOAD_WEAK_DYLIB
      case 0x8000001f: // LC_REEXPORT_DYLIB
      case 0x80000023: // LC_LOAD_UPWARD_DYLIB
        info.dylibs.push(cString(buf, at + buf.readUInt32LE(at + 8), at + size))
        break
      case 0xe: // LC_LOAD_DYLINKER
        info.dylinker = cString(buf, at + buf.readUInt32LE(at + 8), at + size)
        break
      case 0x32: // LC_BUILD_VERSION
        info.platform = buf.readUInt32LE(at + 8) === 1 ? 'macos' : `platform ${buf.readUInt32LE(at + 8)}`
        info.minos = version(buf.readUInt32LE(at + 12))
        info.sdk = version(buf.readUInt32LE(at + 16))
        break
      case 0x24: // LC_VERSION_MIN_MACOSX
        info.platform = 'macos'
        info.minos = version(buf.readUInt32LE(at + 8))
        info.sdk = version(buf.readUInt32LE(at + 12))
        break
      case 0x1d: // LC_CODE_SIGNATURE
        info.signed = buf.readUInt32LE(at + 12) > 0
        break
      case 0x22: // LC_DYLD_INFO
      case 0x80000022: // LC_DYLD_INFO_ONLY
        info.exports.push(...trieNames(buf, buf.readUInt32LE(at + 40), buf.readUInt32LE(at + 44)))
        break
      case 0x80000033: // LC_DYLD_EXPORTS_TRIE
        info.exports.push(...trieNames(buf, buf.readUInt32LE(at + 8), buf.readUInt32LE(at + 12)))
        break
      case 0x2: // LC_SYMTAB
        symtab = { symoff: buf.readUInt32LE(at + 8), nsyms: buf.readUInt32LE(at + 12), stroff: buf.readUInt32LE(at + 16) }
        break
    }
    at += size
  }
  // Undefined external symbols (nlist_64: strx, type, sect, desc, value)
  // bound to none of the libraries above (library ordinal 0, or 0xfe,
  // DYNAMIC_LOOKUP; zig binds them flat): looked up at load time in
  // whatever is loaded already (for an addon, the node binary).
  if (symtab) {
    for (let i = 0; i < symtab.nsyms; i++) {
      const entry = symtab.symoff + i * 16
      const type = buf[entry + 4]
      const undefinedExternal = (type & 0xe0) === 0 && (type & 0x0e) === 0 && (type & 0x01) === 1
      const ordinal = buf.readUInt16LE(entry + 6) >> 8
      if (undefinedExternal && (!info.twoLevel || ordinal === 0 || ordinal > info.dylibs.length)) {
        info.dynamicLookup.push(cString(buf, symtab.stroff + buf.readUInt32LE(entry)))
      }
    }
  }
  return info
}

/** The problems of one file of a darwin package (`role`: 'addon' or 'run-bg'), and notes for the listing. */
function checkMachO(file, name, cpu, role, entry, problems) {
  const m = machO(file)
  if (!m) return problems.push(`${name} is not a 64-bit Mach-O file`)
  if (m.universal) return problems.push(`${name} is a universal binary; expected one architecture`)
  if (m.cpu !== MACHO_CPU[cpu]) problems.push(`${name} is built for Mach-O CPU 0x${m.cpu.toString(16)}, not ${cpu} (0x${MACHO_CPU[cpu].toString(16)})`)
  const type = role === 'run-bg' ? 'executable' : 'dylib'
  if (m.type !== type) problems.push(`${name} is a Mach-O ${m.type}, not a ${type}`)
  const others = m.dylibs.filter((lib) => lib !== LIBSYSTEM && !MACOS_SYSTEM_EXTRAS.includes(lib))
  if (others.length || !m.dylibs.includes(LIBSYSTEM)) {
    problems.push(`${name} links ${m.dylibs.join(', ') || 'no library'}; expected ${LIBSYSTEM} (and only the system's ${MACOS_SYSTEM_EXTRAS.join(', ')} besides)`)
  }
  if (m.platform !== 'macos' || m.minos !== `${MACOS_FLOOR}.0`) {
    problems.push(`${name} is for ${m.platform ?? 'no platform'} ${m.minos ?? '(no minimum)'}, not macOS ${MACOS_FLOOR}`)
  }
  // arm64 macOS runs nothing unsigned (zig signs ad hoc); x86_64 needs none.
  if (!m.signed && cpu === 'arm64') problems.push(`${name} has no code signature (arm64 macOS runs nothing unsigned)`)
  const lookups = m.dynamicLookup
  if (role === 'addon') {
    if (!m.exports.includes('_napi_register_module_v1')) problems.push(`${name} does not export napi_register_module_v1`)
    const strangers = lookups.filter((s) => !s.startsWith('_napi_'))
    if (strangers.length) problems.push(`${name} leaves to dynamic lookup what Node does not give: ${strangers.join(', ')}`)
  } else if (lookups.length) {
    problems.push(`${name} leaves symbols to dynamic lookup: ${lookups.join(', ')}`)
  }
  entry.notes.push(
    `Mach-O ${m.type} ${Object.keys(MACHO_CPU).find((k) => MACHO_CPU[k] === m.cpu) ?? `CPU 0x${m.cpu.toString(16)}`}`,
    `links ${m.dylibs.join(', ') || 'nothing'}`,
    `macOS ${m.minos ?? '?'} (sdk ${m.sdk ?? '?'})`,
    m.signed ? 'signed' : 'unsigned',
  )
  if (role === 'addon') {
    entry.notes.push(`exports ${m.exports.filter((s) => s.startsWith('_napi_')).map((s) => s.slice(1)).join(', ') || 'no napi_*'}`)
    entry.notes.push(`${lookups.length} napi_* left to dynamic lookup`)
  }
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
  const listed = (manifest.files ?? []).filter((f) => f.startsWith('native/'))
  const executables = (listed.length ? listed : ['native/run-bg']).map((f) => path.join(dir, f))
  for (const file of [addon, ...executables]) {
    const isExecutable = executables.includes(file)
    const name = path.relative(process.cwd(), file)
    if (!fs.existsSync(file)) {
      problems.push(`${name} does not exist`)
      continue
    }
    const entry = { file: name, size: fs.statSync(file).size, notes: [] }
    files.push(entry)
    if (isExecutable && !(fs.statSync(file).mode & 0o111)) problems.push(`${name} is not executable`)
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
    if (os === 'darwin') checkMachO(file, name, cpu, isExecutable ? 'run-bg' : 'addon', entry, problems)
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
      if (isExecutable) {
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
