// SPDX-License-Identifier: Apache-2.0
// Commands an agent can trust (docs/protocol.md: "Idempotent Start",
// "Input offsets", "WaitFor", "Output budgets", "Why a command ended") over
// the connection of an official e2b SDK `Sandbox`: its envd URL, its access
// token and the headers its own calls carry. No dependencies: Connect JSON
// over fetch().
//
//   import { Sandbox } from 'e2b'
//   import { envdProcess, trustEnvs } from './process.mjs'
//   const sbx = await Sandbox.create()
//   // the unmodified SDK: a retried run never runs twice, a flood of
//   // output is cut to its head and tail
//   const envs = trustEnvs({ idempotencyKey: 'deploy-42', outputBudget: { head: 4096, tail: 16384 } })
//   await sbx.commands.run('npm run build', { envs })
//   const proc = envdProcess(sbx)
//   await proc.waitForPort(3000)                    // or waitForHttp, waitForLog, waitForExit, waitForPath
//   const { data } = await proc.readOutput({ tag: 'build' }, { from: 4096 })

const SERVICE = 'process.Process'

/** An error envd answered: `code` is the Connect code ("deadline_exceeded", ...). */
export class EnvdProcessError extends Error {
  constructor(code, message) {
    super(message)
    this.name = 'EnvdProcessError'
    this.code = code
  }
}

/**
 * The envs that give an unmodified SDK call envd's additions: an
 * idempotency key (a retried Start answers as a Connect to the first one's
 * process instead of running it again) and an output budget (the first
 * `head` bytes, then the last `tail` ones). Neither reaches the command.
 */
export function trustEnvs({ idempotencyKey, outputBudget, envs } = {}) {
  const out = { ...(envs ?? {}) }
  if (idempotencyKey !== undefined) out.ENVD_IDEMPOTENCY_KEY = String(idempotencyKey)
  if (outputBudget) out.ENVD_OUTPUT_BUDGET = `head:${outputBudget.head ?? 0},tail:${outputBudget.tail ?? 0}`
  return out
}

function selector(p) {
  if (typeof p === 'number') return { pid: p }
  if (typeof p === 'string') return { tag: p }
  if (p && (p.pid !== undefined || p.tag !== undefined)) return p.pid !== undefined ? { pid: p.pid } : { tag: p.tag }
  throw new TypeError('a process is a pid, a tag, or {pid} / {tag}')
}

function envelope(msg) {
  const body = Buffer.from(JSON.stringify(msg))
  const env = Buffer.alloc(5 + body.length)
  env.writeUInt32BE(body.length, 1)
  body.copy(env, 5)
  return env
}

export class EnvdProcess {
  /**
   * @param sandbox an official SDK Sandbox (Sandbox.create / connect)
   * @param opts.user the user the calls run as (default: the sandbox's)
   */
  constructor(sandbox, opts = {}) {
    if (!sandbox || !sandbox.envdApiUrl) throw new TypeError('envdProcess: a Sandbox of the e2b SDK is needed')
    this.url = sandbox.envdApiUrl.replace(/\/$/, '')
    this.headers = {
      'E2b-Sandbox-Id': sandbox.sandboxId,
      'E2b-Sandbox-Port': String(sandbox.envdPort ?? 49983),
    }
    if (sandbox.envdAccessToken) this.headers['X-Access-Token'] = sandbox.envdAccessToken
    if (opts.user) this.headers.Authorization = 'Basic ' + Buffer.from(`${opts.user}:`).toString('base64')
  }

  _headers(ctype, o = {}) {
    const h = { ...this.headers, 'Content-Type': ctype, 'Connect-Protocol-Version': '1' }
    if (o.timeoutMs) h['Connect-Timeout-Ms'] = String(o.timeoutMs)
    return h
  }

  async _unary(method, msg, o = {}) {
    const res = await fetch(`${this.url}/${SERVICE}/${method}`, {
      method: 'POST', headers: this._headers('application/json', o), body: JSON.stringify(msg), signal: o.signal,
    })
    const text = await res.text()
    let body
    try {
      body = text ? JSON.parse(text) : {}
    } catch {
      throw new EnvdProcessError('unknown', `${method}: HTTP ${res.status}: ${text.slice(0, 200)}`)
    }
    if (!res.ok) throw new EnvdProcessError(body.code ?? 'unknown', body.message ?? `${method}: HTTP ${res.status}`)
    return body
  }

  /** A server stream: yields each event ({start}, {data}, {withheld}, {gap}, {end}, ...). */
  async *_stream(method, msg, o = {}) {
    const res = await fetch(`${this.url}/${SERVICE}/${method}`, {
      method: 'POST', headers: this._headers('application/connect+json', o), body: envelope(msg), signal: o.signal,
    })
    if (!res.ok) {
      const t = await res.text()
      let e = {}
      try { e = JSON.parse(t) } catch {}
      throw new EnvdProcessError(e.code ?? 'unknown', e.message ?? `${method}: HTTP ${res.status}`)
    }
    let buf = Buffer.alloc(0)
    for await (const chunk of res.body) {
      buf = buf.length ? Buffer.concat([buf, chunk]) : Buffer.from(chunk)
      while (buf.length >= 5) {
        const n = buf.readUInt32BE(1)
        if (buf.length < 5 + n) break
        const flags = buf[0]
        const m = JSON.parse(buf.subarray(5, 5 + n).toString('utf8'))
        buf = buf.subarray(5 + n)
        if (flags & 2) {
          if (m.error) throw new EnvdProcessError(m.error.code ?? 'unknown', m.error.message ?? `${method} failed`)
          return
        }
        if (m.event) yield m.event
      }
    }
    throw new EnvdProcessError('unknown', `${method}: the stream ended without its end message`)
  }

