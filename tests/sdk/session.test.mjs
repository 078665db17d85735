// SPDX-License-Identifier: Apache-2.0
// Sessions (docs/sessions.md) through the unmodified official e2b SDK: a
// Start whose envs hold ENVD_SESSION=<name> runs in that persistent shell.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { Sandbox, CommandExitError } from 'e2b'

process.env.E2B_DEBUG = 'true'
let sbx

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const HANG_MS = Number(process.env.HANG_S || 300) * 1000
async function until(cond, ms = HANG_MS) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await sleep(25)
  }
  return false
}
let n = 0
// A fresh session name per test: tests do not share state.
const fresh = () => `t${process.pid}-${++n}`
const S = (name, extra = {}) => ({ ...extra, envs: { ...(extra.envs || {}), ENVD_SESSION: name } })
// Commands that fail throw CommandExitError; give back the result either way.
async function runAny(cmd, opts) {
  try {
    return await sbx.commands.run(cmd, opts)
  } catch (e) {
    if (e instanceof CommandExitError) return e
    throw e
  }
}

before(async () => {
  try {
    execFileSync('id', ['user'], { stdio: 'ignore' })
  } catch {
    execFileSync('useradd', ['-m', '-s', '/bin/bash', 'user'])
  }
  sbx = await Sandbox.create({ debug: true })
})

test('state carries over: cd, export, variables, functions, aliases, umask, set -o', async () => {
  const s = fresh()
  await sbx.commands.run('cd /tmp && export FOO=1', S(s))
  let r = await sbx.commands.run('pwd; echo "$FOO"', S(s))
  assert.equal(r.stdout, '/tmp\n1\n')
  await sbx.commands.run('x=42; f() { echo "f:$1"; }; alias hi="echo hi"; umask 027; set -o noglob', S(s))
  r = await sbx.commands.run('echo $x; f a; hi; umask; echo /*; [[ -o noglob ]] && echo on', S(s))
  assert.equal(r.stdout, '42\nf:a\nhi\n0027\n/*\non\n')
})

test('the plain path is unchanged: without ENVD_SESSION nothing persists', async () => {
  await sbx.commands.run('cd /tmp && export FOO=1')
  const r = await sbx.commands.run('pwd; echo "[$FOO]"')
  assert.equal(r.stdout, '/home/user\n[]\n')
})

test('no trace: ENVD_SESSION is not exported, $? and $_ survive, output is clean', async () => {
  const s = fresh()
  let r = await sbx.commands.run('echo "[$ENVD_SESSION]"; env | grep -c ENVD_SESSION || true', S(s))
  assert.equal(r.stdout, '[]\n0\n')
  r = await runAny('ls /tmp >/dev/null; (exit 3)', S(s))
  assert.equal(r.exitCode, 3)
  r = await sbx.commands.run('echo "$?"', S(s))
  assert.equal(r.stdout, '3\n')
  await sbx.commands.run('echo last /etc', S(s))
  r = await sbx.commands.run('echo "$_"', S(s))
  assert.equal(r.stdout, '/etc\n')
  r = await sbx.commands.run('ls -A /proc/self/fd | wc -l', S(s))
  // 0, 1, 2 and ls's own directory fd: the status pipe is not visible.
  assert.equal(r.stdout.trim(), '4')
})

test('separate sessions and users share nothing', async () => {
  const a = fresh()
  const b = fresh()
  await sbx.commands.run('cd /tmp; export V=a', S(a))
  await sbx.commands.run('cd /; export V=b', S(b))
  assert.equal((await sbx.commands.run('pwd; echo $V', S(a))).stdout, '/tmp\na\n')
  assert.equal((await sbx.commands.run('pwd; echo $V', S(b))).stdout, '/\nb\n')
  // The same name as root is another shell, with root's identity and home.
  await sbx.commands.run('export V=root', S(a, { user: 'root' }))
  assert.equal((await sbx.commands.run('id -un; echo $V; echo $HOME', S(a, { user: 'root' }))).stdout, 'root\nroot\n/root\n')
  assert.equal((await sbx.commands.run('id -un; echo $V; echo $HOME', S(a))).stdout, 'user\na\n/home/user\n')
})

test('a login environment, in the home directory', async () => {
  const s = fresh()
  const r = await sbx.commands.run('pwd; echo $HOME; echo $USER; shopt -q login_shell && echo login', S(s))
  assert.equal(r.stdout, '/home/user\n/home/user\nuser\nlogin\n')
})

test('exit codes, and failure keeps the session', async () => {
  const s = fresh()
  await sbx.commands.run('export KEEP=yes', S(s))
  let r = await runAny('echo partial; echo bad >&2; false', S(s))
  assert.ok(r instanceof CommandExitError)
  assert.equal(r.exitCode, 1)
  assert.equal(r.stdout, 'partial\n')
  assert.equal(r.stderr, 'bad\n')
  r = await runAny('echo "unbalanced', S(s))
  assert.equal(r.exitCode, 2)
  r = await runAny('nosuchcommand-xyz', S(s))
  assert.equal(r.exitCode, 127)
  r = await runAny('return 9', S(s))
  assert.equal(r.exitCode, 9)
  assert.equal((await sbx.commands.run('echo $KEEP', S(s))).stdout, 'yes\n')
})

