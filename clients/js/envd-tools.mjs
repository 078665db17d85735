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
  const n = Buffer.byteLength(text, 'utf8')
  if (byteColumn < 1 || byteColumn - 1 > n) return undefined
  // ASCII (one byte per UTF-16 unit): the column is the same
  if (n === text.length) return byteColumn
  return Buffer.from(text, 'utf8').subarray(0, byteColumn - 1).toString('utf8').length + 1
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

/** The Connect stream of a Grep, fed chunk by chunk: events out, in
 * order; the end message kept. */
class GrepFrames {
  constructor(opts) {
    this.content = opts.outputMode === undefined || opts.outputMode === 'content'
    this.buf = null
    this.end = null
  }

  feed(chunk, out) {
    let buf = this.buf ? Buffer.concat([this.buf, chunk]) : chunk
    let at = 0
    while (!this.end && buf.length - at >= 5) {
      const n = buf.readUInt32BE(at + 1)
      if (buf.length - at < 5 + n) break
      const flags = buf[at]
      const m = JSON.parse(buf.toString('utf8', at + 5, at + 5 + n))
      at += 5 + n
      if (flags & 2) this.end = m
      else if (m.match) out.push({ match: matchOf(m.match, this.content) })
      else if (m.summary) out.push({ summary: summaryOf(m.summary) })
    }
    // what follows the end message (nothing, on a whole stream) is dropped
    this.buf = this.end || at === buf.length ? null : buf.subarray(at)
  }

  /** At the response's end: throws unless the stream ended well. */
  finish() {
    const end = this.end
    if (!end) throw new EnvdToolError('unknown', 'Grep: the stream ended without its end message')
    if (end.error) throw new EnvdToolError(end.error.code ?? 'unknown', end.error.message ?? 'Grep failed')
  }
}

function matchOf(x, content) {
  const out = { path: x.path }
  if (x.line !== undefined || content) {
    out.line = x.line ?? 0
    out.column = x.column ?? 0
    out.text = x.text ?? ''
    out.before = x.before ?? []
    out.after = x.after ?? []
    out.textTruncated = !!x.textTruncated
    out.columnUtf16 = utf16Column(out.text, out.column)
  }
  if (x.count !== undefined) out.count = x.count
  return out
}

function summaryOf(s) {
  return {
    filesSearched: s.filesSearched ?? 0, filesMatched: s.filesMatched ?? 0, matches: s.matches ?? 0,
    bytesSearched: Number(s.bytesSearched ?? 0), truncated: !!s.truncated,
    filesSkipped: s.filesSkipped ?? 0, binarySkipped: s.binarySkipped ?? 0,
  }
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

  /** One exchange: the request, sent; `onResponse` gets the response
   * (its body not read) once the head is in. */
  _request(method, path, headers, body, signal, onResponse) {
    if (body !== undefined) headers['Content-Length'] = Buffer.byteLength(body)
    const o = {
      protocol: this.url.protocol, hostname: this.url.hostname, port: this.url.port, path: this.base + path,
      method, headers, agent: this.agent,
    }
    if (signal) o.signal = signal
    const req = this.lib.request(o, onResponse)
    req.end(body)
    return req
  }

  /** One exchange; resolves with the response (its body not read) once
   * the head is in. */
  _send(method, path, headers, body, signal) {
    return new Promise((resolve, reject) => {
      this._request(method, path, headers, body, signal, resolve).on('error', reject)
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

  _grepBody(pattern, opts) {
    const msg = drop({
      path: opts.path ?? '', pattern, fixedString: opts.fixedString, ignoreCase: opts.ignoreCase,
      include: opts.include, exclude: opts.exclude, contextBefore: opts.contextBefore ?? opts.context,
      contextAfter: opts.contextAfter ?? opts.context, maxCount: opts.maxCount, limit: opts.limit,
      hidden: opts.hidden, noIgnore: opts.noIgnore, maxLineBytes: opts.maxLineBytes, outputMode: opts.outputMode,
    })
    const body = Buffer.from(JSON.stringify(msg))
    const env = Buffer.allocUnsafe(5 + body.length)
    env[0] = 0
    env.writeUInt32BE(body.length, 1)
    body.copy(env, 5)
    return env
  }

  /**
   * Grep as a stream: yields {match} objects as envd finds them
   * ({path, line, column, columnUtf16, text, before, after, textTruncated}
   * for "content"; {path} for "files"; {path, count} for "count"), then
   * one {summary}. Breaking out of the loop cancels the search.
   */
  async *grepStream(pattern, opts = {}) {
    const res = await this._send('POST', `/${SERVICE}/Grep`, this._headers('application/connect+json', opts),
      this._grepBody(pattern, opts), opts.signal)
    const frames = new GrepFrames(opts)
    try {
      if (res.statusCode !== 200) throw connectError('Grep', res.statusCode, (await this._read(res)).toString('utf8'))
      // Read to the response's own end, past the end message: a response
      // read whole leaves its connection to the next call.
      for await (const chunk of res) {
        const evs = []
        frames.feed(chunk, evs)
        for (const ev of evs) yield ev
      }
      frames.finish()
    } finally {
      // A search left early is cancelled in envd: its connection goes.
      if (!res.complete) res.destroy()
    }
  }

  /**
   * Grep collected: {matches, summary}. The same exchange as grepStream,
   * read with the response's own events (no step of an async iterator
   * per chunk and per match: a call of 20 matches spends most of its
   * client time there otherwise).
   */
  grep(pattern, opts = {}) {
    return new Promise((resolve, reject) => {
      const frames = new GrepFrames(opts)
      const evs = []
      let res
      const fail = (err) => {
        if (res && !res.complete) res.destroy()
        reject(err)
      }
      const req = this._request('POST', `/${SERVICE}/Grep`, this._headers('application/connect+json', opts),
        this._grepBody(pattern, opts), opts.signal, (r) => {
          res = r
          r.on('error', fail)
          if (r.statusCode !== 200) {
            const chunks = []
            r.on('data', (c) => chunks.push(c))
            r.on('end', () => fail(connectError('Grep', r.statusCode, Buffer.concat(chunks).toString('utf8'))))
            return
          }
          r.on('data', (c) => {
            try {
              frames.feed(c, evs)
            } catch (err) {
              fail(err)
            }
          })
          r.on('end', () => {
            try {
              frames.finish()
            } catch (err) {
              fail(err)
              return
            }
            const matches = []
            let summary
            for (const ev of evs) {
              if (ev.match) matches.push(ev.match)
              else summary = ev.summary
            }
            resolve({ matches, summary })
          })
          r.on('aborted', () => fail(new EnvdToolError('unknown', 'Grep: the stream ended without its end message')))
        })
      req.on('error', fail)
    })
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
