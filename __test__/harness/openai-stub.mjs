// A stand-in for the OpenAI Responses API, enough for the real Codex CLI:
// `POST /v1/responses` answered with a server-sent event stream
// (response.created, output_item.added/done, response.completed). What the
// "model" does is scripted per test: a function from the request body to a
// reply (run this shell command, or say this text and end the turn). Every
// request is logged with the time it was received and its parsed body, so a
// test can read exactly what the model was shown.
//
// It listens on 127.0.0.1 (port 0: any free one) or, for a Codex run inside
// a private network namespace, on a unix socket that codex.mjs's forwarder
// (`--ns-run`) connects a loopback port of the namespace to (a filesystem
// socket crosses network namespaces; a TCP port does not).
import http from 'node:http'
import fs from 'node:fs'

/**
 * Starts the stub. `script(body, ctx)` answers each `POST /v1/responses`;
 * it returns (or resolves to) a reply:
 *   - `{ shell: 'cmd' }`: call the shell tool Codex offers with `cmd`
 *     (run by `sh -c`-like shells of each tool flavour; see toolCall);
 *   - `{ say: 'text' }`: an assistant message, ending the turn;
 *   - `{ items: [...] }`: raw output items;
 *   - `{ status: 500, body: '...' }`: an HTTP error;
 *   - `{ hang: true }`: never answer (the request is held until close()).
 * A script that throws answers 500 (and records `error` on the entry).
 * ctx: { index (0-based among /v1/responses requests), requests (the log),
 *        entry (this request's log entry) }.
 *
 * Options: `socketPath` (listen there instead of TCP), `host`, `port`,
 * `logFile` (append each entry as a JSON line too).
 */
export async function startStub(script, { socketPath, host = '127.0.0.1', port = 0, logFile } = {}) {
  const requests = []
  const waiters = new Set()
  const held = new Set()
  let responsesCount = 0
  let seq = 0

  const server = http.createServer(async (req, res) => {
    const receivedAt = Date.now()
    const chunks = []
    for await (const c of req) chunks.push(c)
    const raw = Buffer.concat(chunks).toString('utf8')
    let body = null
    try {
      body = raw ? JSON.parse(raw) : null
    } catch {
      body = { unparsed: raw.slice(0, 10_000) }
    }
    const entry = { receivedAt, method: req.method, url: req.url, headers: req.headers, body }
    const isResponses = req.method === 'POST' && /\/responses$/.test(req.url.split('?')[0])
    if (isResponses) entry.index = responsesCount++
    requests.push(entry)
    if (logFile) {
      try {
        fs.appendFileSync(logFile, JSON.stringify(entry) + '\n')
      } catch {}
    }
    for (const w of waiters) w()

    if (!isResponses) {
      // /v1/models and anything else: a well-formed "nothing here".
      if (req.method === 'GET' && /\/models$/.test(req.url.split('?')[0])) {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ object: 'list', data: [], models: [] }))
      } else {
        res.writeHead(404, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: { message: 'not in the stub', type: 'invalid_request_error' } }))
      }
      return
    }

    let reply
    try {
      reply = await script(body, { index: entry.index, requests, entry })
    } catch (err) {
      entry.error = String(err?.stack || err)
      reply = { status: 500, body: JSON.stringify({ error: { message: String(err?.message || err) } }) }
    }
    entry.reply = reply
    if (reply?.hang) {
      held.add(res)
      res.on('close', () => held.delete(res))
      return
    }
    if (reply?.status) {
      res.writeHead(reply.status, { 'content-type': 'application/json' })
      res.end(reply.body ?? '{}')
      return
    }
    const items = replyItems(reply, body, ++seq)
    entry.answeredItems = items
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    res.end(sseBody(items, `resp_${seq}`))
  })

  await new Promise((resolve, reject) => {
    server.once('error', reject)
    if (socketPath) {
      try {
        fs.unlinkSync(socketPath)
      } catch {}
      server.listen(socketPath, resolve)
    } else server.listen(port, host, resolve)
  })
  const address = server.address()
  const url = socketPath ? null : `http://${host}:${address.port}`

  /** Resolves with the first entry matching `pred` (log order), polling on arrivals. */
  function waitForRequest(pred, { timeout = 30_000, what = 'a matching request' } = {}) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const hit = requests.find(pred)
        if (hit) {
          done()
          resolve(hit)
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`stub: timed out after ${timeout} ms waiting for ${what}; ${requests.length} request(s) seen`))
      }, timeout)
      const done = () => {
        clearTimeout(timer)
        waiters.delete(check)
      }
      waiters.add(check)
      check()
    })
  }

  return {
    server,
    url,
    baseUrl: url && `${url}/v1`,
    port: address?.port,
    socketPath,
    requests,
    /** Only the model requests (POST …/responses), in order. */
    get responses() {
      return requests.filter((r) => r.index !== undefined)
    },
    waitForRequest,
    async close() {
      for (const res of held) res.destroy()
      server.closeAllConnections?.()
      await new Promise((r) => server.close(() => r()))
      if (socketPath) {
        try {
          fs.unlinkSync(socketPath)
        } catch {}
      }
    },
  }
}

// ---------------------------------------------------------------- replies

/** The output items a reply stands for, given the request (for the tool names it offers). */
export function replyItems(reply, body, n) {
  if (reply == null) reply = { say: 'done' }
  if (typeof reply === 'string') reply = { say: reply }
  if (reply.items) return reply.items
  const items = []
  if (reply.say !== undefined) items.push(message(reply.say, n))
  if (reply.shell !== undefined) items.push(toolCall(body, reply.shell, n, reply))
  return items
}

export function message(text, n = 1) {
  return {
    type: 'message',
    role: 'assistant',
    id: `msg_${n}`,
    status: 'completed',
    content: [{ type: 'output_text', text, annotations: [] }],
  }
}

