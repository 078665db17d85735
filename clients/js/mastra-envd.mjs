// SPDX-License-Identifier: Apache-2.0
// A Mastra WorkspaceFilesystem backed by envd: the files of an e2b sandbox,
// for Mastra's workspace tools (read_file, write_file, edit_file,
// list_files, grep, ...), reached over the official SDK Sandbox's
// connection (envd-tools.mjs). Each call is one or two envd requests:
// list_files is one ListDir (the native walk), grep one Grep (the native
// grep) instead of a read of every file; writes are envd's atomic uploads,
// and a write that Mastra guards with the mtime it read (edit_file after
// read_file) is made conditional on the version of what was read
// (If-Match), so a change made meanwhile fails it as StaleFileError, down
// to the last moment before the file is replaced.
//
//   import { Sandbox } from 'e2b'
//   import * as mastra from '@mastra/core/workspace'
//   import { EnvdFilesystem } from './mastra-envd.mjs'
//   const sbx = await Sandbox.create()
//   const filesystem = new EnvdFilesystem(sbx, { basePath: '/home/user/repo', mastra })
//   const tools = await mastra.createWorkspaceTools(new mastra.Workspace({ filesystem }))
//
// `mastra` is the '@mastra/core/workspace' module of the application (its
// error classes are what the tools test for); when omitted, it is
// imported here.

import { posix } from 'node:path'
import { EnvdTools, EnvdToolError } from './envd-tools.mjs'

let imported
async function mastraModule(given) {
  if (given) return given
  if (!imported) imported = import('@mastra/core/workspace')
  return imported
}

// Escapes a JavaScript RegExp (without the u flag) reads as the letter
// itself or as something else than PCRE2 does (\h, \v, \p, \A, \z, \Q, ...):
// such a pattern is searched by Mastra's own fallback, not by envd.
const JS_ESCAPES = new Set('dDwWsSbBnrtfcxuk0123456789'.split(''))

/** Why envd's Grep would not read `source` as JavaScript does, or ''. */
export function grepPatternProblem(source) {
  for (let i = 0; i < source.length; i++) {
    if (source[i] !== '\\') continue
    const c = source[i + 1] ?? ''
    if (/[A-Za-z0-9]/.test(c) && !JS_ESCAPES.has(c)) return `\\${c} differs between JavaScript and PCRE2`
    if (c === 'u' && source[i + 2] === '{') return '\\u{...} needs the u flag in JavaScript'
    i++
  }
  return ''
}

const MIME = {
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.webp': 'image/webp',
  '.svg': 'image/svg+xml', '.pdf': 'application/pdf', '.zip': 'application/zip', '.gz': 'application/gzip',
  '.json': 'application/json', '.js': 'text/javascript', '.mjs': 'text/javascript', '.ts': 'text/plain',
  '.md': 'text/markdown', '.txt': 'text/plain', '.html': 'text/html', '.css': 'text/css', '.csv': 'text/csv',
  '.xml': 'application/xml', '.yaml': 'text/yaml', '.yml': 'text/yaml',
}

export class EnvdFilesystem {
  /**
   * @param sandbox an official SDK Sandbox
   * @param opts.basePath the directory the workspace's paths are relative
   *   to ('' or omitted: the user's home)
   * @param opts.user the user the calls run as (default: the sandbox's)
   * @param opts.mastra the '@mastra/core/workspace' module
   * @param opts.readOnly refuse writes
   */
  constructor(sandbox, opts = {}) {
    this.tools = new EnvdTools(sandbox, { user: opts.user, timeoutMs: opts.timeoutMs })
    // null: the user's home, asked of envd at the first call
    this.basePath = opts.basePath ? opts.basePath.replace(/(.)\/+$/, '$1') : null
    this.readOnly = !!opts.readOnly
    this.id = opts.id ?? `envd-${sandbox.sandboxId}`
    this.name = 'EnvdFilesystem'
    this.provider = 'envd'
    this.displayName = 'Sandbox (envd)'
    this.mastraGiven = opts.mastra
    // What each file was when last read: its version, so that a write
    // guarded by the mtime of that read is made conditional on it.
    this.lastRead = new Map()
  }

  async _m() {
    return mastraModule(this.mastraGiven)
  }

  getInstructions() {
    return `Files of the sandbox, under ${this.basePath ?? 'the home directory'}.`
  }

