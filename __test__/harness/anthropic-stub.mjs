// A stand-in for the Anthropic Messages API, good enough for Claude Code:
// `POST /v1/messages` streamed as SSE (message_start, content_block_start /
// delta / stop, message_delta, message_stop) or answered as one JSON message,
// `POST /v1/messages/count_tokens`, and a JSON 404 for anything else. Every
// request is logged with the time it was received and its parsed body, so a
// test can read exactly what the model was shown.
//
// It runs inside the test's own process, listening on a Unix socket (a path:
// reachable from any network namespace), so a test scripts its replies with
// a plain function. Claude Code, kept inside a private network namespace,
// reaches it through a tiny TCP→Unix forwarder started in that namespace
// (see claude.mjs); without a namespace the stub can listen on TCP itself.
//
// The reply function gets (request, stub) and returns a reply:
//   { text: 'done' }                               a text turn, end_turn
//   { bash: 'run-bg -- sleep 3', description }     a Bash tool_use
//   { tool: 'mcp__x__y', input: {…} }               any tool_use
//   { content: [blocks…], stopReason }             explicit blocks
//   { status: 529, error: {…} }                    an HTTP error
// or undefined for the default (side requests: a short JSON-ish text; main
// loop: `{ text: 'ok' }`).
//
// Each logged request: { n, at (Date.now() on receipt), method, url, kind
// ('main' | 'side' | 'count' | 'other', see classify), headers, body, reply }.
// Claude Code 2.1 names its session in the `x-claude-code-session-id` header
// (sessionOf), so one stub can serve several sessions; and it puts `role:
// "system"` messages in `messages` (environment, SessionStart context, hook
// output): read what a request brings with trailing / newText / turnTexts.
import http from 'node:http'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

let counter = 0
const newId = (prefix) => `${prefix}_stub${Date.now().toString(36)}${(++counter).toString(36).padStart(4, '0')}`

/** The text of a system prompt (string or array of blocks). */
export function systemText(body) {
  const s = body?.system
  if (!s) return ''
  if (typeof s === 'string') return s
  return s.map((b) => b.text ?? '').join('\n')
}

/** The text of one message's content, tool results included (as their text). */
export function contentText(content) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((b) => {
    if (b.type === 'text') return b.text
    if (b.type === 'tool_result') return contentText(b.content)
    if (b.type === 'tool_use') return JSON.stringify(b.input)
    return ''
  }).join('\n')
}

/**
 * The messages after the last assistant message: what is new in this
 * request (the user's prompt, tool results, hook output, a wake).
 */
export function trailing(body) {
  const messages = body?.messages ?? []
  const i = messages.map((m) => m.role).lastIndexOf('assistant')
  return messages.slice(i + 1)
}

/**
 * Every text block of a user or system message (Claude Code 2.1 sends
 * `role: "system"` messages inside `messages`: the environment, SessionStart
 * context, PostToolUse context), tool results left out, as {index, role, text}.
 */
export function turnTexts(messages) {
  const out = []
  messages.forEach((m, index) => {
    if (m.role === 'assistant') return
    if (typeof m.content === 'string') out.push({ index, role: m.role, text: m.content })
    else for (const b of m.content ?? []) if (b.type === 'text') out.push({ index, role: m.role, text: b.text })
  })
  return out
}

/** The new turn texts of a request (see trailing), joined. */
export function newText(body) {
  return turnTexts(trailing(body)).map((t) => t.text).join('\n')
}

/** tool_result blocks among the trailing messages, as {id, text, isError}. */
export function newToolResults(body) {
  return trailing(body).flatMap((m) => (Array.isArray(m.content) ? m.content : []))
    .filter((b) => b.type === 'tool_result')
    .map((b) => ({ id: b.tool_use_id, text: contentText(b.content), isError: !!b.is_error }))
}

/** The Claude Code session a request belongs to (its x-claude-code-session-id header). */
export const sessionOf = (record) => record.headers?.['x-claude-code-session-id'] ?? null