test('stdout and stderr apart, streamed as written', async () => {
  const s = fresh()
  const out = []
  const err = []
  const h = await sbx.commands.run('echo one; echo two >&2; read -t 600 x < /dev/null; while [ ! -e /tmp/go-' + s + ' ]; do sleep 0.05; done; echo three', {
    ...S(s),
    background: true,
    onStdout: (d) => out.push(d),
    onStderr: (d) => err.push(d),
  })
  // The first lines arrive while the command is still running.
  assert.ok(await until(() => out.join('') === 'one\n' && err.join('') === 'two\n'))
  execFileSync('touch', ['/tmp/go-' + s])
  const r = await h.wait()
  assert.equal(r.stdout, 'one\nthree\n')
  assert.equal(r.stderr, 'two\n')
})

test('exit N ends the session with N; the next command starts a new one', async () => {
  const s = fresh()
  await sbx.commands.run('export GONE=1; cd /tmp', S(s))
  const r = await runAny('echo bye; exit 5', S(s))
  assert.equal(r.exitCode, 5)
  assert.equal(r.stdout, 'bye\n')
  const r2 = await sbx.commands.run('echo "[$GONE]"; pwd', S(s))
  assert.equal(r2.stdout, '[]\n/home/user\n')
})

test('per-command envs and cwd apply to that command only', async () => {
  const s = fresh()
  let r = await sbx.commands.run('pwd; echo $ONE', S(s, { cwd: '/tmp', envs: { ONE: "it's 1" } }))
  assert.equal(r.stdout, "/tmp\nit's 1\n")
  r = await sbx.commands.run('pwd; echo "[$ONE]"', S(s))
  assert.equal(r.stdout, '/home/user\n[]\n')
})

test('no files left in the user\'s directories', async () => {
  const s = fresh()
  // What a session could leave is a file or a FIFO; other suites running
  // beside this one make directories of their own in the home directory.
  // (readdirSync and statSync alone: the VM's preload answers those.)
  const files = () => readdirSync('/home/user')
    .filter((n) => statSync(`/home/user/${n}`, { throwIfNoEntry: false })?.isDirectory() === false).sort()
  const before = files()
  await sbx.commands.run('echo hi', S(s))
  await sbx.commands.run('echo hi', S(s, { stdin: true }))
  assert.deepEqual(files(), before)
  // The FIFOs go as soon as the shell has opened them; only the command
  // file of the running command is in the session's private directory.
  const base = existsSync('/run/envd-sessions') ? '/run/envd-sessions' : null
  for (const d of base ? readdirSync(base) : []) {
    const left = readdirSync(`${base}/${d}`).filter((f) => f !== 'c')
    assert.deepEqual(left, [], d)
  }
})

// ---- stdin, signals, order, jobs ------------------------------------------------

const alive = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}
const pgrep = (pat) => {
  try {
    return execFileSync('pgrep', ['-f', pat], { encoding: 'utf8' }).trim()
  } catch {
    return ''
  }
}

test('stdin: its own, from the client; without it, EOF at once', async () => {
  const s = fresh()
  await sbx.commands.run('export IN=kept', S(s))
  const h = await sbx.commands.run('read a; read b; echo "$a-$b"; cat; echo "$IN"', { ...S(s), stdin: true, background: true })
  await sbx.commands.sendStdin(h.pid, 'x\ny\nre')
  await sbx.commands.sendStdin(h.pid, 'st\n')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.stdout, 'x-y\nrest\nkept\n')
  // No stdin asked for: a reader sees EOF and the session goes on.
  const r2 = await sbx.commands.run('cat; echo "eof $IN"', S(s))
  assert.equal(r2.stdout, 'eof kept\n')
})

test('kill ends the command, not the session (a child, a command list, a builtin loop)', async () => {
  const s = fresh()
  await sbx.commands.run('export K=1; cd /tmp', S(s))
  const marker = `envd-sess-kill-${process.pid}`
  const h = await sbx.commands.run(`echo go; bash -c "exec -a ${marker} sleep 3600"; echo after`, { ...S(s), background: true })
  assert.ok(await until(() => h.stdout === 'go\n' && pgrep(marker) !== ''))
  assert.equal(await h.kill(), true)
  await assert.rejects(h.wait(), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.error, 'signal: killed')
    assert.doesNotMatch(e.stdout, /after/, 'the rest of the command does not run')
    return true
  })
  assert.ok(await until(() => pgrep(marker) === ''))
  assert.equal((await sbx.commands.run('echo $K; pwd', S(s))).stdout, '1\n/tmp\n')

  const loop = await sbx.commands.run('echo spin; while :; do :; done', { ...S(s), background: true })
  assert.ok(await until(() => loop.stdout === 'spin\n'))
  assert.equal(await loop.kill(), true)
  await assert.rejects(loop.wait())
  assert.equal((await sbx.commands.run('echo $K', S(s))).stdout, '1\n')
  assert.equal(await sbx.commands.kill(loop.pid), false, 'a finished command is gone')
})

