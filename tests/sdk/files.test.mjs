// SPDX-License-Identifier: Apache-2.0
// The official e2b SDK's `files` API against envd (debug mode,
// E2B_SANDBOX_URL pointing at the envd under test, default user "user").
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, readFileSync, statSync, existsSync, symlinkSync, writeFileSync, appendFileSync, chmodSync, readdirSync } from 'node:fs'
import { createServer } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  Sandbox,
  FileNotFoundError,
  InvalidArgumentError,
  NotFoundError,
  SandboxError,
  FileType,
  FilesystemEventType,
  getSignature,
} from 'e2b'

process.env.E2B_DEBUG = 'true'
let sbx
let base // absolute scratch directory
const rel = `envd-sdk-files-${process.pid}` // scratch directory under /home/user

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
// Wait for cond; ms is a deadline for a machine ten times slower than a
// loaded one (HANG_S, as in tests/common.sh), not a timing check.
const HANG_MS = Number(process.env.HANG_S || 300) * 1000
async function until(cond, ms = HANG_MS) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await sleep(25)
  }
  return false
}
const uid = (name) => Number(execFileSync('id', ['-u', name]).toString().trim())

before(async () => {
  try {
    execFileSync('id', ['user'], { stdio: 'ignore' })
  } catch {
    execFileSync('useradd', ['-m', '-s', '/bin/bash', 'user'])
  }
  base = mkdtempSync('/tmp/envd-sdk-files-')
  sbx = await Sandbox.create({ debug: true })
})

after(() => {
  rmSync(base, { recursive: true, force: true })
  rmSync(`/home/user/${rel}`, { recursive: true, force: true })
})

test('write + read text; relative paths land in /home/user owned by user', async () => {
  const info = await sbx.files.write(`${rel}/hello.txt`, 'hello world')
  assert.equal(info.path, `/home/user/${rel}/hello.txt`)
  assert.equal(info.name, 'hello.txt')
  assert.equal(await sbx.files.read(`${rel}/hello.txt`), 'hello world')
  assert.equal(await sbx.files.read(`/home/user/${rel}/hello.txt`), 'hello world')
  const st = statSync(`/home/user/${rel}/hello.txt`)
  assert.equal(st.uid, uid('user'))
  assert.equal(statSync(`/home/user/${rel}`).uid, uid('user'))
})

test('bytes, blob and stream reads round-trip binary data', async () => {
  const data = new Uint8Array(300000)
  for (let i = 0; i < data.length; i++) data[i] = (i * 7919) & 0xff
  await sbx.files.write(`${base}/bin.dat`, data.buffer)
  const bytes = await sbx.files.read(`${base}/bin.dat`, { format: 'bytes' })
  assert.deepEqual(Buffer.from(bytes), Buffer.from(data))
  const blob = await sbx.files.read(`${base}/bin.dat`, { format: 'blob' })
  assert.equal(blob.size, data.length)
  const stream = await sbx.files.read(`${base}/bin.dat`, { format: 'stream' })
  const chunks = []
  for await (const c of stream) chunks.push(Buffer.from(c))
  assert.deepEqual(Buffer.concat(chunks), Buffer.from(data))
})

test('empty file reads as empty string', async () => {
  await sbx.files.write(`${base}/empty.txt`, '')
  assert.equal(await sbx.files.read(`${base}/empty.txt`), '')
  assert.equal(statSync(`${base}/empty.txt`).size, 0)
})

test('gzip read and gzip (octet-stream) upload', async () => {
  const text = 'compressible '.repeat(10000)
  const w = await sbx.files.write(`${base}/gz/up.txt`, text, { gzip: true })
  assert.equal(w.path, `${base}/gz/up.txt`)
  assert.equal(readFileSync(`${base}/gz/up.txt`, 'utf8'), text)
  assert.equal(await sbx.files.read(`${base}/gz/up.txt`, { gzip: true }), text)
})

