// SPDX-License-Identifier: Apache-2.0
// The parts of node:fs the tests/sdk suites use to look at the machine,
// answered by the guest (guest.mjs); everything else is node:fs itself.
import * as fs from 'node:fs'
import { gzipSync } from 'node:zlib'
import { run, quote, onBeforeRun } from './guest.mjs'

export * from 'node:fs'
export default fs

const enoent = (p, what) => Object.assign(new Error(`ENOENT: no such file or directory, ${what} '${p}'`), { code: 'ENOENT' })

export function readFileSync(p, opts) {
  let out
  try {
    out = run(`cat ${quote(p)}`)
  } catch {
    throw enoent(p, 'open')
  }
  const enc = typeof opts === 'string' ? opts : opts?.encoding
  return enc ? out.toString(enc) : out
}

export function statSync(p, opts) {
  let out
  try {
    out = run(`stat -L -c '%u %g %i %s %f %Y' ${quote(p)}`).toString().trim()
  } catch (e) {
    if (opts?.throwIfNoEntry === false) return undefined
    throw enoent(p, 'stat')
  }
  const [uid, gid, ino, size, hexmode, mtime] = out.split(' ')
  const mode = parseInt(hexmode, 16)
  const type = mode & 0o170000
  return {
    uid: Number(uid),
    gid: Number(gid),
    ino: Number(ino),
    size: Number(size),
    mode,
    mtimeMs: Number(mtime) * 1000,
    isDirectory: () => type === 0o040000,
    isFile: () => type === 0o100000,
    isSymbolicLink: () => type === 0o120000,
  }
}

export function existsSync(p) {
  try {
    run(`test -e ${quote(p)}`)
    return true
  } catch {
    return false
  }
}

export function mkdtempSync(prefix) {
  return run(`mktemp -d ${quote(prefix + 'XXXXXX')}`).toString().trim()
}

export function rmSync(p) {
  run(`rm -rf ${quote(p)}`)
}

export function chmodSync(p, mode) {
  try {
    run(`chmod ${(Number(mode) & 0o7777).toString(8)} ${quote(p)}`)
  } catch {
    throw enoent(p, 'chmod')
  }
}

export function symlinkSync(target, p) {
  run(`ln -s ${quote(target)} ${quote(p)}`)
}

// Bytes go over as base64 in pieces: the command is one argument of the
// guest's shell, and the kernel caps one argument at 128 KiB.
// Data that compresses well (the text the suites write) goes in one call.
function putBytes(p, data, append) {
  const b = Buffer.isBuffer(data) ? data : Buffer.from(String(data))
  const piece = 64 << 10
  const z = gzipSync(b).toString('base64')
  if (z.length <= 96 << 10) {
    run(`printf %s ${quote(z)} | base64 -d | gunzip ${append ? '>>' : '>'} ${quote(p)}`)
    return
  }
  if (!append) run(`: > ${quote(p)}`)
  for (let off = 0; off < b.length; off += piece) {
    run(`printf %s ${quote(b.subarray(off, off + piece).toString('base64'))} | base64 -d >> ${quote(p)}`)
  }
}

export function writeFileSync(p, data) {
  putBytes(p, data, false)
}

// Appends are gathered on the host and written at most every APPEND_MS (and
// before any other guest command): a guest command costs tens of
// milliseconds under emulation and blocks the suite's event loop, so one
// per append would starve a download running alongside (a file growing
// while it is read took 2000 commands and 90 s). The file still grows while
// it is read, in fewer, larger steps.
const APPEND_MS = 100
const pending = new Map()
let lastFlush = 0

function flushAppends() {
  for (const [p, parts] of pending) putBytes(p, Buffer.concat(parts), true)
  pending.clear()
  lastFlush = Date.now()
}
onBeforeRun(flushAppends)
process.on('exit', flushAppends)

export function appendFileSync(p, data) {
  const b = Buffer.isBuffer(data) ? data : Buffer.from(String(data))
  if (!pending.has(p)) pending.set(p, [])
  pending.get(p).push(b)
  if (Date.now() - lastFlush >= APPEND_MS) flushAppends()
}

export function readdirSync(p) {
  let out
  try {
    out = run(`ls -A ${quote(p)}`).toString()
  } catch {
    throw enoent(p, 'scandir')
  }
  return out.split('\n').filter(Boolean)
}

export function mkdirSync(p, opts) {
  try {
    run(`mkdir ${opts?.recursive ? '-p ' : ''}${quote(p)}`)
  } catch {
    throw Object.assign(new Error(`EEXIST or ENOENT: mkdir '${p}'`), { code: existsSync(p) ? 'EEXIST' : 'ENOENT' })
  }
  return opts?.recursive ? p : undefined
}

export function chownSync(p, uid, gid) {
  try {
    run(`chown ${Number(uid)}:${Number(gid)} ${quote(p)}`)
  } catch {
    throw enoent(p, 'chown')
  }
}

// Seconds since the epoch of a Date, or of a number of seconds as node takes it.
const epochSeconds = (t) => (t instanceof Date ? t.getTime() / 1000 : Number(t))

export function utimesSync(p, atime, mtime) {
  try {
    run(`touch -a -d @${epochSeconds(atime)} ${quote(p)} && touch -m -d @${epochSeconds(mtime)} ${quote(p)}`)
  } catch {
    throw enoent(p, 'utime')
  }
}
