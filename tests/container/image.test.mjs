// SPDX-License-Identifier: Apache-2.0
// The sandbox image as SDK users meet it, and port
// forwarding seen from outside the sandbox. Runs only in the container test
// (scripts/container-test.sh), where requests cross the veth to
// 169.254.0.21 from the host's network namespace.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

process.env.E2B_DEBUG = 'true'
const SBX_IP = new URL(process.env.E2B_SANDBOX_URL).hostname
let sbx

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
// A deadline for a machine ten times slower than a loaded one (HANG_S, as
// in tests/common.sh).
const HANG_MS = Number(process.env.HANG_S || 300) * 1000

before(async () => {
  sbx = await Sandbox.create({ debug: true })
})

test('default user is user with home /home/user', async () => {
  const r = await sbx.commands.run('whoami; echo $HOME; echo $USER; pwd')
  assert.equal(r.stdout, 'user\n/home/user\nuser\n/home/user\n')
})

test('login shell prints nothing and finds python3, python, git and tput', async () => {
  const r = await sbx.commands.run('command -v python3 python git tput bash')
  assert.equal(r.stderr, '')
  assert.equal(r.stdout.trim().split('\n').length, 5)
  const py = await sbx.commands.run('python --version && python3 -c "print(6*7)"')
  assert.match(py.stdout, /^Python 3\.\d+\.\d+\n42\n$/)
})

test('git is new enough for the SDK helpers and has the daemon', async () => {
  const r = await sbx.commands.run('git --version')
  const m = r.stdout.match(/git version (\d+)\.(\d+)/)
  assert.ok(m, r.stdout)
  assert.ok(Number(m[1]) > 2 || (Number(m[1]) === 2 && Number(m[2]) >= 28), `git ${m[0]}`)
  const d = await sbx.commands.run('test -x "$(git --exec-path)/git-daemon" && echo yes')
  assert.equal(d.stdout, 'yes\n')
})

test('passwordless sudo for user', async () => {
  const r = await sbx.commands.run('sudo -n true && sudo -n id -u')
  assert.equal(r.stdout, '0\n')
})

test('terminfo xterm-256color and the C.UTF-8 locale', async () => {
  const r = await sbx.commands.run("TERM=xterm-256color tput colors; locale -a | grep -i '^c\\.utf-*8$'")
  assert.match(r.stdout, /^256\n[Cc]\.[Uu][Tt][Ff]-?8\n$/)
})

test('ca-certificates and curl are installed', async () => {
  const r = await sbx.commands.run('test -s /etc/ssl/certs/ca-certificates.crt && curl --version | head -n1')
  assert.match(r.stdout, /^curl \d/)
})

test('/tmp is writable and sticky; files come out user-owned 0644', async () => {
  await sbx.files.write('/tmp/img-owner.txt', 'x')
  const r = await sbx.commands.run('stat -c "%U %a" /tmp/img-owner.txt; stat -c %a /tmp')
  assert.equal(r.stdout, 'user 644\n1777\n')
})

test('envd runs as root under init, PID 1 reaps', async () => {
  const r = await sbx.commands.run('cat /proc/1/comm; ps -o user=,comm= -p $(pgrep -x -P 1 envd)')
  assert.match(r.stdout, /^envd-init\nroot\s+envd\n$/)
})

test('a loopback-only server becomes reachable from outside soon after listen()', async () => {
  // The server prints a line the moment listen() returns; the client
  // (outside the sandbox) then polls the sandbox address. The clock starts
  // when that line reaches the client, so the stdout latency is not
  // counted; scripts/container-test.sh measures from listen() itself.
  const port = 4111
  const py = `import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", ${port})); s.listen(8)
print("listening", flush=True)
c,_=s.accept(); c.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nhi"); c.close()`
  let t0
  const h = await sbx.commands.run(`python3 -c '${py}'`, {
    background: true,
    onStdout: (d) => {
      if (d.includes('listening')) t0 ??= performance.now()
    },
  })
  const deadline = Date.now() + HANG_MS // a hang deadline; the figure is printed
  let res
  while (Date.now() < deadline) {
    if (t0 !== undefined) {
      res = await fetch(`http://${SBX_IP}:${port}/`).catch(() => null)
      if (res) break
    }
    await sleep(2)
  }
  const dt = performance.now() - t0
  assert.ok(res, 'forwarded port answers')
  assert.equal(await res.text(), 'hi')
  console.log(`# port-forward: reachable ${dt.toFixed(1)} ms after the client saw the server's "listening" line`)
  // Speed is for the benchmarks (a loaded machine takes many scan periods);
  // this catches a forward that never comes.
  assert.ok(dt < HANG_MS, `reachable after ${dt.toFixed(1)} ms`)
  await h.wait().catch(() => {})
})

test('python3 -m http.server --bind 127.0.0.1 answers on the sandbox address', async () => {
  const h = await sbx.commands.run('cd /tmp && exec python3 -m http.server 4112 --bind 127.0.0.1', {
    background: true,
  })
  let res
  for (const end = Date.now() + HANG_MS; !res && Date.now() < end; ) {
    res = await fetch(`http://${SBX_IP}:4112/img-owner.txt`).catch(() => null)
    if (!res) await sleep(10)
  }
  assert.ok(res)
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'x')
  await h.kill()
  // the forward goes away with the listener
  let gone = false
  for (const end = Date.now() + HANG_MS; !gone && Date.now() < end; ) {
    gone = await fetch(`http://${SBX_IP}:4112/`).then(() => false, () => true)
    if (!gone) await sleep(10)
  }
  assert.ok(gone, 'forward torn down after the server stopped')
})