// Downloads are gzip-encoded whenever the SDK's HTTP stack asks for it
// (it always does); its own decoder must accept every stream envd builds:
// stored blocks for random data, deflated blocks for text, the edges.
test('gzip downloads decode in the SDK: random, text, empty, 1 byte, block edges', async () => {
  const rnd = (n) => {
    const b = Buffer.alloc(n)
    let x = 0x9e3779b9
    for (let i = 0; i < n; i++) {
      x ^= x << 13
      x ^= x >>> 17
      x ^= x << 5
      b[i] = x & 0xff
    }
    return b
  }
  const words = ['sandbox', 'stream', 'gzip', 'block', 'file', 'the', 'of', 'and']
  const text = (n) => {
    let s = ''
    for (let i = 0; s.length < n; i++) s += words[(i * 7) % 8] + (i % 11 ? ' ' : '\n')
    return Buffer.from(s.slice(0, n))
  }
  const cases = {
    'random.bin': rnd(3 * 131072 + 5),
    'text.txt': text(1 << 20),
    'empty.bin': Buffer.alloc(0),
    'one.bin': Buffer.from('x'),
    'block.bin': rnd(131072),
  }
  for (const [name, data] of Object.entries(cases)) writeFileSync(`${base}/${name}`, data)
  for (const [name, data] of Object.entries(cases)) {
    const bytes = await sbx.files.read(`${base}/${name}`, { format: 'bytes' })
    assert.deepEqual(Buffer.from(bytes), data, `${name} (bytes)`)
    const stream = await sbx.files.read(`${base}/${name}`, { format: 'stream' })
    const chunks = []
    for await (const c of stream) chunks.push(Buffer.from(c))
    assert.deepEqual(Buffer.concat(chunks), data, `${name} (stream)`)
  }
  // The same HTTP stack the SDK uses, to see the encoding on the wire.
  const res = await fetch(`${process.env.ENVD_URL}/files?path=${encodeURIComponent(`${base}/text.txt`)}&username=user`)
  assert.equal(res.headers.get('content-encoding'), 'gzip')
  assert.deepEqual(Buffer.from(await res.arrayBuffer()), cases['text.txt'])
})

test('gzip download of a file growing while it is read decodes to a prefix of it', async () => {
  const p = `${base}/grow.txt`
  const line = Buffer.from('a line of text that keeps coming\n')
  writeFileSync(p, Buffer.concat(Array(100000).fill(line)))
  // The growth is bounded (40 appends, 2.6 MB): the reader chases it, and
  // where envd compresses slowly (the VM under emulation) 2 000 appends
  // (132 MB) kept the download going for a quarter of an hour.
  let writing = true
  const writer = (async () => {
    for (let i = 0; writing && i < 40; i++) {
      appendFileSync(p, Buffer.concat(Array(2000).fill(line)))
      await sleep(1)
    }
  })()
  const stream = await sbx.files.read(p, { format: 'stream' })
  const chunks = []
  for await (const c of stream) chunks.push(Buffer.from(c))
  writing = false
  await writer
  const got = Buffer.concat(chunks)
  assert.ok(got.length >= 100000 * line.length, `got ${got.length} bytes`)
  assert.deepEqual(got, readFileSync(p).subarray(0, got.length))
})

test('streamed upload (ReadableStream, octet-stream)', async () => {
  const parts = ['first ', 'second ', 'third']
  const stream = new ReadableStream({
    start(c) {
      for (const p of parts) c.enqueue(new TextEncoder().encode(p))
      c.close()
    },
  })
  const info = await sbx.files.write(`${base}/stream.txt`, stream)
  assert.equal(info.path, `${base}/stream.txt`)
  assert.equal(readFileSync(`${base}/stream.txt`, 'utf8'), parts.join(''))
})

