// SPDX-License-Identifier: Apache-2.0
// The agent's file tools of envd (docs/protocol.md, "Agent file tools")
// over the connection of an official e2b SDK `Sandbox`: its envd URL, its
// access token and the headers its own calls carry. No dependencies: the
// calls are Connect JSON (and /files) over node:http or node:https with a
// keep-alive agent of their own, which costs a fraction of what fetch()
// costs per call.
//
//   import { Sandbox } from 'e2b'
//   import { envdTools } from './envd-tools.mjs'
//   const sbx = await Sandbox.create()
//   const tools = envdTools(sbx)               // as the sandbox's default user
//   await tools.glob('**/*.ts', { path: 'repo' })
//   for await (const m of tools.grepStream('TODO', { path: 'repo' })) ...
//   await tools.grep('TODO', { path: 'repo', contextAfter: 2 })
//   const { lines, version } = await tools.readLines('repo/src/a.ts', { offset: 10, limit: 50 })
//   await tools.edit('repo/src/a.ts', { oldText: 'a', newText: 'b' }, { ifVersion: version })

import http from 'node:http'
import https from 'node:https'

const SERVICE = 'filesystem.Filesystem'

/** An error envd answered: `code` is the Connect code ("not_found",
 * "aborted", ...), or for /files the HTTP status ("412"). */
