// A loopback stand-in for the Gemini API, enough for the real Gemini CLI
// (`GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:<port>`, auth `gemini-api-key`).
//
// Each request is logged (time received in epoch ms, method, path, parsed
// body) so a test can read exactly what the model was shown. The main
// conversation (`:streamGenerateContent`, `:generateContent` without a JSON
// response schema) is answered by a script: a function from the request to a
// reply. Side calls the CLI makes on its own (JSON-schema'd classifier or
// next-speaker checks, countTokens, model listing) get fixed answers.
//
// In-process:   const stub = await startGeminiStub({ reply, logFile })
// As a process: node gemini-stub.mjs --script <module> [--log <jsonl>] [--port-file <f>] [--port N]
//               (the module's default export is the reply function; used
//               inside a private network namespace, see gemini.mjs)
//
// A reply function gets `{ body, n, text, functionResponses, contents, path }`
// where `n` counts scripted requests from 1, `text` is all text of the last
// user content, and returns one of:
//   { text: 'done' }                                   text, finishReason STOP
//   { shell: 'run-bg -- sleep 3', description?: '...' } a run_shell_command call
//   { call: { name, args } }                           any function call
//   { parts: [...] }                                   raw parts
//   { error: 500, message }                            an HTTP error
// or an array of those (several parts in one reply), or a Promise of one.
import http from 'node:http'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const MODEL_VERSION = 'stub-model'

/** All text of a Content (parts' text joined with newlines). */
export function contentText(content) {
  return (content?.parts || [])
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .filter(Boolean)
    .join('\n')
}

/** Everything the model is shown in one request, as one string (for substring asserts). */
export function requestText(body) {
  const out = []
  if (body?.systemInstruction) out.push(contentText(body.systemInstruction))
  for (const c of body?.contents || []) {
    for (const p of c.parts || []) {
      if (typeof p.text === 'string') out.push(p.text)
      if (p.functionCall) out.push(JSON.stringify(p.functionCall))
      if (p.functionResponse) out.push(JSON.stringify(p.functionResponse))
    }
  }
  return out.join('\n')
}

/** Text of the contents only (what the conversation holds, not the system prompt). */
export function contentsText(body) {
  return requestText({ contents: body?.contents })
}

function isSideCall(body) {
  const cfg = body?.generationConfig || {}
  return cfg.responseMimeType === 'application/json' || !!cfg.responseJsonSchema || !!cfg.responseSchema
}

/** A JSON answer for the CLI's own structured side calls (router, next speaker, …). */
function sideCallAnswer(body) {
  const schema = body?.generationConfig?.responseJsonSchema || body?.generationConfig?.responseSchema || {}
  const props = schema.properties || {}
  const out = {}
  for (const [k, v] of Object.entries(props)) {
    if (k === 'next_speaker') out[k] = 'user'
    else if (k === 'model_choice') out[k] = v.enum?.includes('flash') ? 'flash' : v.enum?.[0] ?? 'flash'
    else if (v.enum) out[k] = v.enum[0]
    else if (v.type === 'boolean' || v.type === 'BOOLEAN') out[k] = false
    else if (/^(number|integer)$/i.test(v.type || '')) out[k] = v.minimum ?? 10
    else if (v.type === 'array' || v.type === 'ARRAY') out[k] = []
    else out[k] = 'stub'
  }
  return JSON.stringify(out)
}

function toParts(reply) {
  const list = Array.isArray(reply) ? reply : [reply]
  const parts = []
  for (const r of list) {
    if (r == null) continue
    if (typeof r === 'string') parts.push({ text: r })
    else if (r.parts) parts.push(...r.parts)
    else if (r.shell !== undefined)
      parts.push({
        functionCall: {
          name: 'run_shell_command',
          args: { command: r.shell, description: r.description ?? 'stub: run a command', ...(r.args || {}) },
        },
      })
    else if (r.call) parts.push({ functionCall: { name: r.call.name, args: r.call.args || {} } })
    else if (r.text !== undefined) parts.push({ text: r.text })
  }
  if (parts.length === 0) parts.push({ text: 'ok' })
  return parts
}

function chunk(parts, finish = true) {
  return {
    candidates: [{ content: { role: 'model', parts }, ...(finish ? { finishReason: 'STOP' } : {}), index: 0 }],
    usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
    modelVersion: MODEL_VERSION,
  }
}

/**
 * Starts the stub. Options:
 *   reply(req) -> reply (see top of file); default: text 'ok'
 *   port (0: any), host ('127.0.0.1'), logFile (JSONL, one line per request)
 * Returns { url, port, requests, scripted(), waitForRequest(pred, timeout), close() }.
 */