test('writeFiles: absolute and relative names, response in part order', async () => {
  const res = await sbx.files.write([
    { path: `${base}/multi/0/a.txt`, data: 'A' },
    { path: `${rel}/multi/b.txt`, data: 'B' },
    { path: `${base}/multi/c.txt`, data: new TextEncoder().encode('C').buffer },
  ])
  assert.deepEqual(
    res.map((r) => r.path),
    [`${base}/multi/0/a.txt`, `/home/user/${rel}/multi/b.txt`, `${base}/multi/c.txt`],
  )
  assert.equal(readFileSync(`${base}/multi/0/a.txt`, 'utf8'), 'A')
  assert.equal(readFileSync(`/home/user/${rel}/multi/b.txt`, 'utf8'), 'B')
  assert.equal(readFileSync(`${base}/multi/c.txt`, 'utf8'), 'C')
  // one-entry array form: still multipart, filename is the full path
  const one = await sbx.files.write([{ path: `${base}/multi/deep/er/d.txt`, data: 'D' }])
  assert.equal(one.length, 1)
  assert.equal(one[0].path, `${base}/multi/deep/er/d.txt`)
})

test('overwrite replaces the file whole (atomic by default), keeping its mode', async () => {
  await sbx.files.write(`${base}/inplace.txt`, 'one')
  chmodSync(`${base}/inplace.txt`, 0o600)
  const ino = statSync(`${base}/inplace.txt`).ino
  await sbx.files.write(`${base}/inplace.txt`, 'two two')
  assert.notEqual(statSync(`${base}/inplace.txt`).ino, ino)
  assert.equal(statSync(`${base}/inplace.txt`).mode & 0o777, 0o600)
  assert.equal(readFileSync(`${base}/inplace.txt`, 'utf8'), 'two two')
  assert.ok(!readdirSync(base).some((n) => n.startsWith('.envd-upload.')))
})

test('metadata: set, replace, clear, and xattrs set by other tools', async () => {
  const p = `${base}/meta.txt`
  const w = await sbx.files.write(p, 'x', { metadata: { Owner: 'alice', tag: 'v1' } })
  assert.deepEqual(w.metadata, { owner: 'alice', tag: 'v1' })
  assert.deepEqual((await sbx.files.getInfo(p)).metadata, { owner: 'alice', tag: 'v1' })
  await sbx.files.write(p, 'y', { metadata: { tag: 'v2' } })
  assert.deepEqual((await sbx.files.getInfo(p)).metadata, { tag: 'v2' })
  await sbx.files.write(p, 'z')
  assert.equal((await sbx.files.getInfo(p)).metadata, undefined)
  execFileSync('setfattr', ['-n', 'user.e2b.external', '-v', 'yes', p])
  assert.deepEqual((await sbx.files.getInfo(p)).metadata, { external: 'yes' })
  const listed = await sbx.files.list(base)
  assert.deepEqual(listed.find((e) => e.name === 'meta.txt').metadata, { external: 'yes' })
})

test('getInfo / exists / symlinks', async () => {
  await sbx.files.write(`${base}/info/f.txt`, '12345')
  const i = await sbx.files.getInfo(`${base}/info/f.txt`)
  assert.equal(i.type, FileType.FILE)
  assert.equal(i.size, 5)
  assert.equal(i.permissions, '-rw-r--r--')
  assert.equal(i.mode, 0o644)
  assert.equal(i.owner, 'user')
  assert.ok(i.modifiedTime instanceof Date)
  assert.equal(await sbx.files.exists(`${base}/info/f.txt`), true)
  assert.equal(await sbx.files.exists(`${base}/info/nope`), false)
  symlinkSync(`${base}/info`, `${base}/link-to-dir`)
  const l = await sbx.files.getInfo(`${base}/link-to-dir`)
  assert.equal(l.type, FileType.DIR)
  assert.equal(l.symlinkTarget, `${base}/info`)
  assert.ok(l.permissions.startsWith('L'))
  const t = await sbx.files.getInfo('/tmp')
  assert.equal(t.permissions, 'dtrwxrwxrwx')
  await assert.rejects(sbx.files.getInfo(`${base}/missing`), FileNotFoundError)
})