/**
 * main: the agent loop (it always offers tools); side: a message request
 * without tools (titles, topic checks, summaries; none seen from 2.1.332
 * with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1); count: count_tokens;
 * other: any other path.
 */
export function classify(url, body) {
  if (url.startsWith('/v1/messages/count_tokens')) return 'count'
  if (!url.startsWith('/v1/messages')) return 'other'
  return (body?.tools ?? []).length > 0 ? 'main' : 'side'
}

function usage(body) {
  const chars = JSON.stringify(body?.messages ?? '').length + systemText(body).length
  return { input_tokens: Math.max(1, Math.round(chars / 4)), output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
}

/** A reply descriptor → content blocks and stop reason. */
function toContent(reply) {
  if (reply.content) return { content: reply.content, stopReason: reply.stopReason ?? (reply.content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn') }
  if (reply.bash !== undefined) {
    const input = { command: reply.bash, description: reply.description ?? 'run a command' }
    if (reply.timeout) input.timeout = reply.timeout
    if (reply.runInBackground) input.run_in_background = true
    const blocks = reply.text ? [{ type: 'text', text: reply.text }] : []
    blocks.push({ type: 'tool_use', id: newId('toolu'), name: 'Bash', input })
    return { content: blocks, stopReason: 'tool_use' }
  }
  if (reply.tool) {
    const blocks = reply.text ? [{ type: 'text', text: reply.text }] : []
    blocks.push({ type: 'tool_use', id: newId('toolu'), name: reply.tool, input: reply.input ?? {} })
    return { content: blocks, stopReason: 'tool_use' }
  }
  return { content: [{ type: 'text', text: reply.text ?? 'ok' }], stopReason: reply.stopReason ?? 'end_turn' }
}

function sse(res, event, data) {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
}

function streamMessage(res, model, content, stopReason, u) {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    'request-id': newId('req'),
    'anthropic-ratelimit-unified-status': 'allowed',
  })
  const id = newId('msg')
  sse(res, 'message_start', {
    type: 'message_start',
    message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: u },
  })
  content.forEach((block, index) => {
    if (block.type === 'text') {
      sse(res, 'content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } })
      sse(res, 'content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text } })
    } else if (block.type === 'tool_use') {
      sse(res, 'content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } })
      sse(res, 'content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } })
    } else {
      sse(res, 'content_block_start', { type: 'content_block_start', index, content_block: block })
    }
    sse(res, 'content_block_stop', { type: 'content_block_stop', index })
  })
  sse(res, 'message_delta', { type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 5 } })
  sse(res, 'message_stop', { type: 'message_stop' })
  res.end()
}

/** The default answer to a side request: something each known caller can parse. */
function sideReply(body) {
  const sys = systemText(body)
  const last = newText(body)
  if (/json/i.test(sys) || /json/i.test(last)) {
    if (/title/i.test(sys + last)) return { text: '{"title": "Stub session"}' }
    if (/isNewTopic|new topic/i.test(sys + last)) return { text: '{"isNewTopic": false, "title": null}' }
    return { text: '{}' }
  }
  return { text: 'Stub' }
}

/**
 * Starts the stub. Options:
 *   reply(request, stub): the script (see the top of this file)
 *   socketPath: listen on this Unix socket (default: a new one in a temp dir)
 *   tcp: true to listen on 127.0.0.1:<port> instead (port 0 = any)
 *   port: the TCP port (with tcp)
 * Resolves to the stub: { requests, main(), side(), waitForRequest(), close(), socketPath | port, url }.
 */
export async function startStub({ reply, socketPath, tcp = false, port = 0, log } = {}) {
  const requests = []
  const waiters = new Set()
  let dir = null
  if (!tcp && !socketPath) {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-stub-'))
    socketPath = path.join(dir, 'api.sock')
  }
  const stub = {
    requests,
    /** Main-loop message requests, in order received. */
    main: () => requests.filter((r) => r.kind === 'main'),
    side: () => requests.filter((r) => r.kind === 'side'),
    /** Resolves with the first request (from index `from` on) for which `predicate` holds. */
    waitForRequest(predicate, { timeout = 60_000, from = 0, what = 'a request' } = {}) {
      const found = requests.slice(from).find(predicate)
      if (found) return Promise.resolve(found)
      return new Promise((resolve, reject) => {
        const w = { predicate, resolve, from }
        w.timer = setTimeout(() => {
          waiters.delete(w)
          reject(new Error(`stub: timed out after ${timeout} ms waiting for ${what}; ${requests.length} request(s) so far: ${requests.map((r) => r.kind).join(', ')}`))
        }, timeout)
        waiters.add(w)
      })
    },
    close: null,
    socketPath: tcp ? null : socketPath,
    port: null,
    url: null,
  }
  const server = http.createServer((req, res) => {
    const at = Date.now()
    const chunks = []
    req.on('data', (d) => chunks.push(d))
    req.on('end', async () => {
      const raw = Buffer.concat(chunks).toString('utf8')
      let body = null
      try { body = raw ? JSON.parse(raw) : null } catch {}
      const url = req.url
      const kind = req.method === 'POST' ? classify(url, body) : 'other'
      const record = { n: requests.length, at, method: req.method, url, kind, headers: req.headers, body }
      requests.push(record)
      log?.(record)
      for (const w of [...waiters]) {
        if (record.n >= w.from && w.predicate(record)) {
          clearTimeout(w.timer)
          waiters.delete(w)
          w.resolve(record)
        }
      }
      try {
        if (kind === 'count') {
          res.writeHead(200, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ input_tokens: usage(body).input_tokens }))
          return
        }
        if (kind === 'other') {
          res.writeHead(404, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: `stub: no ${req.method} ${url}` } }))
          return
        }
        let r = reply ? await reply(record, stub) : undefined
        if (r === undefined || r === null) r = kind === 'side' ? sideReply(body) : { text: 'ok' }
        record.reply = r
        if (r.status) {
          res.writeHead(r.status, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ type: 'error', error: r.error ?? { type: 'api_error', message: 'stub error' } }))
          return
        }
        const { content, stopReason } = toContent(r)
        const model = body?.model ?? 'claude-stub'
        if (body?.stream) {
          streamMessage(res, model, content, stopReason, usage(body))
        } else {
          res.writeHead(200, { 'content-type': 'application/json', 'request-id': newId('req') })
          res.end(JSON.stringify({ id: newId('msg'), type: 'message', role: 'assistant', model, content, stop_reason: stopReason, stop_sequence: null, usage: usage(body) }))
        }
      } catch (e) {
        record.replyError = String(e?.stack ?? e)
        try {
          res.writeHead(500, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: String(e) } }))
        } catch {}
      }
    })
  })
  server.keepAliveTimeout = 60_000
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    if (tcp) server.listen(port, '127.0.0.1', resolve)
    else server.listen(socketPath, resolve)
  })
  if (tcp) {
    stub.port = server.address().port
    stub.url = `http://127.0.0.1:${stub.port}`
  }
  stub.close = () => new Promise((resolve) => {
    for (const w of waiters) clearTimeout(w.timer)
    waiters.clear()
    server.closeAllConnections?.()
    server.close(() => {
      if (dir) fs.rmSync(dir, { recursive: true, force: true })
      resolve()
    })
  })
  return stub
}

/**
 * The source of a TCP→Unix-socket forwarder, run with `node -e` inside the
 * network namespace: listens on 127.0.0.1:<port> (argv[1], 0 = any), pipes
 * each connection to the socket (argv[2]), and prints its port once listening.
 */
export const FORWARDER = `
const net = require('node:net')
const [port, sock] = process.argv.slice(1)
const server = net.createServer((c) => {
  const u = net.connect(sock)
  c.pipe(u); u.pipe(c)
  c.on('error', () => u.destroy()); u.on('error', () => c.destroy())
})
server.listen(Number(port), '127.0.0.1', () => console.log(server.address().port))
`
