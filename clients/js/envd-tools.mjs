// SPDX-License-Identifier: Apache-2.0
// The agent's file tools of envd (docs/protocol.md, "Agent file tools")
// over the connection of an official e2b SDK `Sandbox`: its envd URL, its
// access token and the headers its own calls carry. No dependencies: the
// calls are Connect JSON over fetch().
//
//   import { Sandbox } from 'e2b'
//   import { envdTools } from './envd-tools.mjs'
//   const sbx = await Sandbox.create()
//   const tools = envdTools(sbx)               // as the sandbox's default user
//   await tools.glob('**/*.ts', { path: 'repo' })
//   for await (const m of tools.grepStream('TODO', { path: 'repo' })) ...
//   await tools.grep('TODO', { path: 'repo', contextAfter: 2 })
//   await tools.readLines('repo/src/a.ts', { offset: 10, limit: 50 })

const SERVICE = 'filesystem.Filesystem'

/** An error envd answered: `code` is the Connect code ("not_found", ...). */
export class EnvdToolError extends Error {
  constructor(code, message) {
    super(message)
    this.name = 'EnvdToolError'
    this.code = code
  }
}

/** The 1-based UTF-16 column (a JS string index + 1) of a 1-based byte
 * column in `text`, or undefined when the column lies past the text (a
 * line cut at maxLineBytes). */
export function utf16Column(text, byteColumn) {
  const bytes = Buffer.from(text, 'utf8')
  if (byteColumn < 1 || byteColumn - 1 > bytes.length) return undefined
  return bytes.subarray(0, byteColumn - 1).toString('utf8').length + 1
}

function drop(obj) {
  const out = {}
  for (const [k, v] of Object.entries(obj)) if (v !== undefined) out[k] = v
  return out
}

export class EnvdTools {
  /**
   * @param sandbox an official SDK Sandbox (Sandbox.create / connect)
   * @param opts.user the user the calls run as (default: the sandbox's)
   * @param opts.timeoutMs a deadline for every call (Connect-Timeout-Ms)
   */
  constructor(sandbox, opts = {}) {
    if (!sandbox || !sandbox.envdApiUrl) throw new TypeError('envdTools: a Sandbox of the e2b SDK is needed')
    this.url = sandbox.envdApiUrl.replace(/\/$/, '')
    this.headers = {
      'E2b-Sandbox-Id': sandbox.sandboxId,
      'E2b-Sandbox-Port': String(sandbox.envdPort ?? 49983),
    }
    if (sandbox.envdAccessToken) this.headers['X-Access-Token'] = sandbox.envdAccessToken
    if (opts.user) this.headers.Authorization = 'Basic ' + Buffer.from(`${opts.user}:`).toString('base64')
    this.timeoutMs = opts.timeoutMs
  }

  _headers(ctype, o) {
    const h = { ...this.headers, 'Content-Type': ctype, 'Connect-Protocol-Version': '1' }
    const t = o.timeoutMs ?? this.timeoutMs
    if (t) h['Connect-Timeout-Ms'] = String(t)
    return h
  }

  async _unary(method, msg, o = {}) {
    const res = await fetch(`${this.url}/${SERVICE}/${method}`, {
      method: 'POST',
      headers: this._headers('application/json', o),
      body: JSON.stringify(drop(msg)),
      signal: o.signal,
    })
    const text = await res.text()
    let body
    try {
      body = text ? JSON.parse(text) : {}
    } catch {
      throw new EnvdToolError('unknown', `${method}: HTTP ${res.status}: ${text.slice(0, 200)}`)
    }
    if (!res.ok) throw new EnvdToolError(body.code ?? 'unknown', body.message ?? `${method}: HTTP ${res.status}`)
    return body
  }

  /**
   * Files matching `pattern` (relative to opts.path): {entries, truncated};
   * entries are EntryInfo (name, path, size, modifiedTime, version, ...).
   */
  async glob(pattern, opts = {}) {
    const r = await this._unary('Glob', {
      path: opts.path ?? '', pattern, limit: opts.limit, hidden: opts.hidden, noIgnore: opts.noIgnore,
      sort: opts.sort,
    }, opts)
    return { entries: r.entries ?? [], truncated: !!r.truncated }
  }