  /**
   * WaitFor: resolves with envd's answer ({detail, waitedMs, address,
   * httpStatus, line, lineOffset, end}) once the condition holds; rejects
   * with EnvdProcessError "deadline_exceeded" saying what envd saw last.
   * `condition` is one of {port}, {http}, {output}, {exit}, {path} as in
   * docs/protocol.md; opts.timeoutMs bounds the wait (default 60 s).
   */
  async waitFor(condition, opts = {}) {
    const msg = { ...condition }
    if (opts.timeoutMs) msg.timeoutMs = opts.timeoutMs
    const r = await this._unary('WaitFor', msg, { signal: opts.signal })
    return {
      ...r,
      waitedMs: Number(r.waitedMs ?? 0),
      lineOffset: r.line !== undefined ? Number(r.lineOffset ?? 0) : undefined,
    }
  }

  /** A TCP listener on port (opts.address: only one that takes that address). */
  waitForPort(port, opts = {}) {
    return this.waitFor({ port: { port, address: opts.address } }, opts)
  }

  /** GET http://127.0.0.1:port/path answering a status in [statusMin, statusMax] (200-399). */
  waitForHttp(port, path = '/', opts = {}) {
    return this.waitFor({ http: { port, path, statusMin: opts.statusMin, statusMax: opts.statusMax } }, opts)
  }

  /**
   * A line of a process's output (pid, tag or {pid}/{tag}) matching
   * `pattern`: a string (a regular expression, PCRE2 with JavaScript's
   * escapes) or a RegExp (its source; flag i for any case). Output written
   * before the call counts. opts.fixed: a plain string; opts.stream:
   * 'stdout' or 'stderr'.
   */
  waitForLog(proc, pattern, opts = {}) {
    const re = pattern instanceof RegExp
    return this.waitFor({
      output: {
        process: selector(proc), pattern: re ? pattern.source : String(pattern),
        ignoreCase: opts.ignoreCase ?? (re && pattern.flags.includes('i')), fixed: opts.fixed, stream: opts.stream,
      },
    }, opts)
  }

  /** The process's end; resolves with the end event (exitCode, status, error, reason, usage). */
  async waitForExit(proc, opts = {}) {
    const r = await this.waitFor({ exit: selector(proc) }, opts)
    return { ...r.end, exitCode: r.end?.exitCode ?? 0 }
  }

  /** The path exists (relative paths are in the user's home). */
  waitForPath(path, opts = {}) {
    return this.waitFor({ path: { path } }, opts)
  }

  /**
   * Input to the process's stdin (or its terminal with opts.pty) at byte
   * `offset` of everything it has taken: bytes it took already are not
   * written again, so a retried write never doubles input. Resolves with
   * the count of bytes taken after it (the next offset).
   */
  async sendStdin(proc, data, opts = {}) {
    const bytes = Buffer.from(data).toString('base64')
    const msg = { process: selector(proc), input: opts.pty ? { pty: bytes } : { stdin: bytes } }
    if (opts.offset !== undefined) msg.offset = opts.offset
    const r = await this._unary('SendInput', msg, opts)
    return Number(r.inputOffset ?? 0)
  }

  /**
   * A process's output by offset (Connect with replayFrom): {data (Buffer,
   * the bytes from `from` on, in order), firstOffset, gaps, withheld, end}.
   * What the ring dropped is a gap. opts.budget: {head, tail} for this
   * stream. Reads to the process's end; opts.signal stops earlier.
   */
  async readOutput(proc, opts = {}) {
    const msg = { process: selector(proc), replayFrom: opts.from ?? 0 }
    if (opts.budget) msg.outputBudget = { headBytes: opts.budget.head ?? 0, tailBytes: opts.budget.tail ?? 0 }
    const parts = []
    const gaps = []
    const withheld = []
    let end
    let firstOffset
    for await (const ev of this._stream('Connect', msg, opts)) {
      if (ev.data) {
        const d = ev.data
        const b = Buffer.from(d.stdout ?? d.stderr ?? d.pty ?? '', 'base64')
        if (firstOffset === undefined) firstOffset = Number(d.offset ?? 0)
        parts.push(b)
        if (opts.to !== undefined && Number(d.offset ?? 0) + b.length >= opts.to) break
      } else if (ev.gap) {
        gaps.push({ from: Number(ev.gap.from ?? 0), to: Number(ev.gap.to ?? 0) })
      } else if (ev.withheld) {
        const w = ev.withheld
        withheld.push({
          from: Number(w.from ?? 0), to: Number(w.to ?? 0), bytes: Number(w.bytes ?? 0),
          readableFrom: Number(w.readableFrom ?? 0),
        })
      } else if (ev.end) {
        end = ev.end
      }
    }
    let data = Buffer.concat(parts)
    if (opts.to !== undefined && firstOffset !== undefined) data = data.subarray(0, Math.max(0, opts.to - firstOffset))
    return { data, firstOffset: firstOffset ?? opts.from ?? 0, gaps, withheld, end }
  }

  /** List with each process's idempotency key ({pid, tag, idempotencyKey, config}). */
  async list(opts = {}) {
    const r = await this._unary('List', {}, opts)
    return (r.processes ?? []).map((p) => ({ ...p, idempotencyKey: p.idempotencyKey ?? '' }))
  }
}

export function envdProcess(sandbox, opts) {
  return new EnvdProcess(sandbox, opts)
}