/** Names of the function tools offered in a request. */
export function toolNames(body) {
  return (body?.tools || []).map((t) => t.name || t.function?.name || t.type).filter(Boolean)
}

/**
 * A call of whichever shell tool the request offers: `exec_command` (unified
 * exec, `{cmd}`), `shell_command` (`{command: string}`) or `shell`
 * (`{command: argv}`), in that order of preference unless `reply.tool` names one.
 */
export function toolCall(body, cmd, n = 1, reply = {}) {
  const names = toolNames(body)
  const pick = reply.tool || ['exec_command', 'shell_command', 'shell'].find((t) => names.includes(t)) || 'shell'
  let args
  if (pick === 'exec_command') args = { cmd, yield_time_ms: reply.yieldMs ?? 10_000 }
  else if (pick === 'shell_command') args = { command: cmd, timeout_ms: reply.timeoutMs ?? 60_000 }
  else args = { command: ['bash', '-lc', cmd], timeout_ms: reply.timeoutMs ?? 60_000 }
  if (reply.workdir) args.workdir = reply.workdir
  return {
    type: 'function_call',
    id: `fc_${n}`,
    call_id: `call_${n}`,
    name: pick,
    arguments: JSON.stringify(args),
    status: 'completed',
  }
}

/** The SSE stream of one response with these output items. */
export function sseBody(items, id = 'resp_1') {
  const events = []
  const response = { id, object: 'response', status: 'in_progress', output: [] }
  events.push({ type: 'response.created', response })
  events.push({ type: 'response.in_progress', response })
  items.forEach((item, i) => {
    const added = item.type === 'message' ? { ...item, status: 'in_progress', content: [] } : item
    events.push({ type: 'response.output_item.added', output_index: i, item: added })
    if (item.type === 'message') {
      const text = item.content.map((c) => c.text).join('')
      events.push({ type: 'response.content_part.added', output_index: i, item_id: item.id, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } })
      events.push({ type: 'response.output_text.delta', output_index: i, item_id: item.id, content_index: 0, delta: text })
      events.push({ type: 'response.output_text.done', output_index: i, item_id: item.id, content_index: 0, text })
    }
    events.push({ type: 'response.output_item.done', output_index: i, item })
  })
  events.push({
    type: 'response.completed',
    response: {
      id,
      object: 'response',
      status: 'completed',
      output: items,
      usage: {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 15,
      },
    },
  })
  return events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('')
}

// ---------------------------------------------------------- reading requests

/** Every text a request's input holds (messages, tool outputs), flattened, in order. */
export function inputTexts(body) {
  const out = []
  for (const item of body?.input || []) {
    if (item.type === 'message' || item.role) {
      const content = Array.isArray(item.content) ? item.content : [{ text: item.content }]
      for (const c of content) if (typeof c?.text === 'string') out.push({ role: item.role, type: item.type || 'message', text: c.text })
    } else if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
      const o = item.output
      const text = typeof o === 'string' ? o : Array.isArray(o) ? o.map((x) => x.text ?? '').join('') : o?.content ?? JSON.stringify(o)
      out.push({ role: 'tool', type: item.type, text, call_id: item.call_id })
    } else if (item.type === 'function_call') {
      out.push({ role: 'assistant', type: 'function_call', text: `${item.name} ${item.arguments}`, call_id: item.call_id })
    }
  }
  return out
}

/** The user-role texts of a request (the prompt, hook continuations, context). */
export const userTexts = (body) => inputTexts(body).filter((t) => t.role === 'user' || t.role === 'developer').map((t) => t.text)

/** The last input item of a request, as text. */
export function lastInputText(body) {
  const all = inputTexts(body)
  return all.length ? all[all.length - 1].text : ''
}

/** The outputs of tool calls in a request. */
export const toolOutputs = (body) => inputTexts(body).filter((t) => t.role === 'tool')

/** True when any text of the request's input contains `needle`. */
export const mentions = (body, needle) => inputTexts(body).some((t) => t.text.includes(needle))

/** True when the request's last item (what the model was just given) contains `needle`. */
export const lastMentions = (body, needle) => lastInputText(body).includes(needle)

/** The Codex session (thread) id a request belongs to (`prompt_cache_key`, else the header). */
export function sessionOf(entryOrBody) {
  const body = entryOrBody?.body !== undefined && entryOrBody?.method ? entryOrBody.body : entryOrBody
  const headers = entryOrBody?.headers ?? {}
  return body?.prompt_cache_key ?? body?.client_metadata?.session_id ?? headers['session-id'] ?? null
}

/**
 * True for the requests Codex makes beside the conversation: the TUI's
 * thread-title generator (no tools; "Generate a concise, single-line task
 * title"), and any other request offering no tools.
 */
export function isSideRequest(body) {
  return !(body?.tools?.length) || /Generate a concise, single-line task title/.test(JSON.stringify(body?.input ?? ''))
}

const itemKey = (item) => JSON.stringify(item)

/**
 * The input items of `entry` that no earlier request of the same session
 * carried (Codex re-sends the whole history each time): what the model was
 * newly shown by this request.
 */
export function newItems(requests, entry) {
  const sid = sessionOf(entry)
  const seen = new Set()
  for (const r of requests) {
    if (r === entry) break
    if (r.index === undefined || sessionOf(r) !== sid) continue
    for (const item of r.body?.input ?? []) seen.add(itemKey(item))
  }
  return (entry.body?.input ?? []).filter((item) => !seen.has(itemKey(item)))
}

/** The text of one input item (message content, tool output, call). */
export function itemText(item) {
  return inputTexts({ input: [item] }).map((t) => t.text).join('\n')
}