  /**
   * Grep as a stream: yields {match} objects as envd finds them
   * ({path, line, column, columnUtf16, text, before, after, textTruncated}
   * for "content"; {path} for "files"; {path, count} for "count"), then
   * one {summary}. Breaking out of the loop cancels the search.
   */
  async *grepStream(pattern, opts = {}) {
    const msg = drop({
      path: opts.path ?? '', pattern, fixedString: opts.fixedString, ignoreCase: opts.ignoreCase,
      include: opts.include, exclude: opts.exclude, contextBefore: opts.contextBefore ?? opts.context,
      contextAfter: opts.contextAfter ?? opts.context, maxCount: opts.maxCount, limit: opts.limit,
      hidden: opts.hidden, noIgnore: opts.noIgnore, maxLineBytes: opts.maxLineBytes, outputMode: opts.outputMode,
    })
    const body = Buffer.from(JSON.stringify(msg))
    const env = Buffer.alloc(5 + body.length)
    env.writeUInt32BE(body.length, 1)
    body.copy(env, 5)
    const ac = new AbortController()
    const onAbort = () => ac.abort()
    opts.signal?.addEventListener('abort', onAbort)
    try {
      const res = await fetch(`${this.url}/${SERVICE}/Grep`, {
        method: 'POST', headers: this._headers('application/connect+json', opts), body: env, signal: ac.signal,
      })
      if (!res.ok) {
        const t = await res.text()
        let e = {}
        try { e = JSON.parse(t) } catch {}
        throw new EnvdToolError(e.code ?? 'unknown', e.message ?? `Grep: HTTP ${res.status}`)
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
            if (m.error) throw new EnvdToolError(m.error.code ?? 'unknown', m.error.message ?? 'Grep failed')
            return
          }
          if (m.match) {
            const x = m.match
            const out = { path: x.path }
            if (x.line !== undefined || opts.outputMode === undefined || opts.outputMode === 'content') {
              Object.assign(out, {
                line: x.line ?? 0, column: x.column ?? 0, text: x.text ?? '', before: x.before ?? [],
                after: x.after ?? [], textTruncated: !!x.textTruncated,
              })
              out.columnUtf16 = utf16Column(out.text, out.column)
            }
            if (x.count !== undefined) out.count = x.count
            yield { match: out }
          } else if (m.summary) {
            const s = m.summary
            yield {
              summary: {
                filesSearched: s.filesSearched ?? 0, filesMatched: s.filesMatched ?? 0, matches: s.matches ?? 0,
                bytesSearched: Number(s.bytesSearched ?? 0), truncated: !!s.truncated,
                filesSkipped: s.filesSkipped ?? 0, binarySkipped: s.binarySkipped ?? 0,
              },
            }
          }
        }
      }
      throw new EnvdToolError('unknown', 'Grep: the stream ended without its end message')
    } finally {
      opts.signal?.removeEventListener('abort', onAbort)
      ac.abort() // a search left early is cancelled in envd too
    }
  }

  /** Grep collected: {matches, summary}. */
  async grep(pattern, opts = {}) {
    const matches = []
    let summary
    for await (const ev of this.grepStream(pattern, opts)) {
      if (ev.match) matches.push(ev.match)
      else summary = ev.summary
    }
    return { matches, summary }
  }

  /** Lines offset.. of a file: {lines, firstLine, totalLines, truncated,
   * binary, version}. */
  async readLines(path, opts = {}) {
    const r = await this._unary('ReadLines', {
      path, offset: opts.offset, limit: opts.limit, maxBytes: opts.maxBytes,
    }, opts)
    return {
      lines: r.lines ?? [], firstLine: r.firstLine ?? (opts.offset || 1), totalLines: r.totalLines ?? 0,
      truncated: !!r.truncated, binary: !!r.binary, version: r.version ?? '',
    }
  }

  /** Stat with the file's version (EntryInfo). */
  async stat(path, opts = {}) {
    const r = await this._unary('Stat', { path }, opts)
    return r.entry
  }
}

export function envdTools(sandbox, opts) {
  return new EnvdTools(sandbox, opts)
}