  async init() {}
  async destroy() {
    this.tools.close()
  }

  /** The sandbox path of a workspace path; a path that climbs out of the
   * base is refused. */
  async resolve(p) {
    // Normalised as an absolute path, ".." cannot climb above the base.
    const rel = posix.normalize(`/${p ?? ''}`).replace(/^\/+/, '')
    if (this.basePath === null) this.basePath = (await this.tools.stat('')).path
    if (!rel) return this.basePath
    return this.basePath === '/' ? `/${rel}` : `${this.basePath}/${rel}`
  }

  /** The workspace path (relative, normalised) of p. */
  _rel(p) {
    return posix.normalize(`/${p ?? ''}`).replace(/^\/+/, '') || '.'
  }

  /** A Mastra error for an envd error on path p. */
  async _error(e, p, what) {
    const m = await this._m()
    if (!(e instanceof EnvdToolError)) return e
    const msg = e.message ?? ''
    if (e.code === 'not_found' || e.status === 404) return new m.FileNotFoundError(p)
    if (e.code === 'permission_denied' || e.status === 401 || e.status === 403) return new m.PermissionError(p, what)
    if (/is a directory/.test(msg)) return new m.IsDirectoryError(p)
    if (/not a directory/.test(msg)) return new m.NotDirectoryError(p)
    return new m.FilesystemError(`${what} ${p}: ${msg}`, e.code, p)
  }

  async _stat(abs) {
    try {
      return await this.tools.stat(abs)
    } catch (e) {
      if (e instanceof EnvdToolError && e.code === 'not_found') return null
      throw e
    }
  }

  async readFile(p, options = {}) {
    const abs = await this.resolve(p)
    let r
    try {
      r = await this.tools.readFile(abs)
    } catch (e) {
      throw await this._error(e, p, 'read')
    }
    this.lastRead.set(abs, r.version)
    if (!options.encoding) return r.content
    return r.content.toString(options.encoding)
  }

  async writeFile(p, content, options = {}) {
    const m = await this._m()
    if (this.readOnly) throw new m.WorkspaceReadOnlyError('writeFile')
    const abs = await this.resolve(p)
    const o = {}
    if (options.overwrite === false) o.create = true
    if (options.recursive === false) {
      const parent = posix.dirname(abs)
      const st = parent && parent !== '.' ? await this._stat(parent) : { type: 'FILE_TYPE_DIRECTORY' }
      if (!st) throw new m.DirectoryNotFoundError(posix.dirname(p))
    }
    if (options.expectedMtime) {
      // The file as the mtime was taken: unchanged since (its version
      // then is what was last read), and unchanged until it is replaced
      // (If-Match, which envd checks right before the rename).
      const st = await this._stat(abs)
      const actual = st ? new Date(entryMtimeMs(st)) : new Date(0)
      const read = this.lastRead.get(abs)
      if (!st || entryMtimeMs(st) !== options.expectedMtime.getTime() || (read && read !== st.version))
        throw new m.StaleFileError(p, options.expectedMtime, actual)
      o.ifVersion = read ?? st.version
    }
    try {
      const r = await this.tools.writeFile(abs, typeof content === 'string' ? content : Buffer.from(content), o)
      this.lastRead.delete(abs)
      return r
    } catch (e) {
      if (e instanceof EnvdToolError && e.status === 412) {
        if (o.create) throw new m.FileExistsError(p)
        const st = await this._stat(abs)
        throw new m.StaleFileError(p, options.expectedMtime, st ? new Date(entryMtimeMs(st)) : new Date(0))
      }
      throw await this._error(e, p, 'write')
    }
  }

  async appendFile(p, content) {
    const m = await this._m()
    if (this.readOnly) throw new m.WorkspaceReadOnlyError('appendFile')
    const abs = await this.resolve(p)
    const add = typeof content === 'string' ? Buffer.from(content) : Buffer.from(content)
    // Read, then write over that very version: a writer in between makes
    // the write fail (412), and it is done again on what is there.
    for (let i = 0; i < 8; i++) {
      let cur = null
      try {
        cur = await this.tools.readFile(abs)
      } catch (e) {
        if (!(e instanceof EnvdToolError && e.status === 404)) throw await this._error(e, p, 'append')
      }
      try {
        await this.tools.writeFile(abs, cur ? Buffer.concat([cur.content, add]) : add,
          cur ? { ifVersion: cur.version } : { create: true })
        this.lastRead.delete(abs)
        return
      } catch (e) {
        if (!(e instanceof EnvdToolError && e.status === 412)) throw await this._error(e, p, 'append')
      }
    }
    throw new m.FilesystemError(`append ${p}: the file kept changing`, 'ESTALE', p)
  }

