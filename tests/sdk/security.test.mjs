// SPDX-License-Identifier: Apache-2.0
// Identity and isolation of what envd starts, through the unmodified SDK:
// a command run as `user` gets that user's uid, gid and groups, no
// capabilities, only fds 0-2, and cannot act as root; files it creates
// through the files API are owned by it, parents included.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { statSync, rmSync, readdirSync, readFileSync } from 'node:fs'
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
  // Look at a command that opens nothing itself, from outside: a shell
  // listing its own fds races with the pipes it makes for a pipeline.
  const h = await sbx.commands.run('exec sleep 60', { user: 'user', background: true })
  try {
    // The login shell reads its profile (opening files) before the exec.
    const until = Date.now() + 20000
    while (readFileSync(`/proc/${h.pid}/comm`, 'utf8').trim() !== 'sleep') {
      assert.ok(Date.now() < until, 'the command never became sleep')
      await new Promise((r) => setTimeout(r, 20))
    }
    const fds = readdirSync(`/proc/${h.pid}/fd`).map(Number).sort((a, b) => a - b)
    assert.deepEqual(fds, [0, 1, 2])
  } finally {
    await h.kill()
  }
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
