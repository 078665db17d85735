// SPDX-License-Identifier: Apache-2.0
// The official e2b SDK's `commands` and `pty` APIs against envd (debug mode,
// E2B_SANDBOX_URL pointing at the envd under test).
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { Sandbox, CommandExitError } from 'e2b'

process.env.E2B_DEBUG = 'true'
let sbx

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
// A zombie (killed, not yet reaped by whoever inherited it) counts as dead.
const alive = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}
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

before(async () => {
  // Non-root runs need the SDK's conventional user.
  try {
    execFileSync('id', ['user'], { stdio: 'ignore' })
  } catch {
    execFileSync('useradd', ['-m', '-s', '/bin/bash', 'user'])
  }
  sbx = await Sandbox.create({ debug: true })
})

test('run: stdout, stderr and exit code 0', async () => {
  const r = await sbx.commands.run('echo out; echo err >&2')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out\n')
  assert.equal(r.stderr, 'err\n')
})

test('run: non-zero exit throws CommandExitError with output', async () => {
  await assert.rejects(sbx.commands.run('echo partial; echo bad >&2; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stdout, 'partial\n')
    assert.equal(e.stderr, 'bad\n')
    assert.equal(e.error, 'exit status 7')
    return true
  })
})

test('run: a missing command is exit 127 with the message on stderr', async () => {
  await assert.rejects(sbx.commands.run('no-such-command-envd-test'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 127)
    assert.match(e.stderr, /no-such-command-envd-test: command not found/)
    return true
  })
})

test('run: envs apply to that process only', async () => {
  const r = await sbx.commands.run('echo "$FOO-$BAR"', { envs: { FOO: 'x', BAR: 'y z' } })
  assert.equal(r.stdout, 'x-y z\n')
  const r2 = await sbx.commands.run('echo "${FOO:-unset}"')
  assert.equal(r2.stdout, 'unset\n')
})

test('run: cwd, default cwd is home, missing cwd is InvalidArgumentError', async () => {
  assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n')
  const home = (await sbx.commands.run('echo $HOME')).stdout
  assert.equal((await sbx.commands.run('pwd')).stdout, home)
  await assert.rejects(sbx.commands.run('pwd', { cwd: '/does/not/exist' }), (e) => {
    assert.equal(e.name, 'InvalidArgumentError')
    assert.match(e.message, /cwd '\/does\/not\/exist' does not exist/)
    return true
  })
})

test('run: as another user', async () => {
  const r = await sbx.commands.run('whoami; pwd; echo $HOME', { user: 'user' })
  assert.equal(r.stdout, 'user\n/home/user\n/home/user\n')
  const root = await sbx.commands.run('id -u', { user: 'root' })
  assert.equal(root.stdout, '0\n')
})

test('run: callbacks see the streamed output', async () => {
  const out = []
  const err = []
  await sbx.commands.run('for i in 1 2 3; do echo $i; echo e$i >&2; done', {
    onStdout: (d) => out.push(d),
    onStderr: (d) => err.push(d),
  })
  assert.equal(out.join(''), '1\n2\n3\n')
  assert.equal(err.join(''), 'e1\ne2\ne3\n')
})

test('run: large output arrives complete', async () => {
  const r = await sbx.commands.run('head -c 3000000 /dev/zero | tr "\\0" a; echo')
  assert.equal(r.stdout.length, 3000001)
})

test('run: a too short timeout fails with TimeoutError and kills the command', async () => {
  const marker = `envd-timeout-${process.pid}`
  await assert.rejects(
    sbx.commands.run(`exec -a ${marker} sleep 3600`, { timeoutMs: 700 }),
    (e) => {
      assert.equal(e.name, 'TimeoutError')
      return true
    }
  )
  assert.ok(
    await until(() => {
      try {
        execFileSync('pgrep', ['-f', marker], { stdio: 'ignore' })
        return false
      } catch {
        return true
      }
    }),
    'the command was killed at the deadline'
  )
})

