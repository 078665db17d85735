// SPDX-License-Identifier: Apache-2.0
// The SDK's git helpers in the sandbox image: every
// call is a shell command through commands.run, against a `git daemon`
// started in the sandbox, as the SDK's own tests do. Runs only in the
// container test.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { Sandbox, GitAuthError, GitUpstreamError } from 'e2b'

process.env.E2B_DEBUG = 'true'
let sbx, base, url, daemon, authServer
const port = 9418 + Math.floor(Math.random() * 1000)
const authPort = 10500 + Math.floor(Math.random() * 1000)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
// A deadline for a machine ten times slower than a loaded one (HANG_S, as
// in tests/common.sh).
const HANG_MS = Number(process.env.HANG_S || 300) * 1000

async function waitFor(cmd) {
  // A deadline for a loaded machine, not a timing check.
  for (const end = Date.now() + HANG_MS; Date.now() < end; ) {
    try {
      await sbx.commands.run(cmd)
      return
    } catch {
      await sleep(25)
    }
  }
  throw new Error(`never succeeded: ${cmd}`)
}

before(async () => {
  sbx = await Sandbox.create({ debug: true })
  base = `/tmp/test-git/${randomUUID()}`
  url = `git://127.0.0.1:${port}/origin.git`
  await sbx.commands.run(`mkdir -p ${base} && git init --bare --initial-branch main ${base}/origin.git`)
  daemon = await sbx.commands.run(
    `exec git daemon --reuseaddr --export-all --enable=receive-pack --base-path=${base} --listen=127.0.0.1 --port=${port} ${base}`,
    { background: true },
  )
  await waitFor(`git ls-remote ${url}`)
  // A server that refuses every request without valid credentials.
  const py = `import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", "Basic realm=\\"git\\"")
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_POST = do_GET
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", ${authPort}), H).serve_forever()`
  authServer = await sbx.commands.run(`exec python3 -c '${py}'`, { background: true })
  await waitFor(`curl -s -o /dev/null http://127.0.0.1:${authPort}/`)
})

after(async () => {
  await daemon?.kill().catch(() => {})
  await authServer?.kill().catch(() => {})
})

test('init, configureUser, add, commit, status and branches', async () => {
  const repo = `${base}/work`
  await sbx.git.init(repo, { initialBranch: 'main' })
  await sbx.git.configureUser('Sandbox User', 'user@example.com')
  assert.equal(await sbx.git.getConfig('user.name'), 'Sandbox User')
  assert.equal(await sbx.git.getConfig('user.email'), 'user@example.com')

  await sbx.files.write(`${repo}/README.md`, 'hello\n')
  let st = await sbx.git.status(repo)
  assert.equal(st.currentBranch, 'main')
  assert.equal(st.hasUntracked, true)
  assert.equal(st.untrackedCount, 1)

  await sbx.git.add(repo)
  st = await sbx.git.status(repo)
  assert.equal(st.stagedCount, 1)
  assert.equal(st.hasStaged, true)

  await sbx.git.commit(repo, 'first commit')
  st = await sbx.git.status(repo)
  assert.equal(st.isClean, true)
  const br = await sbx.git.branches(repo)
  assert.deepEqual(br.branches, ['main'])
  assert.equal(br.currentBranch, 'main')
  const log = await sbx.commands.run(`git -C ${repo} log --format=%an/%s`)
  assert.equal(log.stdout, 'Sandbox User/first commit\n')
})

test('remoteAdd, remoteGet, push with upstream, clone, push from the clone, pull', async () => {
  const repo = `${base}/work`
  await sbx.git.remoteAdd(repo, 'origin', url)
  assert.equal(await sbx.git.remoteGet(repo, 'origin'), url)
  assert.equal(await sbx.git.remoteGet(repo, 'nope'), undefined)

  await sbx.git.push(repo, { remote: 'origin', branch: 'main' })
  const st = await sbx.git.status(repo)
  assert.equal(st.upstream, 'origin/main')

  const clone = `${base}/clone`
  await sbx.git.clone(url, { path: clone })
  assert.equal(await sbx.files.read(`${clone}/README.md`), 'hello\n')

  await sbx.files.write(`${clone}/second.txt`, 'from the clone\n')
  await sbx.git.add(clone, { files: ['second.txt'] })
  await sbx.git.commit(clone, 'second commit', { authorName: 'Other', authorEmail: 'o@example.com' })
  await sbx.git.push(clone)

  await sbx.git.pull(repo)
  assert.equal(await sbx.files.read(`${repo}/second.txt`), 'from the clone\n')
  const log = await sbx.commands.run(`git -C ${repo} log --format=%an/%s`)
  assert.equal(log.stdout, 'Other/second commit\nSandbox User/first commit\n')
})

