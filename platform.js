// Which prebuilt platform package serves this machine, where the native
// run-bg executable is, and what to do when neither is there. Used by the
// run-bg command npm links (bin/run-bg.js, the Node shim) and by index.js
// when the addon cannot load;
// the addon itself looks for run-bg next to its own .node file, which is the
// same place (native/run-bg in a checkout and in each platform package;
// native/run-bg.exe on Windows).
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const { name: NAME, version: VERSION, repository } = require('./package.json')
const root = __dirname
// Platforms with a prebuilt package; anything else builds from source.
const PREBUILT = ['linux-x64-gnu', 'linux-arm64-gnu', 'linux-x64-musl', 'linux-arm64-musl', 'darwin-x64', 'darwin-arm64', 'win32-x64-gnu']
const SOURCE = String((repository && (repository.url || repository)) || 'the proc-manager repository').replace(/^git\+/, '')

// As napi-rs's generated loader decides it: /usr/bin/ldd names musl, else
// the running Node reports no glibc version.
function isMusl() {
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl')
  } catch {}
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  if (!report) return false
  if (report.header?.glibcVersionRuntime) return false
  return Array.isArray(report.sharedObjects) && report.sharedObjects.some((f) => f.includes('libc.musl-') || f.includes('ld-musl-'))
}

// napi-rs's names: linux-<arch>-gnu|musl, darwin-<arch>, and on Windows
// win32-<arch>-gnu, the mingw-w64 build (x86_64-pc-windows-gnu), the only
// Windows build there is (index.js loads it under any win32-x64 Node).
function abi() {
  const { platform, arch } = process
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`
  if (platform === 'win32') return `win32-${arch}-gnu`
  return `${platform}-${arch}`
}

// The executable's file name: run-bg, run-bg.exe on Windows.
const RUN_BG = process.platform === 'win32' ? 'run-bg.exe' : 'run-bg'

const platformPackage = () => `${NAME}-${abi()}`

/** The installed platform package's directory, or null. */
function platformPackageDir() {
  try {
    return path.dirname(require.resolve(`${platformPackage()}/package.json`))
  } catch {
    return null
  }
}

// A checkout (Rust sources next to this file) builds its own binaries.
const isCheckout = () => fs.existsSync(path.join(root, 'Cargo.toml'))

/** What to do about a missing or unloadable native part (`what`: "addon" or "run-bg"). */
function fix(what, lookedFor, reason) {
  const pkg = platformPackage()
  const where = lookedFor.length ? ` (looked for ${lookedFor.join(', ')})` : ''
  if (isCheckout()) {
    return `${NAME}: no ${what} built in this checkout${where}; build it from source with \`npm run build\` (needs Rust: https://rustup.rs)`
  }
  const fromSource = `clone ${SOURCE}, run \`npm install && npm run build\` in it (needs Rust), ` +
    `then \`npm install <that directory>\` in your project`
  if (!PREBUILT.includes(abi())) {
    return `${NAME}: no prebuilt ${what} for ${abi()}${where}; prebuilt packages exist for ${PREBUILT.join(', ')}. ` +
      `Build from source: ${fromSource}`
  }
  const dir = platformPackageDir()
  if (dir) {
    return `${NAME}: ${pkg} is installed (${dir}) but its ${what} is not usable${reason ? ` (${reason})` : where}; ` +
      `reinstall it: \`npm install ${pkg}@${VERSION}\`; where it cannot load (the glibc builds need glibc 2.17 or later), ` +
      `build from source: ${fromSource}`
  }
  return `${NAME}: the platform package ${pkg} is not installed${where}. npm installs it with ${NAME} as an optional ` +
    `dependency; it is missing after an install with --omit=optional/--no-optional, or with a lockfile written on ` +
    `another platform. Install it: \`npm install ${pkg}@${VERSION}\``
}

/**
 * The native run-bg: $PROC_MANAGER_BINARY_PATH, else a local build (a
 * checkout's native/run-bg), else the platform package's native/run-bg
 * (run-bg.exe on Windows).
 * Throws with `fix()`'s message when there is none.
 */
function findRunBg(env = process.env) {
  if (env.PROC_MANAGER_BINARY_PATH) return env.PROC_MANAGER_BINARY_PATH
  // The older override. Every supervisor and helper also carries this name
  // as its mark (a job id or "helper"), which its on-exit hooks inherit; only
  // an absolute path is meant as a binary.
  const legacy = env.PROC_MANAGER_SUPERVISOR
  if (legacy && path.isAbsolute(legacy)) return legacy
  const candidates = [path.join(root, 'native', RUN_BG)]
  const dir = platformPackageDir()
  if (dir) candidates.push(path.join(dir, 'native', RUN_BG))
  const found = candidates.find((p) => fs.existsSync(p))
  if (found) return found
  if (!dir) candidates.push(`the package ${platformPackage()}`)
  throw new Error(fix('run-bg executable', candidates))
}

/** The error index.js throws when no addon loaded; `cause` carries each attempt's error. */
function bindingError(loadErrors, cause) {
  // A file that exists and does not load (wrong glibc, wrong architecture),
  // rather than the not-found of each place looked in.
  const failed = loadErrors.find((e) => e && e.code !== 'MODULE_NOT_FOUND')
  const error = new Error(fix('addon', [`${NAME}.${abi()}.node`, platformPackage()], failed && failed.message))
  error.cause = cause
  return error
}

module.exports = { abi, platformPackage, findRunBg, bindingError, PREBUILT }
