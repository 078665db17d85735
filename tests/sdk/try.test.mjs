// SPDX-License-Identifier: Apache-2.0
// Try runs (docs/try.md) through the unmodified official e2b SDK: a
// command whose envs hold ENVD_TRY runs on a copy-on-write layer over its
// cwd. `npm init -y && touch a && rm b && chmod +x c` leaves the real tree
// untouched; TryDiff (Connect JSON, which the SDK has no method for) lists
// exactly those changes; CommitTry makes the real tree what a plain run
// makes it; DiscardTry leaves it as it was; a change made to the real
// tree meanwhile makes the commit `aborted` with nothing applied. The
// machine is looked at with commands and the node:fs calls the VM's preload
// answers from the guest (tests/vm/10_sdk.sh runs this file there too).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { writeFileSync, existsSync, statSync, rmSync } from 'node:fs'
import { Sandbox, CommandExitError } from 'e2b'

process.env.E2B_DEBUG = 'true'
let sbx, base, uid, gid

const rpc = async (method, body) => {
  const res = await fetch(`${process.env.ENVD_URL}/process.Process/${method}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Basic ${Buffer.from('user:').toString('base64')}` },
    body: JSON.stringify(body),
  })
  return { status: res.status, body: await res.json() }
}

// What a tree is: names, kinds, modes, owners, sizes, contents.
const snap = (dir) =>
  execFileSync('sh', ['-c', `cd '${dir}' && find . -mindepth 1 -printf '%P %y %m %U:%G %s %l\\n' | sort && ` +
    "find . -type f -exec md5sum {} + | sort -k2"]).toString()

function seed(dir) {
  execFileSync('mkdir', ['-p', `${dir}/lib`])
  writeFileSync(`${dir}/b`, 'bee\n')
  writeFileSync(`${dir}/c`, 'sea\n')
  writeFileSync(`${dir}/lib/k`, 'keep\n')
  execFileSync('chown', ['-R', `${uid}:${gid}`, dir])
}

// A command in the background, for its pid; then its end.
async function runTry(cmd, cwd, envs = { ENVD_TRY: '' }) {
  const h = await sbx.commands.run(cmd, { cwd, envs, background: true })
  let result
  try {
    result = await h.wait()
  } catch (e) {
    if (!(e instanceof CommandExitError)) throw e
    result = e
  }
  return { pid: h.pid, result }
}

const changes = (diff, root) =>
  (diff.changes || [])
    .map((c) => {
      const p = c.path.slice(root.length + 1)
      const kind = c.kind.replace('TRY_CHANGE_KIND_', '').toLowerCase()
      return kind === 'mode' ? `${kind} ${p} ${c.mode.toString(8)}` : `${kind} ${p}`
    })
    .sort((a, b) => a.split(' ')[1].localeCompare(b.split(' ')[1]))

before(async () => {
  try {
    execFileSync('id', ['user'], { stdio: 'ignore' })
  } catch {
    execFileSync('useradd', ['-m', '-s', '/bin/bash', 'user'])
  }
  uid = Number(execFileSync('id', ['-u', 'user']).toString().trim())
  gid = Number(execFileSync('id', ['-g', 'user']).toString().trim())
  base = `/home/user/envd-sdk-try-${process.pid}`
  sbx = await Sandbox.create({ debug: true })
})

after(() => rmSync(base, { recursive: true, force: true }))

test('npm init -y && touch a && rm b && chmod +x c: untouched, listed, committed as a plain run', async () => {
  const real = `${base}/real/proj`
  const plain = `${base}/plain/proj`
  seed(real)
  seed(plain)
  const before = snap(real)
  // npm where the machine has it; the VM image has none, and gets the
  // package.json npm would write.
  const npm = 'if command -v npm >/dev/null; then npm init -y >/dev/null; else ' +
    'printf \'{\\n  "name": "proj",\\n  "version": "1.0.0"\\n}\\n\' > package.json; fi'
  const cmd = `${npm} && touch a && rm b && chmod +x c`
  const { pid, result } = await runTry(cmd, real)
  assert.equal(result.exitCode, 0)
  assert.equal(snap(real), before, 'the real tree is untouched')
  const d = await rpc('TryDiff', { pid })
  assert.equal(d.status, 200)
  assert.equal(d.body.diff.state, 'ended')
  assert.deepEqual(changes(d.body.diff, real), ['created a', 'deleted b', 'mode c 755', 'created package.json'])
  await sbx.commands.run(cmd, { cwd: plain })
  const c = await rpc('CommitTry', { pid })
  assert.equal(c.status, 200)
  assert.equal(c.body.applied.state, 'committed')
  assert.equal(snap(real), snap(plain), 'the real tree is what a plain run makes it')
  assert.equal((await rpc('CommitTry', { pid })).status, 200, 'a second commit: the same answer')
})

test('discard leaves the real tree as it was', async () => {
  const real = `${base}/d/proj`
  seed(real)
  const before = snap(real)
  const { pid } = await runTry('rm -rf lib && echo x > new && echo more >> c', real)
  assert.deepEqual(changes((await rpc('TryDiff', { pid })).body.diff, real), ['modified c', 'deleted lib', 'created new'])
  assert.equal((await rpc('DiscardTry', { pid })).status, 200)
  assert.equal(snap(real), before)
  assert.equal((await rpc('DiscardTry', { pid })).status, 200, 'a second discard: the same answer')
  const c = await rpc('CommitTry', { pid })
  assert.equal(c.status, 400)
  assert.equal(c.body.code, 'failed_precondition')
})

test('a conflicting change in the real tree: aborted, nothing applied', async () => {
  const real = `${base}/c/proj`
  seed(real)
  const { pid } = await runTry('echo try >> b && echo new > n', real)
  writeFileSync(`${real}/b`, 'bee\ntheirs\n')
  const before = snap(real)
  const c = await rpc('CommitTry', { pid })
  assert.equal(c.status, 409)
  assert.equal(c.body.code, 'aborted')
  assert.match(c.body.message, new RegExp(`${real}/b`))
  assert.equal(snap(real), before, 'nothing applied')
  assert.equal((await rpc('DiscardTry', { pid })).status, 200)
})

test('ENVD_TRY is not exported; its paths are colon-separated, relative to the cwd', async () => {
  const real = `${base}/e/proj`
  seed(real)
  seed(`${base}/e/other`)
  const { pid, result } = await runTry('env | grep -c ENVD_TRY || true; touch mine ../other/theirs', real, {
    ENVD_TRY: '.:../other',
  })
  assert.equal(result.stdout.split('\n')[0], '0')
  const d = (await rpc('TryDiff', { pid })).body.diff
  assert.deepEqual(d.paths, [real, `${base}/e/other`])
  assert.equal(existsSync(`${real}/mine`), false)
  assert.equal(existsSync(`${base}/e/other/theirs`), false)
  assert.equal((await rpc('CommitTry', { pid })).status, 200)
  assert.equal(statSync(`${real}/mine`).uid, uid, 'owned by the user who ran the try')
  assert.equal(statSync(`${base}/e/other/theirs`).isFile(), true)
})