test('list: depth, lexical pre-order, root excluded, symlinked dir not descended', async () => {
  const d = `${base}/tree`
  for (const f of ['b/z.txt', 'b/a/deep.txt', 'a.txt', 'c/x.txt']) await sbx.files.write(`${d}/${f}`, f)
  symlinkSync(`${d}/c`, `${d}/ln`)
  const one = await sbx.files.list(d)
  assert.deepEqual(one.map((e) => e.name), ['a.txt', 'b', 'c', 'ln'])
  assert.equal(one.find((e) => e.name === 'b').type, FileType.DIR)
  const two = await sbx.files.list(d, { depth: 2 })
  assert.deepEqual(
    two.map((e) => e.path),
    [`${d}/a.txt`, `${d}/b`, `${d}/b/a`, `${d}/b/z.txt`, `${d}/c`, `${d}/c/x.txt`, `${d}/ln`],
  )
  const three = await sbx.files.list(d, { depth: 3 })
  assert.ok(three.some((e) => e.path === `${d}/b/a/deep.txt`))
  // through a symlinked root: listed under the requested path
  const viaLink = await sbx.files.list(`${d}/ln`)
  assert.deepEqual(viaLink.map((e) => e.path), [`${d}/ln/x.txt`])
  // absolute paths are not cleaned, but listed entries are
  const viaDots = await sbx.files.list(`${d}/c/../b/a`)
  assert.deepEqual(viaDots.map((e) => e.path), [`${d}/b/a/deep.txt`])
  await assert.rejects(sbx.files.list(`${d}/missing`), NotFoundError)
  await assert.rejects(sbx.files.list(`${d}/a.txt`), InvalidArgumentError)
})

test('makeDir: creates parents, false when it exists', async () => {
  assert.equal(await sbx.files.makeDir(`${base}/mk/a/b`), true)
  assert.equal(statSync(`${base}/mk/a/b`).isDirectory(), true)
  assert.equal(statSync(`${base}/mk/a`).uid, uid('user'))
  assert.equal(await sbx.files.makeDir(`${base}/mk/a/b`), false)
  await sbx.files.write(`${base}/mk/file`, 'f')
  await assert.rejects(sbx.files.makeDir(`${base}/mk/file`), InvalidArgumentError)
})

test('rename: creates destination parents, returns the new entry, keeps metadata', async () => {
  await sbx.files.write(`${base}/mv/src.txt`, 'move me', { metadata: { k: 'v' } })
  const e = await sbx.files.rename(`${base}/mv/src.txt`, `${base}/mv/new/dir/dst.txt`)
  assert.equal(e.path, `${base}/mv/new/dir/dst.txt`)
  assert.equal(e.name, 'dst.txt')
  assert.deepEqual(e.metadata, { k: 'v' })
  assert.equal(existsSync(`${base}/mv/src.txt`), false)
  await assert.rejects(sbx.files.rename(`${base}/mv/gone`, `${base}/mv/x`), NotFoundError)
})

test('remove: recursive, missing path succeeds', async () => {
  await sbx.files.write(`${base}/rm/a/b/c.txt`, 'c')
  symlinkSync(`${base}/info`, `${base}/rm/a/link`)
  await sbx.files.remove(`${base}/rm`)
  assert.equal(existsSync(`${base}/rm`), false)
  assert.equal(existsSync(`${base}/info/f.txt`), true) // symlink target untouched
  await sbx.files.remove(`${base}/rm`)
})

test('read errors: missing file is FileNotFoundError, directory is InvalidArgumentError', async () => {
  await assert.rejects(sbx.files.read(`${base}/does-not-exist`), FileNotFoundError)
  await assert.rejects(sbx.files.read(base), InvalidArgumentError)
})