export class EnvdToolError extends Error {
  constructor(code, message, status) {
    super(message)
    this.name = 'EnvdToolError'
    this.code = code
    this.status = status
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

/** A version from an ETag header ("v", W/"v"), or ''. */
function versionOf(etag) {
  return etag ? etag.replace(/^W\//, '').replace(/"/g, '') : ''
}

function connectError(method, status, text) {
  let e = {}
  try {
    e = text ? JSON.parse(text) : {}
  } catch {}
  return new EnvdToolError(e.code ?? 'unknown', e.message ?? `${method}: HTTP ${status}: ${String(text).slice(0, 200)}`, status)
}

export class EnvdTools {
  /**
   * @param sandbox an official SDK Sandbox (Sandbox.create / connect)
   * @param opts.user the user the calls run as (default: the sandbox's)
   * @param opts.timeoutMs a deadline for every call (Connect-Timeout-Ms)
   * @param opts.maxSockets connections kept to envd (default 8)
   */
  constructor(sandbox, opts = {}) {
    if (!sandbox || !sandbox.envdApiUrl) throw new TypeError('envdTools: a Sandbox of the e2b SDK is needed')
    this.url = new URL(sandbox.envdApiUrl.replace(/\/$/, ''))
    this.base = this.url.pathname.replace(/\/$/, '')
    this.lib = this.url.protocol === 'https:' ? https : http
    this.agent = new this.lib.Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 8 })
    this.headers = {
      'E2b-Sandbox-Id': sandbox.sandboxId,
      'E2b-Sandbox-Port': String(sandbox.envdPort ?? 49983),
    }
    if (sandbox.envdAccessToken) this.headers['X-Access-Token'] = sandbox.envdAccessToken
    this.user = opts.user
    if (opts.user) this.headers.Authorization = 'Basic ' + Buffer.from(`${opts.user}:`).toString('base64')
    this.timeoutMs = opts.timeoutMs
  }

  /** Close the kept connections (they do not keep node alive meanwhile). */
  close() {
    this.agent.destroy()
  }

  _headers(ctype, o, extra) {
    const h = { ...this.headers, 'Connect-Protocol-Version': '1', ...extra }
    if (ctype) h['Content-Type'] = ctype
    const t = o.timeoutMs ?? this.timeoutMs
    if (t) h['Connect-Timeout-Ms'] = String(t)
    return h
  }

  /** One exchange; resolves with the response (its body not read) once
   * the head is in. */
  _send(method, path, headers, body, signal) {
    return new Promise((resolve, reject) => {
      if (body !== undefined) headers['Content-Length'] = Buffer.byteLength(body)
      const req = this.lib.request(
        {
          protocol: this.url.protocol, hostname: this.url.hostname, port: this.url.port, path: this.base + path,
          method, headers, agent: this.agent, signal,
        },
        resolve,
      )
      req.on('error', reject)
      req.end(body)
    })
  }

  async _read(res) {
    const chunks = []
    for await (const c of res) chunks.push(c)
    return Buffer.concat(chunks)
  }

  async _unary(method, msg, o = {}) {
    const res = await this._send('POST', `/${SERVICE}/${method}`, this._headers('application/json', o),
      JSON.stringify(drop(msg)), o.signal)
    const text = (await this._read(res)).toString('utf8')
    if (res.statusCode !== 200) throw connectError(method, res.statusCode, text)
    try {
      return text ? JSON.parse(text) : {}
    } catch {
      throw new EnvdToolError('unknown', `${method}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`, res.statusCode)
    }
  }

  _filesQuery(path) {
    const q = new URLSearchParams({ path })
    if (this.user) q.set('username', this.user)
    return `/files?${q}`
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
    const res = await this._send('POST', `/${SERVICE}/Grep`, this._headers('application/connect+json', opts), env,
      opts.signal)
    let end = null
    try {
      if (res.statusCode !== 200) throw connectError('Grep', res.statusCode, (await this._read(res)).toString('utf8'))
      let buf = Buffer.alloc(0)
      // Read to the response's own end, past the end message: a response
      // read whole leaves its connection to the next call.
      for await (const chunk of res) {
        buf = buf.length ? Buffer.concat([buf, chunk]) : chunk
        while (!end && buf.length >= 5) {
          const n = buf.readUInt32BE(1)
          if (buf.length < 5 + n) break
          const flags = buf[0]
          const m = JSON.parse(buf.subarray(5, 5 + n).toString('utf8'))
          buf = buf.subarray(5 + n)
          if (flags & 2) {
            end = m
          } else if (m.match) {
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
      if (!end) throw new EnvdToolError('unknown', 'Grep: the stream ended without its end message')
      if (end.error) throw new EnvdToolError(end.error.code ?? 'unknown', end.error.message ?? 'Grep failed')
    } finally {
      // A search left early is cancelled in envd: its connection goes.
      if (!res.complete) res.destroy()
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

  /**
   * Exact-text edits of one file, applied in order, all or none:
   * `edits` is one {oldText, newText, replaceAll} or an array of them.
   * opts.ifVersion: the version the edits were made against (readLines,
   * stat, readFile); a file changed since fails with code "aborted".
   * An empty oldText creates the file (or fills an empty one).
   * Resolves with {version, replacements}.
   */
  async edit(path, edits, opts = {}) {
    const list = (Array.isArray(edits) ? edits : [edits]).map((e) =>
      drop({ oldText: e.oldText, newText: e.newText, replaceAll: e.replaceAll || undefined }))
    const r = await this._unary('Edit', { path, edits: list, ifVersion: opts.ifVersion || undefined }, opts)
    return { version: r.version ?? '', replacements: r.replacements ?? 0 }
  }

  /** Stat with the file's version (EntryInfo); code "not_found" when missing. */
  async stat(path, opts = {}) {
    const r = await this._unary('Stat', { path }, opts)
    return r.entry
  }

  /**
   * A whole file and its version: {content (a Buffer; a string with
   * opts.encoding), version}. GET /files.
   */
  async readFile(path, opts = {}) {
    const res = await this._send('GET', this._filesQuery(path), this._headers(undefined, opts,
      { 'Accept-Encoding': 'identity' }), undefined, opts.signal)
    const body = await this._read(res)
    if (res.statusCode !== 200) throw filesError('readFile', res.statusCode, body)
    return {
      content: opts.encoding ? body.toString(opts.encoding) : body,
      version: versionOf(res.headers.etag),
    }
  }

  /**
   * Write a whole file, atomically (POST /files): {version}. Missing
   * directories are made. opts.ifVersion: only over that version of the
   * file (If-Match); opts.create: only when there is no file
   * (If-None-Match: *). Either failing is code "412", nothing written.
   */
  async writeFile(path, content, opts = {}) {
    const extra = {}
    if (opts.ifVersion) extra['If-Match'] = `"${opts.ifVersion}"`
    if (opts.create) extra['If-None-Match'] = '*'
    const res = await this._send('POST', this._filesQuery(path),
      this._headers('application/octet-stream', opts, extra),
      typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content), opts.signal)
    const body = await this._read(res)
    if (res.statusCode !== 200) throw filesError('writeFile', res.statusCode, body)
    return { version: versionOf(res.headers.etag) }
  }
}

function filesError(what, status, body) {
  let e = {}
  try {
    e = JSON.parse(body.toString('utf8'))
  } catch {}
  return new EnvdToolError(String(status), e.message ?? `${what}: HTTP ${status}`, status)
}

export function envdTools(sandbox, opts) {
  return new EnvdTools(sandbox, opts)
}