  async deleteFile(p, options = {}) {
    const m = await this._m()
    if (this.readOnly) throw new m.WorkspaceReadOnlyError('deleteFile')
    const abs = await this.resolve(p)
    const st = await this._stat(abs)
    if (!st) {
      if (options.force) return
      throw new m.FileNotFoundError(p)
    }
    if (st.type === 'FILE_TYPE_DIRECTORY' && !st.symlinkTarget) throw new m.IsDirectoryError(p)
    await this.tools._unary('Remove', { path: abs })
    this.lastRead.delete(abs)
  }

  async copyFile(src, dest, options = {}) {
    const m = await this._m()
    if (this.readOnly) throw new m.WorkspaceReadOnlyError('copyFile')
    const [a, b] = [await this.resolve(src), await this.resolve(dest)]
    const st = await this._stat(a)
    if (!st) throw new m.FileNotFoundError(src)
    if (st.type === 'FILE_TYPE_DIRECTORY') throw new m.IsDirectoryError(src)
    const r = await this.tools.readFile(a)
    try {
      await this.tools.writeFile(b, r.content, options.overwrite === false ? { create: true } : {})
    } catch (e) {
      if (e instanceof EnvdToolError && e.status === 412) throw new m.FileExistsError(dest)
      throw await this._error(e, dest, 'copy')
    }
  }

  async moveFile(src, dest, options = {}) {
    const m = await this._m()
    if (this.readOnly) throw new m.WorkspaceReadOnlyError('moveFile')
    const [a, b] = [await this.resolve(src), await this.resolve(dest)]
    if (options.overwrite === false && (await this._stat(b))) throw new m.FileExistsError(dest)
    try {
      await this.tools._unary('Move', { source: a, destination: b })
    } catch (e) {
      throw await this._error(e, src, 'move')
    }
    this.lastRead.delete(a)
    this.lastRead.delete(b)
  }

  async mkdir(p, options = {}) {
    const m = await this._m()
    if (this.readOnly) throw new m.WorkspaceReadOnlyError('mkdir')
    const abs = await this.resolve(p)
    if (!options.recursive) {
      const parent = posix.dirname(abs)
      if (parent && parent !== '.' && !(await this._stat(parent))) throw new m.DirectoryNotFoundError(posix.dirname(p))
    }
    try {
      await this.tools._unary('MakeDir', { path: abs })
    } catch (e) {
      if (e instanceof EnvdToolError && e.code === 'already_exists') {
        if (options.recursive) return
        throw new m.FileExistsError(p)
      }
      if (e instanceof EnvdToolError && e.code === 'invalid_argument') throw new m.FileExistsError(p)
      throw await this._error(e, p, 'mkdir')
    }
  }

  async rmdir(p, options = {}) {
    const m = await this._m()
    if (this.readOnly) throw new m.WorkspaceReadOnlyError('rmdir')
    const abs = await this.resolve(p)
    const st = await this._stat(abs)
    if (!st) {
      if (options.force) return
      throw new m.DirectoryNotFoundError(p)
    }
    if (st.type !== 'FILE_TYPE_DIRECTORY') throw new m.NotDirectoryError(p)
    if (!options.recursive) {
      const r = await this.tools._unary('ListDir', { path: abs, depth: 1 })
      if ((r.entries ?? []).length) throw new m.DirectoryNotEmptyError(p)
    }
    await this.tools._unary('Remove', { path: abs })
  }

  /** Entries under abs to `depth` levels, as ListDir gives them. */
  async _list(p, depth) {
    const m = await this._m()
    const abs = await this.resolve(p)
    try {
      const r = await this.tools._unary('ListDir', { path: abs, depth })
      return { abs, entries: r.entries ?? [] }
    } catch (e) {
      if (e instanceof EnvdToolError && e.code === 'not_found') throw new m.DirectoryNotFoundError(p)
      if (e instanceof EnvdToolError && e.code === 'invalid_argument') throw new m.NotDirectoryError(p)
      throw await this._error(e, p, 'list')
    }
  }