test('watchDir: SDK write produces WRITE; create/remove/rename events', async () => {
  const d = `${base}/watch1`
  await sbx.files.makeDir(d)
  await sbx.files.write(`${d}/existing.txt`, 'x')
  const events = []
  const h = await sbx.files.watchDir(d, (e) => events.push(e))
  await sbx.files.write(`${d}/existing.txt`, 'changed')
  await sbx.files.write(`${d}/new.txt`, 'new')
  await sbx.files.rename(`${d}/new.txt`, `${d}/renamed.txt`)
  await sbx.files.remove(`${d}/renamed.txt`)
  const has = (name, type) => events.some((e) => e.name === name && e.type === type)
  assert.ok(
    await until(() => has('existing.txt', FilesystemEventType.WRITE) && has('renamed.txt', FilesystemEventType.REMOVE)),
    JSON.stringify(events),
  )
  assert.ok(has('new.txt', FilesystemEventType.CREATE))
  assert.ok(has('new.txt', FilesystemEventType.RENAME))
  assert.ok(has('renamed.txt', FilesystemEventType.CREATE))
  assert.ok(events.every((e) => e.entry === undefined))
  await h.stop()
})

test('watchDir recursive: new subdirectories are watched, contents reported', async () => {
  const d = `${base}/watch2`
  await sbx.files.makeDir(`${d}/pre/existing`)
  const events = []
  const h = await sbx.files.watchDir(d, (e) => events.push(e), { recursive: true })
  await sbx.files.write(`${d}/pre/existing/in-old.txt`, '1')
  await sbx.files.makeDir(`${d}/sub`)
  await until(() => events.some((e) => e.name === 'sub'))
  await sbx.files.write(`${d}/sub/nested.txt`, '2')
  // mkdir -p: contents created before the watch lands are reported too
  execFileSync('mkdir', ['-p', `${d}/x/y/z`])
  const has = (name, type) => events.some((e) => e.name === name && e.type === type)
  assert.ok(
    await until(
      () =>
        has('pre/existing/in-old.txt', FilesystemEventType.CREATE) &&
        has('sub', FilesystemEventType.CREATE) &&
        has('sub/nested.txt', FilesystemEventType.WRITE) &&
        has('x', FilesystemEventType.CREATE) &&
        has('x/y', FilesystemEventType.CREATE) &&
        has('x/y/z', FilesystemEventType.CREATE),
    ),
    JSON.stringify(events.map((e) => [e.name, e.type])),
  )
  await h.stop()
})

test('watchDir includeEntry attaches EntryInfo with absolute path', async () => {
  const d = `${base}/watch3`
  await sbx.files.makeDir(d)
  const events = []
  const h = await sbx.files.watchDir(d, (e) => events.push(e), { includeEntry: true })
  await sbx.files.write(`${d}/e.txt`, 'entry')
  assert.ok(await until(() => events.some((e) => e.type === FilesystemEventType.WRITE && e.entry)))
  const w = events.find((e) => e.type === FilesystemEventType.WRITE && e.entry)
  assert.equal(w.entry.path, `${d}/e.txt`)
  assert.equal(w.entry.type, FileType.FILE)
  await sbx.files.remove(`${d}/e.txt`)
  assert.ok(await until(() => events.some((e) => e.type === FilesystemEventType.REMOVE)))
  assert.equal(events.find((e) => e.type === FilesystemEventType.REMOVE).entry, undefined)
  await h.stop()
})

test('watchDir errors: missing path is NotFoundError, a file is a SandboxError', async () => {
  await assert.rejects(sbx.files.watchDir(`${base}/nope`, () => {}), NotFoundError)
  await sbx.files.write(`${base}/plain.txt`, 'p')
  await assert.rejects(sbx.files.watchDir(`${base}/plain.txt`, () => {}), SandboxError)
})

test('watchDir stop closes the stream and later watches still work', async () => {
  const d = `${base}/watch4`
  await sbx.files.makeDir(d)
  for (let i = 0; i < 5; i++) {
    const events = []
    const h = await sbx.files.watchDir(d, (e) => events.push(e))
    await sbx.files.write(`${d}/f${i}.txt`, 'x')
    assert.ok(await until(() => events.length > 0))
    await h.stop()
  }
})

// ---- signed URLs against a separate envd that was given a token via /init ----