export async function startGeminiStub({ reply = () => ({ text: 'ok' }), port = 0, host = '127.0.0.1', logFile } = {}) {
  const requests = []
  let scriptedCount = 0
  const waiters = new Set()
  const record = (entry) => {
    requests.push(entry)
    if (logFile) fs.appendFileSync(logFile, JSON.stringify(entry) + '\n')
    for (const w of waiters) w()
  }
  const server = http.createServer((req, res) => {
    const receivedAt = Date.now()
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', async () => {
      const raw = Buffer.concat(chunks).toString('utf8')
      let body = null
      try {
        body = raw ? JSON.parse(raw) : null
      } catch {
        body = { unparsed: raw }
      }
      const url = new URL(req.url, 'http://stub')
      const m = url.pathname.match(/\/models\/([^/:]+):(\w+)$/)
      const model = m?.[1]
      const method = m?.[2]
      const entry = { receivedAt, method: req.method, path: url.pathname, query: url.search, model, rpc: method, body }
      try {
        if (method === 'countTokens') {
          entry.kind = 'countTokens'
          record(entry)
          return json(res, 200, { totalTokens: Math.ceil(raw.length / 4) })
        }
        if (method === 'embedContent' || method === 'batchEmbedContents') {
          entry.kind = 'embed'
          record(entry)
          const values = new Array(8).fill(0)
          return json(res, 200, method === 'embedContent' ? { embedding: { values } } : { embeddings: (body?.requests || [1]).map(() => ({ values })) })
        }
        if (method === 'streamGenerateContent' || method === 'generateContent') {
          if (isSideCall(body)) {
            entry.kind = 'side'
            record(entry)
            const text = sideCallAnswer(body)
            return method === 'generateContent' ? json(res, 200, chunk([{ text }])) : sse(res, [chunk([{ text }])])
          }
          entry.kind = 'chat'
          entry.n = ++scriptedCount
          record(entry)
          const contents = body?.contents || []
          const last = contents[contents.length - 1]
          const r = await reply({
            body,
            n: entry.n,
            path: url.pathname,
            contents,
            text: contentText(last),
            all: contentsText(body),
            functionResponses: (last?.parts || []).filter((p) => p.functionResponse).map((p) => p.functionResponse),
          })
          const first = Array.isArray(r) ? r[0] : r
          if (first && first.error) return json(res, first.error, { error: { code: first.error, message: first.message || 'stub error', status: 'INTERNAL' } })
          const c = chunk(toParts(r))
          return method === 'generateContent' ? json(res, 200, c) : sse(res, [c])
        }
        if (req.method === 'GET' && /\/models\/?$/.test(url.pathname)) {
          entry.kind = 'listModels'
          record(entry)
          return json(res, 200, { models: [{ name: 'models/gemini-2.5-pro' }, { name: 'models/gemini-2.5-flash' }] })
        }
        if (req.method === 'GET' && model) {
          entry.kind = 'getModel'
          record(entry)
          return json(res, 200, { name: `models/${model}`, inputTokenLimit: 1048576, outputTokenLimit: 65536 })
        }
        entry.kind = 'unknown'
        record(entry)
        json(res, 404, { error: { code: 404, message: `stub: no route for ${req.method} ${url.pathname}`, status: 'NOT_FOUND' } })
      } catch (err) {
        entry.kind = entry.kind || 'error'
        entry.error = String(err?.stack || err)
        if (!requests.includes(entry)) record(entry)
        json(res, 500, { error: { code: 500, message: String(err), status: 'INTERNAL' } })
      }
    })
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, resolve)
  })
  const actualPort = server.address().port
  const sockets = new Set()
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  return {
    url: `http://${host}:${actualPort}`,
    port: actualPort,
    requests,
    /** The scripted (main conversation) requests, in order. */
    chat: () => requests.filter((r) => r.kind === 'chat'),
    waitForRequest(pred, timeout = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = requests.find(pred)
          if (hit) {
            waiters.delete(check)
            clearTimeout(timer)
            resolve(hit)
          }
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`stub: no matching request within ${timeout} ms`))
        }, timeout)
        waiters.add(check)
        check()
      })
    },
    close() {
      for (const s of sockets) s.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

function json(res, status, obj) {
  const data = JSON.stringify(obj)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) })
  res.end(data)
}

function sse(res, chunks) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
  for (const c of chunks) res.write(`data: ${JSON.stringify(c)}\r\n\r\n`)
  res.end()
}

/** Reads a stub's JSONL log (tolerates a partly written last line). */
export function readStubLog(file) {
  let text = ''
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch {
    return []
  }
  const out = []
  for (const line of text.split('\n')) {
    if (!line) continue
    try {
      out.push(JSON.parse(line))
    } catch {}
  }
  return out
}

// As a process: --script <module> --log <jsonl> --port-file <file> [--port N]
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2)
  const opt = (name) => {
    const i = args.indexOf(name)
    return i >= 0 ? args[i + 1] : undefined
  }
  const scriptPath = opt('--script')
  const reply = scriptPath ? (await import(pathToFileURL(path.resolve(scriptPath)).href)).default : undefined
  const stub = await startGeminiStub({ reply, port: Number(opt('--port') || 0), logFile: opt('--log') })
  const portFile = opt('--port-file')
  if (portFile) {
    fs.writeFileSync(portFile + '.tmp', String(stub.port))
    fs.renameSync(portFile + '.tmp', portFile)
  }
  process.stdout.write(`${stub.url}\n`)
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => stub.close().then(() => process.exit(0)))
}