test('clone with branch and depth', async () => {
  const shallow = `${base}/shallow`
  await sbx.git.clone(url, { path: shallow, branch: 'main', depth: 1 })
  const r = await sbx.commands.run(`git -C ${shallow} rev-list --count HEAD`)
  assert.equal(r.stdout, '1\n')
})

test('createBranch, checkoutBranch, deleteBranch', async () => {
  const repo = `${base}/work`
  await sbx.git.createBranch(repo, 'feature')
  let br = await sbx.git.branches(repo)
  assert.equal(br.currentBranch, 'feature')
  assert.deepEqual([...br.branches].sort(), ['feature', 'main'])
  await sbx.git.checkoutBranch(repo, 'main')
  await sbx.git.deleteBranch(repo, 'feature')
  br = await sbx.git.branches(repo)
  assert.deepEqual(br.branches, ['main'])
})

test('restore and reset', async () => {
  const repo = `${base}/work`
  await sbx.files.write(`${repo}/README.md`, 'changed\n')
  await sbx.git.restore(repo, { paths: ['README.md'] })
  assert.equal(await sbx.files.read(`${repo}/README.md`), 'hello\n')

  await sbx.files.write(`${repo}/README.md`, 'staged change\n')
  await sbx.git.add(repo, { files: ['README.md'] })
  assert.equal((await sbx.git.status(repo)).stagedCount, 1)
  await sbx.git.reset(repo, { mode: 'mixed' })
  const st = await sbx.git.status(repo)
  assert.equal(st.stagedCount, 0)
  assert.equal(st.unstagedCount, 1)
  await sbx.git.reset(repo, { mode: 'hard', target: 'HEAD' })
  assert.equal((await sbx.git.status(repo)).isClean, true)
})

test('pull without an upstream is the SDK upstream error', async () => {
  const lone = `${base}/lone`
  await sbx.git.init(lone, { initialBranch: 'main' })
  await sbx.files.write(`${lone}/a.txt`, 'a\n')
  await sbx.git.add(lone)
  await sbx.git.commit(lone, 'a')
  await assert.rejects(sbx.git.pull(lone), (e) => e instanceof GitUpstreamError)
})

test('a server that wants credentials surfaces as GitAuthError', async () => {
  const priv = `http://127.0.0.1:${authPort}/private.git`
  // no credentials: git may not prompt (GIT_TERMINAL_PROMPT=0)
  await assert.rejects(sbx.git.clone(priv, { path: `${base}/p1` }), (e) => {
    assert.ok(e instanceof GitAuthError, `${e.constructor.name}: ${e.message}`)
    return true
  })
  // wrong credentials: "Authentication failed"
  await assert.rejects(
    sbx.git.clone(priv, { path: `${base}/p2`, username: 'u', password: 'wrong' }),
    (e) => {
      assert.ok(e instanceof GitAuthError, `${e.constructor.name}: ${e.message}`)
      return true
    },
  )
  // credentials given for one command are not left in the clone's config
  const r = await sbx.commands.run(`test -e ${base}/p2 && git -C ${base}/p2 remote get-url origin || echo none`)
  assert.ok(!r.stdout.includes('wrong'), r.stdout)
})

test('dangerouslyAuthenticate stores credentials in the user\'s store', async () => {
  await sbx.git.dangerouslyAuthenticate({ username: 'bot', password: 'tok3n', host: 'git.example.com' })
  const r = await sbx.commands.run('git config --global credential.helper; cat ~/.git-credentials')
  assert.equal(r.stdout, 'store\nhttps://bot:tok3n@git.example.com\n')
  const fill = await sbx.commands.run(
    "printf 'protocol=https\\nhost=git.example.com\\n\\n' | git credential fill",
  )
  assert.match(fill.stdout, /username=bot\npassword=tok3n\n/)
})