function freePort() {
  return new Promise((resolve) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port
      s.close(() => resolve(p))
    })
  })
}

test('signed upload/download URLs with an access token set by /init', async () => {
  // ENVD_BIN may be relative to the repository root (scripts/run-tests.sh).
  const root = fileURLToPath(new URL('../..', import.meta.url))
  const bin = path.resolve(root, process.env.ENVD_BIN ?? 'build/envd')
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const child = spawn(bin, ['-isnotfc', '-port', String(port), '-default-user', 'user'], { stdio: 'ignore' })
  let spawnError
  child.on('error', (e) => (spawnError = e))
  try {
    assert.ok(await until(async () => spawnError !== undefined || ((await fetch(`${url}/health`).catch(() => null))?.ok ?? false)))
    assert.equal(spawnError, undefined, `cannot start ${bin}`)
    const token = 'secret-access-token-for-tests'
    const init = await fetch(`${url}/init`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ accessToken: token }),
    })
    assert.ok(init.status >= 200 && init.status < 300, `init: ${init.status}`)
    const secured = new Sandbox({
      sandboxId: 'debug_sandbox_id',
      envdVersion: '99.99.99',
      envdAccessToken: token,
      sandboxUrl: url,
      debug: true,
    })
    // The SDK's own calls carry X-Access-Token.
    await secured.files.write(`${base}/signed/by-header.txt`, 'via header')
    assert.equal(await secured.files.read(`${base}/signed/by-header.txt`), 'via header')

    // Upload through a signed URL, without any header.
    const up = await secured.uploadUrl(`${base}/signed/up.txt`)
    assert.match(up, /signature=v1_/)
    const form = new FormData()
    form.append('file', new Blob(['signed upload']), `${base}/signed/up.txt`)
    const r1 = await fetch(up, { method: 'POST', body: form })
    assert.equal(r1.status, 200, await r1.clone().text())
    assert.equal(readFileSync(`${base}/signed/up.txt`, 'utf8'), 'signed upload')

    const down = await secured.downloadUrl(`${base}/signed/up.txt`, { useSignatureExpiration: 60 })
    assert.match(down, /signature_expiration=/)
    const r2 = await fetch(down)
    assert.equal(r2.status, 200)
    assert.equal(await r2.text(), 'signed upload')

    // A read signature does not allow writing, and tampering is refused.
    const r3 = await fetch(down.replace('signature=', 'signature=x'))
    assert.equal(r3.status, 401)
    assert.equal((await r3.json()).message, 'invalid signature')
    const noSig = await fetch(`${url}/files?path=${encodeURIComponent(`${base}/signed/up.txt`)}`)
    assert.equal(noSig.status, 401)
    assert.equal((await noSig.json()).message, 'missing signature query parameter')
    const badHeader = await fetch(down, { headers: { 'X-Access-Token': 'wrong' } })
    assert.equal(badHeader.status, 401)
    assert.equal((await badHeader.json()).message, 'access token present in header but does not match')

    // Expired signature (computed exactly as the SDK does).
    const exp = Math.floor(Date.now() / 1000) - 10
    const sig = await getSignature({
      path: `${base}/signed/up.txt`,
      operation: 'read',
      user: undefined,
      expirationInSeconds: 0,
      envdAccessToken: token,
    })
    assert.match(sig.signature, /^v1_[A-Za-z0-9+/]{43}$/)
    const { createHash } = await import('node:crypto')
    const raw = `${base}/signed/up.txt:read::${token}:${exp}`
    const expired = 'v1_' + createHash('sha256').update(raw).digest('base64').replace(/=+$/, '')
    const r4 = await fetch(
      `${url}/files?path=${encodeURIComponent(`${base}/signed/up.txt`)}&signature=${encodeURIComponent(expired)}&signature_expiration=${exp}`,
    )
    assert.equal(r4.status, 401)
    assert.equal((await r4.json()).message, 'signature is already expired')
  } finally {
    child.kill()
  }
})