test('background: handle.wait and handle.kill', async () => {
  const h = await sbx.commands.run('sleep 0.2; echo done', { background: true })
  assert.ok(h.pid > 0)
  const r = await h.wait()
  assert.equal(r.stdout, 'done\n')

  const h2 = await sbx.commands.run('sleep 30', { background: true })
  assert.equal(await h2.kill(), true)
  await assert.rejects(h2.wait(), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, -1)
    assert.equal(e.error, 'signal: killed')
    return true
  })
  assert.ok(await until(() => !alive(h2.pid)), 'killed process is reaped')
  assert.equal(await sbx.commands.kill(h2.pid), false, 'kill of a gone pid is false')
})

test('kill ends the whole process tree', async () => {
  const h = await sbx.commands.run('sleep 300 & sleep 300 & echo $!; wait', { background: true })
  let child
  assert.ok(
    await until(() => {
      const m = h.stdout.match(/(\d+)/)
      if (m) child = Number(m[1])
      return !!m
    })
  )
  assert.ok(alive(child))
  assert.equal(await sbx.commands.kill(h.pid), true)
  assert.ok(await until(() => !alive(child)), 'grandchild died with the command')
  await assert.rejects(h.wait())
})

test('disconnect, then connect by pid gets later output and the result', async () => {
  // "second" is printed once the new stream is attached, however long that takes.
  const go = `/tmp/envd-sdk-go-${process.pid}`
  const h = await sbx.commands.run(`echo first; while [ ! -e ${go} ]; do sleep 0.05; done; rm -f ${go}; echo second; exit 3`, {
    background: true,
  })
  assert.ok(await until(() => h.stdout.includes('first')))
  await h.disconnect()
  const h2 = await sbx.commands.connect(h.pid)
  assert.equal(h2.pid, h.pid)
  await sbx.commands.run(`touch ${go}`)
  await assert.rejects(h2.wait(), (e) => {
    assert.equal(e.exitCode, 3)
    assert.match(e.stdout, /second\n/)
    assert.doesNotMatch(e.stdout, /first/, 'connect is live-only by default')
    return true
  })
})

test('connect after exit still reports the end event', async () => {
  const h = await sbx.commands.run('exit 4', { background: true })
  await assert.rejects(h.wait())
  const h2 = await sbx.commands.connect(h.pid)
  await assert.rejects(h2.wait(), (e) => e.exitCode === 4)
})

test('connect to an unknown pid is NotFoundError', async () => {
  await assert.rejects(sbx.commands.connect(999999), (e) => {
    assert.equal(e.name, 'NotFoundError')
    return true
  })
})

test('list shows running processes with their original config', async () => {
  const h = await sbx.commands.run('sleep 30', {
    background: true,
    envs: { LISTED: '1' },
    cwd: '/tmp',
  })
  const list = await sbx.commands.list()
  const p = list.find((x) => x.pid === h.pid)
  assert.ok(p, 'the process is listed')
  assert.equal(p.cmd, '/bin/bash')
  assert.deepEqual(p.args, ['-l', '-c', 'sleep 30'])
  assert.deepEqual(p.envs, { LISTED: '1' })
  assert.equal(p.cwd, '/tmp')
  await h.kill()
  await assert.rejects(h.wait())
  assert.ok(
    await until(async () => !(await sbx.commands.list()).some((x) => x.pid === h.pid)),
    'gone from the list after exit'
  )
})

test('sendStdin and closeStdin', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'hello ')
  await sbx.commands.sendStdin(h.pid, '')
  await h.sendStdin('world\n')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hello world\n')
})

test('closeStdin is idempotent', async () => {
  const h = await sbx.commands.run('sleep 1; cat', { background: true, stdin: true })
  await sbx.commands.closeStdin(h.pid)
  await sbx.commands.closeStdin(h.pid)
  assert.equal((await h.wait()).exitCode, 0)
})

test('stdin is /dev/null unless asked for', async () => {
  const r = await sbx.commands.run('cat; echo eof')
  assert.equal(r.stdout, 'eof\n')
})

