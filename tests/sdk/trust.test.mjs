// SPDX-License-Identifier: Apache-2.0
// Commands an agent can trust, through the unmodified official e2b SDK (the
// envs route) and clients/js/process.mjs over its Sandbox: a run retried
// with one ENVD_IDEMPOTENCY_KEY runs once, ENVD_OUTPUT_BUDGET cuts a flood
// to its head and tail and the middle is read back by offset, WaitFor on a
// port, an HTTP status, a log line, an exit and a path, input at offsets,
// and why a command ended.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createServer } from 'node:net'
import { readFileSync, rmSync, mkdirSync, writeFileSync } from 'node:fs'
import { Sandbox, CommandExitError } from 'e2b'
import { envdProcess, trustEnvs, EnvdProcessError } from '../../clients/js/process.mjs'

process.env.E2B_DEBUG = 'true'
let sbx, proc
const tmp = `/tmp/envd-sdk-trust-${process.pid}`
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const lines = (p) => {
  try {
    return readFileSync(p, 'utf8').split('\n').filter(Boolean)
  } catch {
    return []
  }
}
const freePort = () =>
  new Promise((res) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port
      s.close(() => res(p))
    })
  })

before(async () => {
  try {
    execFileSync('id', ['user'], { stdio: 'ignore' })
  } catch {
    execFileSync('useradd', ['-m', '-s', '/bin/bash', 'user'])
  }
  rmSync(tmp, { recursive: true, force: true })
  mkdirSync(tmp, { recursive: true, mode: 0o777 })
  execFileSync('chmod', ['777', tmp])
  sbx = await Sandbox.create({ debug: true })
  proc = envdProcess(sbx)
})

test('a run retried 20 times with one idempotency key runs once', async () => {
  const count = `${tmp}/runs`
  const key = `sdk-${process.pid}-${Date.now()}`
  const envs = trustEnvs({ idempotencyKey: key })
  const cmd = `echo $$ >> ${count}; echo started; sleep 1; echo finished`
  const handles = []
  for (let i = 0; i < 10; i++) handles.push(await sbx.commands.run(cmd, { envs, background: true }))
  const results = await Promise.all(handles.map((h) => h.wait()))
  for (let i = 0; i < 10; i++) results.push(await sbx.commands.run(cmd, { envs }))
  assert.equal(lines(count).length, 1, 'spawned once')
  assert.equal(new Set(handles.map((h) => h.pid)).size, 1, 'every retry answers with the same pid')
  for (const r of results) {
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'started\nfinished\n', 'every retry gets the whole output')
  }
  // The key is not the command's, and List shows it.
  const h = await sbx.commands.run('env | grep -c ^ENVD_ || true; sleep 60', {
    envs: trustEnvs({ idempotencyKey: key + '-list' }), background: true,
  })
  const listed = (await proc.list()).find((p) => p.pid === h.pid)
  assert.equal(listed.idempotencyKey, key + '-list')
  const seen = await proc.waitForLog(h.pid, /^\d+$/)
  assert.equal(seen.line, '0', 'no ENVD_ variable reached the command')
  await h.kill()
  await assert.rejects(h.wait())
  // Another command with a key that is taken.
  await assert.rejects(sbx.commands.run('echo other', { envs }), (e) => {
    assert.match(e.message, /idempotency key .* was used for process/)
    return true
  })
})

// 50 MB; against the VM (software emulation), 8 MB: still eight rings.
const MB = process.env.VM_URL ? 8 : 50

test('an output budget cuts a flood to its head and tail; the middle is read by offset', async () => {
  const n = Math.floor(MB * 1000000 / 11)
  const total = n * 11
  const gen = `python3 -c "import sys; w = sys.stdout.write; [w('%010d\\n' % i) for i in range(${n})]"`
  const line = (i) => String(i).padStart(10, '0') + '\n'
  const expected = (a, b) => {
    let s = ''
    for (let i = Math.floor(a / 11); i * 11 < b; i++) s += line(i)
    const o = Math.floor(a / 11) * 11
    return s.slice(a - o, b - o)
  }
  const h = await sbx.commands.run(gen, {
    envs: trustEnvs({ outputBudget: { head: 4096, tail: 16384 } }), background: true, timeoutMs: 0,
  })
  const r = await h.wait()
  assert.equal(r.exitCode, 0)
  assert.ok(r.stdout.length <= 24 * 1024, `at most 24 KiB reached the SDK (${r.stdout.length})`)
  assert.equal(r.stdout, expected(0, 4096) + expected(total - 16384, total), 'head and tail')
  // The middle, by offset, as far as the ring still holds it: a stream
  // with a zero budget withholds everything and says from where the ring
  // has it (readableFrom); the bytes are read from there.
  const probe = await proc.readOutput(h.pid, { from: 0, budget: { head: 0, tail: 0 } })
  assert.equal(probe.data.length, 0)
  assert.equal(probe.withheld.length, 1)
  const { from, to, readableFrom: ringStart } = probe.withheld[0]
  assert.deepEqual([from, to], [0, total])
  assert.ok(ringStart > 4096 && ringStart < total - 16384, `the ring holds the newest part (${ringStart})`)
  const mid = await proc.readOutput(h.pid, { from: ringStart, to: total - 16384 })
  assert.equal(mid.gaps.length, 0)
  assert.equal(mid.data.toString(), expected(ringStart, total - 16384), 'the middle the ring holds, by offset')
})

