// SPDX-License-Identifier: Apache-2.0
// Sessions (docs/sessions.md) through the unmodified official e2b SDK: a
// Start whose envs hold ENVD_SESSION=<name> runs in that persistent shell.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'
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
  await sbx.commands.run('x=42; f() { echo "f:$1"; }; shopt -s expand_aliases; alias hi="echo hi"; umask 027; set -o noglob', S(s))
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
  const before = readdirSync('/home/user').sort()
  await sbx.commands.run('echo hi', S(s))
  await sbx.commands.run('echo hi', S(s, { stdin: true }))
  assert.deepEqual(readdirSync('/home/user').sort(), before)
  // The FIFOs go as soon as the shell has opened them; only the command
  // file of the running command is in the session's private directory.
  for (const d of readdirSync('/run/envd-sessions')) {
    const left = readdirSync('/run/envd-sessions/' + d).filter((f) => f !== 'c')
    assert.deepEqual(left, [], d)
  }
})
