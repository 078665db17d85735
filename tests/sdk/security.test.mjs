// SPDX-License-Identifier: Apache-2.0
// Identity and isolation of what envd starts, through the unmodified SDK:
// a command run as `user` gets that user's uid, gid and groups, no
// capabilities, only fds 0-2, and cannot act as root; files it creates
// through the files API are owned by it, parents included.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { statSync, rmSync } from 'node:fs'
import { Sandbox } from 'e2b'

const sbx = await Sandbox.create({ debug: true })
const idOf = (flag) => execFileSync('id', [flag, 'user']).toString().trim()

test('a command as user has its uid, gid and groups', async () => {
  const r = await sbx.commands.run('id -u; id -g; id -G', { user: 'user' })
  const [u, g, gs] = r.stdout.trim().split('\n')
  assert.equal(u, idOf('-u'))
  assert.equal(g, idOf('-g'))
  assert.deepEqual(gs.split(' ').sort(), idOf('-G').split(' ').sort())
})

test('no capabilities are left to a user command', async () => {
  const r = await sbx.commands.run("grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status", { user: 'user' })
  for (const line of r.stdout.trim().split('\n')) {
    assert.match(line, /:\s+0000000000000000$/, line)
  }
})

test('a user command cannot act as root', async () => {
  const r = await sbx.commands.run('touch /root/envd-sec-test 2>&1; echo rc=$?; kill -0 1 2>&1; echo kill=$?',
    { user: 'user' })
  assert.match(r.stdout, /rc=1/)
  assert.match(r.stdout, /kill=1/)
})

test('only fds 0, 1 and 2 are inherited', async () => {
  // ls runs as a child of the shell and lists the shell's own fds. No
  // pipeline: while bash starts one, it holds the pipes itself, and a busy
  // machine lets ls look before they are closed. "; true" keeps bash from
  // exec'ing ls in its place.
  const r = await sbx.commands.run('ls /proc/$$/fd; true', { user: 'user' })
  const fds = r.stdout.trim().split(/\s+/).map(Number).sort((a, b) => a - b)
  assert.equal(fds.join(' '), '0 1 2')
})

test('files written for user are owned by user, parents included', async () => {
  const base = '/tmp/envd-sec-owner'
  rmSync(base, { recursive: true, force: true })
  await sbx.files.write(`${base}/a/b/c.txt`, 'x', { user: 'user' })
  for (const p of [`${base}`, `${base}/a`, `${base}/a/b`, `${base}/a/b/c.txt`]) {
    assert.equal(String(statSync(p).uid), idOf('-u'), p)
  }
  rmSync(base, { recursive: true, force: true })
})
