#!/usr/bin/env node
// proc-manager's Model Context Protocol server over stdio. Each tool calls the
// same Rust core as the CLI and the JS API, and answers with the short text
// the CLI prints; a failure comes back as a tool error, never a crash.
import { createRequire } from 'node:module'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { z } from 'zod'

const pm = createRequire(import.meta.url)('proc-manager')

const text = (value) => ({ content: [{ type: 'text', text: value }] })

/**
 * User text (a process's command line, a failure reason) that this server puts
 * into an answer itself, written out as the core writes it in its own text
 * (`\x1b`): a control character must never reach the client's terminal.
 */
const visible = (value) => String(value).replace(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/g, (c) => {
  const code = c.charCodeAt(0)
  return code < 0x80 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`
})

/** Runs a tool body; any thrown error becomes an `isError` result with its message. */
const tool = (body) => async (args) => {
  try {
    return text(await body(args))
  } catch (error) {
    // The core's hints name CLI commands; here the model has tools instead.
    const message = visible(error?.message ?? error).replace('run `run-bg list --all`', 'call list_jobs with all: true')
    return { isError: true, content: [{ type: 'text', text: message }] }
  }
}

const jobId = z.string().describe('Job id, e.g. npm-test-3f2a1c')

const server = new McpServer({ name: 'proc-manager', version: '0.1.0' })

server.registerTool('run_background', {
  description: 'Start a shell command in the background (for anything over 10 s or 50 lines of output). Returns its jobId at once.',
  inputSchema: {
    command: z.string().describe('Shell command line, run with /bin/sh -c'),
    label: z.string().optional(),
    cwd: z.string().optional(),
    timeoutMs: z.number().positive().optional().describe('Kill the job after this long'),
    owner: z.string().optional(),
    notify: z.boolean().optional().describe('false: no exit notification'),
  },
}, tool(({ command, ...options }) => {
  const job = pm.runBackground(command, options)
  return `started jobId: ${job.jobId} (pid ${job.pid}); check it with check_job`
}))

server.registerTool('check_job', {
  description: 'Status, exit code, runtime and the last lines of a job (ANSI stripped, repeats folded).',
  inputSchema: {
    jobId,
    lines: z.number().int().positive().optional().describe('Default 20'),
    grep: z.string().optional().describe('Only lines matching this regex'),
    errors: z.boolean().optional().describe('Only error-like lines, with context'),
  },
}, tool(({ jobId: id, ...options }) => pm.checkJobText(id, options)))

server.registerTool('list_jobs', {
  description: 'Jobs: running ones and those ended within the hour (all: every job).',
  inputSchema: {
    status: z.enum(['running', 'success', 'failed', 'killed', 'timeout', 'orphaned', 'lost']).optional(),
    owner: z.string().optional(),
    all: z.boolean().optional(),
  },
}, tool((options) => pm.listJobsText(options)))

server.registerTool('kill_job', {
  description: "Kill a job's whole process tree: SIGTERM, then SIGKILL after the grace period.",
  inputSchema: {
    jobId,
    graceMs: z.number().nonnegative().optional().describe('Default 5000'),
    force: z.boolean().optional().describe('SIGKILL at once'),
  },
}, tool(async ({ jobId: id, ...options }) => (await pm.killJob(id, options)).message))

server.registerTool('wait_job', {
  description: 'Wait until a job ends (or timeoutMs passes), then show it as check_job does.',
  inputSchema: {
    jobId,
    timeoutMs: z.number().nonnegative().optional(),
  },
}, tool(async ({ jobId: id, timeoutMs }) => {
  const result = await pm.waitJob(id, { timeoutMs })
  const note = result.timedOut ? `still running after ${timeoutMs} ms\n` : ''
  return note + pm.checkJobText(id)
}))

server.registerTool('cleanup_orphans', {
  description: 'Find processes left behind by ended jobs (and orphaned jobs); mode kill removes them.',
  inputSchema: {
    mode: z.enum(['list', 'kill']),
    owner: z.string().optional(),
    force: z.boolean().optional().describe('With kill: SIGKILL at once'),
  },
}, tool(async (options) => {
  const report = await pm.cleanupOrphans(options)
  const line = (p) => `pid ${p.pid} ${visible(p.command)} (jobId: ${p.jobId}, ${p.jobStatus})`
  const lines = report.orphanedJobs.map((j) => `orphaned jobId: ${j.jobId} (${visible(j.command)})`)
  if (options.mode === 'kill') {
    lines.push(...report.killed.map((p) => `killed ${line(p)}`))
    lines.push(...report.failed.map((p) => `failed ${line(p)}: ${visible(p.reason)}`))
  } else {
    lines.push(...report.processes.map(line))
  }
  return lines.length ? lines.join('\n') : 'no orphans'
}))

await server.connect(new StdioServerTransport())