// Servers are the sandbox's own commands (as an agent starts them), so the
// suite checks the same thing from the host and against the VM.
const shq = (s) => "'" + s.replace(/'/g, "'\\''") + "'"
const server = (port, script) =>
  sbx.commands.run(`python3 -c ${shq(script)} ${port}`, { background: true, timeoutMs: 0 })

test('waitFor: a port that listens 2 s later', async () => {
  const port = await freePort()
  const mark = `${tmp}/about-to-listen-${port}`
  const h = await server(port, [
    'import socket, sys, time',
    'time.sleep(2)',
    `open(${JSON.stringify(mark)}, 'w').close()`,
    's = socket.socket()',
    "s.bind(('127.0.0.1', int(sys.argv[1])))",
    's.listen(8)',
    'time.sleep(600)',
  ].join('\n'))
  const r = await proc.waitForPort(port)
  // The server marks the moment just before its listen(): an answer that
  // came before the listen would find no mark.
  assert.equal(readFileSync(mark, 'utf8'), '', 'the answer came after the listen')
  assert.equal(r.address, `127.0.0.1:${port}`)
  await h.kill()
})

test('waitFor: an HTTP status, a log line, an exit, a path', async () => {
  const port = await freePort()
  const w = proc.waitForHttp(port, '/ready', { statusMin: 200, statusMax: 299 })
  const h = await server(port, [
    'import http.server, sys',
    'hits = []',
    'class H(http.server.BaseHTTPRequestHandler):',
    '    def do_GET(self):',
    '        hits.append(self.path)',
    '        self.send_response(200 if len(hits) > 2 else 503)',
    "        self.send_header('Content-Length', '0')",
    '        self.end_headers()',
    "        print('hit', len(hits), flush=True)",
    '    def log_message(self, *a): pass',
    "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()",
  ].join('\n'))
  const r = await w
  assert.equal(r.httpStatus, 200)
  const hits = await proc.waitForLog(h.pid, /^hit 3$/)
  assert.equal(hits.line, 'hit 3', 'two answers out of range, then the one in range')
  await h.kill()

  const g = await sbx.commands.run('echo booting; sleep 1; echo "ready on :8080"; sleep 60', { background: true })
  const l = await proc.waitForLog(g.pid, /READY on :(\d+)/i)
  assert.equal(l.line, 'ready on :8080')
  const early = await proc.waitForLog(g.pid, 'booting', { fixed: true })
  assert.equal(early.lineOffset, 0, 'output written before the wait counts')
  await g.kill()
  const end = await proc.waitForExit(g.pid)
  assert.equal(end.status, 'signal: killed')
  assert.equal(end.reason.kind, 'KIND_SIGNAL')

  const f = `${tmp}/made/later`
  const p = proc.waitForPath(f)
  await sleep(300) // the path comes later, by design of the check
  mkdirSync(`${tmp}/made`)
  writeFileSync(f, '')
  assert.match((await p).detail, /exists/)

  await assert.rejects(proc.waitForPort(await freePort(), { timeoutMs: 500 }), (e) => {
    assert.ok(e instanceof EnvdProcessError)
    assert.equal(e.code, 'deadline_exceeded')
    assert.match(e.message, /last seen: nothing listens on port/)
    return true
  })
})

test('input at offsets arrives once', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  assert.equal(await proc.sendStdin(h.pid, 'abc', { offset: 0 }), 3)
  assert.equal(await proc.sendStdin(h.pid, 'abc', { offset: 0 }), 3, 'a retry is not written again')
  assert.equal(await proc.sendStdin(h.pid, 'cdef\n', { offset: 2 }), 7)
  await assert.rejects(proc.sendStdin(h.pid, 'x', { offset: 9 }), (e) => e.code === 'out_of_range')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.stdout, 'abcdef\n')
})

test('a command killed at its deadline says so', async () => {
  const h = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 1000 })
  const end = await proc.waitForExit(h.pid)
  assert.equal(end.reason.kind, 'KIND_TIMEOUT')
  assert.equal(end.error, 'timeout: killed by envd when its deadline of 1 s passed')
  // The SDK's own kill keeps the reference's words.
  const k = await sbx.commands.run('sleep 600', { background: true })
  await k.kill()
  await assert.rejects(k.wait(), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.error, 'signal: killed')
    return true
  })
})