  async readdir(p, options = {}) {
    const depth = options.recursive ? Math.max(1, options.maxDepth ?? 100) : 1
    const { abs, entries } = await this._list(p, depth)
    const exts = options.extension === undefined ? null : [].concat(options.extension)
    const out = []
    for (const e of entries) {
      const entry = fileEntry(e, relTo(abs, e.path))
      if (exts && entry.type === 'file' && !exts.some((x) => entry.name.endsWith(x.startsWith('.') ? x : `.${x}`))) continue
      out.push(entry)
    }
    return out
  }

  /** The native walk: every entry under p in one ListDir. */
  async walk(p, options = {}) {
    const { abs, entries } = await this._list(p, options.maxDepth ?? 100)
    const out = []
    for (const e of entries) {
      const rel = relTo(abs, e.path)
      if (!options.includeHidden && rel.split('/').some((s) => s.startsWith('.'))) continue
      const entry = fileEntry(e, rel.slice(rel.lastIndexOf('/') + 1))
      entry.path = rel
      out.push(entry)
    }
    return out
  }

  /**
   * The native grep: one Grep over p, every file (ignore files off,
   * hidden ones as asked: Mastra applies its own filters), matches grouped
   * by file with 0-based UTF-16 columns.
   */
  async grep(options) {
    const m = await this._m()
    const why = grepPatternProblem(options.pattern)
    if (why) throw new m.UnsupportedGrepPatternError(options.pattern, why)
    const abs = await this.resolve(options.path)
    const ctx = options.contextLines || undefined
    const results = []
    const byPath = new Map()
    try {
      for await (const ev of this.tools.grepStream(options.pattern, {
        path: abs, ignoreCase: !options.caseSensitive, hidden: !!options.includeHidden, noIgnore: true,
        maxCount: options.maxCountPerFile || undefined, limit: options.maxTotalMatches || undefined,
        contextBefore: ctx, contextAfter: ctx, maxLineBytes: 2048,
      })) {
        if (!ev.match) continue
        const x = ev.match
        let r = byPath.get(x.path)
        if (!r) {
          r = { path: x.path, matches: [] }
          byPath.set(x.path, r)
          results.push(r)
        }
        const match = { line: x.line, column: (x.columnUtf16 ?? 1) - 1, text: x.text }
        if (ctx) {
          match.before = x.before
          match.after = x.after
        }
        r.matches.push(match)
      }
    } catch (e) {
      if (e instanceof EnvdToolError && e.code === 'invalid_argument' && /regular expression/.test(e.message))
        throw new m.UnsupportedGrepPatternError(options.pattern, e.message)
      if (e instanceof EnvdToolError && e.code === 'not_found') throw new m.DirectoryNotFoundError(options.path)
      throw await this._error(e, options.path, 'grep')
    }
    return results
  }

  async exists(p) {
    return !!(await this._stat(await this.resolve(p)))
  }

  async stat(p) {
    const m = await this._m()
    const st = await this._stat(await this.resolve(p))
    if (!st) throw new m.FileNotFoundError(p)
    const mtime = new Date(entryMtimeMs(st))
    const dir = st.type === 'FILE_TYPE_DIRECTORY'
    const name = st.name ?? posix.basename(p)
    const out = {
      name, path: this._rel(p), type: dir ? 'directory' : 'file', size: dir ? 0 : Number(st.size ?? 0),
      createdAt: mtime, modifiedAt: mtime,
    }
    const mime = !dir && MIME[posix.extname(name).toLowerCase()]
    if (mime) out.mimeType = mime
    return out
  }
}

function entryMtimeMs(e) {
  const t = e.modifiedTime
  if (!t) return 0
  const d = typeof t === 'string' ? Date.parse(t) : Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6)
  return Number.isFinite(d) ? d : 0
}

function relTo(abs, path) {
  const base = abs === '/' ? '/' : `${abs}/`
  return path.startsWith(base) ? path.slice(base.length) : path
}

function fileEntry(e, name) {
  const entry = { name, type: e.type === 'FILE_TYPE_DIRECTORY' ? 'directory' : 'file' }
  if (entry.type === 'file') entry.size = Number(e.size ?? 0)
  if (e.symlinkTarget) {
    entry.isSymlink = true
    entry.symlinkTarget = e.symlinkTarget
  }
  return entry
}