test('pty: create, input, resize (tput cols), exit code', async () => {
  const dec = new TextDecoder()
  let out = ''
  const t = await sbx.pty.create({
    cols: 80,
    rows: 24,
    onData: (d) => {
      out += dec.decode(d, { stream: true })
    },
  })
  assert.ok(t.pid > 0)
  const enc = new TextEncoder()
  await sbx.pty.sendInput(t.pid, enc.encode('echo "pty-$((40+2))"\n'))
  assert.ok(await until(() => out.includes('pty-42')), 'pty echoes output')
  await sbx.pty.resize(t.pid, { cols: 123, rows: 40 })
  await sbx.pty.sendInput(t.pid, enc.encode('tput cols; stty size\n'))
  assert.ok(await until(() => /123\r\n/.test(out) && out.includes('40 123')), out.slice(-300))
  await sbx.pty.sendInput(t.pid, enc.encode('exit\n'))
  const r = await t.wait()
  assert.equal(r.exitCode, 0)
})

test('pty: disconnect and connect, then kill', async () => {
  const dec = new TextDecoder()
  const t = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
  await t.disconnect()
  let out = ''
  const t2 = await sbx.pty.connect(t.pid, {
    onData: (d) => {
      out += dec.decode(d, { stream: true })
    },
  })
  assert.equal(t2.pid, t.pid)
  await sbx.pty.sendInput(t.pid, new TextEncoder().encode('echo again-$((1+1))\n'))
  assert.ok(await until(() => out.includes('again-2')))
  assert.equal(await sbx.pty.kill(t.pid), true)
  await assert.rejects(t2.wait())
  assert.equal(await sbx.pty.kill(t.pid), false)
})

test('pty: kill ends the background jobs of the shell too', async () => {
  const dec = new TextDecoder()
  let out = ''
  const t = await sbx.pty.create({
    cols: 80,
    rows: 24,
    onData: (d) => {
      out += dec.decode(d, { stream: true })
    },
  })
  const enc = new TextEncoder()
  await sbx.pty.sendInput(t.pid, enc.encode('sleep 300 & echo "job=$!="\n'))
  let job
  assert.ok(
    await until(() => {
      const m = out.match(/job=(\d+)=/)
      if (m) job = Number(m[1])
      return !!m
    }),
    out
  )
  assert.ok(alive(job))
  assert.equal(await sbx.pty.kill(t.pid), true)
  assert.ok(await until(() => !alive(job)), 'the job in its own process group died too')
  await assert.rejects(t.wait())
})

test('many fast commands each return their complete output', async () => {
  // Fewer under emulation, where each start costs ~10x (tests/vm/10_sdk.sh).
  const runs = Number(process.env.ENVD_SDK_FAST_RUNS ?? 50)
  for (let i = 0; i < runs; i++) {
    const r = await sbx.commands.run(`seq 1 ${1000 + i}`)
    const lines = r.stdout.trimEnd().split('\n')
    assert.equal(lines.length, 1000 + i)
    assert.equal(lines.at(-1), String(1000 + i))
  }
})

test('many concurrent commands each return their own output and exit code', async () => {
  // Every command gets its own stream and its own per-command cgroup leaf
  // (more than the spare-leaf pool holds, so some are made on demand). The
  // SDK's own timeouts are raised to the hang deadline: this checks that
  // every command completes with the right result; how long a burst takes
  // is measured by the benchmarks (bench/README.md, vm_rtt and vm_sdk_burst).
  // Fewer through the emulated VM's forwarded port (tests/vm/10_sdk.sh):
  // QEMU's user-mode network stalls a burst of new connections past the
  // HTTP client's own 10 s connect timeout ("fetch failed" before envd
  // sees the request); the VM's 50-call burst is measured by the bench.
  const n = Number(process.env.ENVD_SDK_CONCURRENT ?? 50)
  const opts = { timeoutMs: HANG_MS, requestTimeoutMs: HANG_MS }
  const runs = Array.from({ length: n }, (_, i) =>
    sbx.commands.run(`sleep 0.2; echo ${i}; echo e${i} >&2; exit ${i % 3}`, opts).catch((e) => e)
  )
  const results = await Promise.all(runs)
  results.forEach((r, i) => {
    assert.equal(r.exitCode, i % 3, `command ${i}: ${r.message ?? ''}`)
    assert.equal(r.stdout, `${i}\n`, `command ${i}'s stdout`)
    assert.equal(r.stderr, `e${i}\n`, `command ${i}'s stderr`)
  })
})