test('a timeout ends the command; the session keeps its state', async () => {
  const s = fresh()
  const marker = `envd-sess-timeout-${process.pid}`
  await sbx.commands.run('export T=still', S(s))
  await assert.rejects(sbx.commands.run(`bash -c "exec -a ${marker} sleep 3600"`, { ...S(s), timeoutMs: 700 }), (e) => {
    assert.equal(e.name, 'TimeoutError')
    return true
  })
  assert.ok(await until(() => pgrep(marker) === ''), 'the command was killed at the deadline')
  assert.equal((await sbx.commands.run('echo $T', S(s))).stdout, 'still\n')
})

test('one at a time in arrival order; other sessions run in parallel', async () => {
  const s = fresh()
  const other = fresh()
  const go = `/tmp/envd-sess-go-${process.pid}`
  const first = await sbx.commands.run(`while [ ! -e ${go} ]; do sleep 0.02; done; X=1`, { ...S(s), background: true })
  const hs = []
  for (let i = 0; i < 5; i++) hs.push(await sbx.commands.run(`X=$((X + 1)); echo $X`, { ...S(s), background: true }))
  // Another session is not held up by the first one's wait.
  assert.equal((await sbx.commands.run(`touch ${go}; echo free`, S(other))).stdout, 'free\n')
  await first.wait()
  const outs = []
  for (const h of hs) outs.push((await h.wait()).stdout)
  assert.deepEqual(outs, ['2\n', '3\n', '4\n', '5\n', '6\n'])
  execFileSync('rm', ['-f', go])
})

test('a full queue is resource_exhausted', async () => {
  const s = fresh()
  const hs = []
  let failed
  for (let i = 0; i < 70 && !failed; i++) {
    try {
      hs.push(await sbx.commands.run('sleep 3600', { ...S(s), background: true }))
    } catch (e) {
      failed = e
    }
  }
  assert.ok(failed, 'some Start was refused')
  assert.match(String(failed.message), /waiting already/)
  assert.equal(hs.length, 64)
  for (const h of hs.reverse()) await h.kill()
  assert.equal((await sbx.commands.run('echo ok', S(s))).stdout, 'ok\n')
})

test('background jobs do not hold the command; jobs lists them; they die with the session', async () => {
  const s = fresh()
  const marker = `envd-sess-job-${process.pid}`
  const r = await sbx.commands.run(`(exec -a ${marker} sleep 3600) & echo started`, S(s))
  assert.equal(r.stdout, 'started\n')
  const jobs = await sbx.commands.run('jobs', S(s))
  assert.match(jobs.stdout, /Running/)
  assert.ok(pgrep(marker) !== '')
  // A job that writes after its command ended is not killed by it.
  await sbx.commands.run('(sleep 0.2; echo late; echo done > /tmp/envd-sess-late-' + process.pid + ') &', S(s))
  assert.ok(await until(() => {
    try { return readFileSync('/tmp/envd-sess-late-' + process.pid, 'utf8') === 'done\n' } catch { return false }
  }))
  execFileSync('rm', ['-f', '/tmp/envd-sess-late-' + process.pid])
  await runAny('exit 0', S(s))
  assert.ok(await until(() => pgrep(marker) === ''), 'the job ended with its session')
})

// ---- the process table ---------------------------------------------------------

test('List shows the running command; Connect from a second client follows it', async () => {
  const s = fresh()
  const go = `/tmp/envd-sess-conn-${process.pid}`
  const h = await sbx.commands.run(`echo first; while [ ! -e ${go} ]; do sleep 0.02; done; echo second; exit 3`, { ...S(s), background: true, tag: undefined })
  assert.ok(await until(() => h.stdout.includes('first')))
  const list = await sbx.commands.list()
  const p = list.find((x) => x.pid === h.pid)
  assert.ok(p, 'listed')
  assert.equal(p.envs.ENVD_SESSION, s)
  await h.disconnect()
  // Another client of the same envd (in debug mode, a second Sandbox object).
  const other = await Sandbox.create({ debug: true })
  const h2 = await other.commands.connect(h.pid)
  execFileSync('touch', [go])
  await assert.rejects(h2.wait(), (e) => {
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'second\n')
    return true
  })
  execFileSync('rm', ['-f', go])
  assert.ok(await until(async () => !(await sbx.commands.list()).some((x) => x.pid === h.pid)))
  // The session outlived both streams.
  assert.equal((await other.commands.run('echo again', S(s))).stdout, 'again\n')
})

test('large output arrives intact', async () => {
  const s = fresh()
  const r = await sbx.commands.run("head -c 3000000 /dev/zero | tr '\\0' a; echo; head -c 100000 /dev/zero | tr '\\0' b >&2", S(s))
  assert.equal(r.stdout.length, 3000001)
  assert.ok(/^a+\n$/.test(r.stdout))
  assert.equal(r.stderr.length, 100000)
})
