// SPDX-License-Identifier: Apache-2.0
// Hung mounts the way users make them, from the host through the SDK
// (run by tests/vm/80_hungfs.sh, which starts the servers on the host):
//
//   fuse  `sudo sshfs ... -o allow_other` as user `user`, the way agent
//         frameworks mount a bucket (`sudo s3fs ...`); the SFTP server is
//         on the host (HUNGFS_SFTP_PIDS lists its processes)
//   nfs   an NFS volume mounted by /init (volumeMounts), served from the
//         host (HUNGFS_NFS_PID is the server)
//
// For each: the files API (write, read, list, stat), a watch and a command
// work on the mount; then the server is stopped (SIGSTOP) and envd must
// stay responsive (/health, Stat and a download elsewhere, a command) while
// requests on the mount end with deadline_exceeded within their deadline
// (Connect-Timeout-Ms) + 1 s; `umount -l` through a command clears it and
// the mount point is a plain directory again; SIGCONT lets the stuck
// requests finish.
//
// Prints "ok - ..." / "FAIL - ..." lines, "# ..." figures, and last
// "hungfs: N passed, N failed".
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'

const { Sandbox } = createRequire(new URL('../../sdk/', import.meta.url))('e2b')
const URL_ = process.env.VM_URL
const MODE = process.argv[2] ?? 'fuse'
const DEADLINE_MS = Number(process.env.HUNGFS_DEADLINE_MS ?? 3000)
// Under emulation on a loaded host a command takes seconds; nothing here
// waits on a fixed delay to decide a result, only these hang bounds.
const ANSWER_MS = Number(process.env.HUNGFS_ANSWER_MS ?? 15000)
const HANG_MS = 120000

let passed = 0
let failed = 0
const ok = (m) => { passed++; console.log(`ok   - ${m}`) }
const nok = (m, why) => { failed++; console.log(`FAIL - ${m}${why ? `: ${why}` : ''}`) }
const check = (cond, m, why) => (cond ? ok(m) : nok(m, why))
const note = (m) => console.log(`# ${m}`)
const now = () => performance.now()
// A signal that aborts after ms (AbortSignal.timeout's timer is not kept
// alive by Node and may never fire while a socket is all that is left).
const bounded = (ms) => {
  const c = new AbortController()
  const t = setTimeout(() => c.abort(new Error(`no answer within ${ms} ms`)), ms)
  return { signal: c.signal, clear: () => clearTimeout(t) }
}
// p, or { hung: true } once ms have passed, whichever comes first.
const within = (p, ms, t0) => new Promise((resolve) => {
  const t = setTimeout(() => resolve({ hung: true, ms: now() - t0 }), ms + 1000)
  p.then((v) => { clearTimeout(t); resolve(v) })
})
const auth = { Authorization: 'Basic ' + Buffer.from('user:').toString('base64') }

// A unary Connect call with our own deadline header and a hang bound of
// our own; resolves to { status, body, ms } or { hung: true, ms }.
function connect(method, body, opts = {}) {
  const t0 = now()
  return within(connect1(method, body, opts), opts.bound ?? ANSWER_MS, t0)
}
async function connect1(method, body, { timeoutMs = DEADLINE_MS, bound = ANSWER_MS } = {}) {
  const t0 = now()
  const headers = { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', ...auth }
  if (timeoutMs) headers['Connect-Timeout-Ms'] = String(timeoutMs)
  const b = bounded(bound)
  try {
    const res = await fetch(`${URL_}/${method}`, {
      method: 'POST', headers, body: JSON.stringify(body), signal: b.signal,
    })
    const text = await res.text()
    b.clear()
    let j = {}
    try { j = JSON.parse(text) } catch { j = { raw: text } }
    return { status: res.status, body: j, ms: now() - t0 }
  } catch (e) {
    return { hung: true, ms: now() - t0, err: String(e) }
  }
}
function get(path, opts = {}) {
  const t0 = now()
  return within(get1(path, opts), opts.bound ?? ANSWER_MS, t0)
}
async function get1(path, { bound = ANSWER_MS, headers = {} } = {}) {
  const t0 = now()
  const b = bounded(bound)
  try {
    const res = await fetch(`${URL_}${path}`, { headers: { ...auth, ...headers }, signal: b.signal })
    const text = await res.text()
    b.clear()
    return { status: res.status, text, ms: now() - t0 }
  } catch (e) {
    return { hung: true, ms: now() - t0, err: String(e) }
  }
}
const health = (bound = ANSWER_MS) => get('/health', { bound })
const stopServer = (sig) => {
  for (const p of pids()) {
    try { process.kill(p, sig) } catch {}
  }
}
function pids() {
  if (MODE === 'nfs') return [Number(process.env.HUNGFS_NFS_PID)]
  try {
    return readFileSync(process.env.HUNGFS_SFTP_PIDS, 'utf8').split('\n').filter(Boolean).map(Number)
  } catch { return [] }
}
const run = async (sbx, cmd, opts = {}) => {
  try {
    const r = await sbx.commands.run(cmd, { timeoutMs: HANG_MS, ...opts })
    return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr }
  } catch (e) {
    return { exitCode: e.exitCode ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(e), error: e }
  }
}
const waitFor = async (pred, ms) => {
  const end = now() + ms
  while (now() < end) {
    if (await pred()) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}
const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b)
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : NaN
}

async function main() {
  const sbx = await Sandbox.create({ debug: true })
  const user = { user: 'user' }
  const MNT = MODE === 'nfs' ? '/mnt/hungfs-nfs' : '/home/user/remote'

  // ---- mount ----
  if (MODE === 'fuse') {
    await run(sbx, `mkdir -p ${MNT}`, user)
    // As an agent framework does it (`sudo s3fs bucket /path -o allow_other,...`).
    const m = await run(sbx,
      `sudo sshfs -o allow_other,directport=22,dir_cache=no 169.254.169.254: ${MNT}`, user)
    check(m.exitCode === 0, `sudo sshfs -o allow_other mounts ${MNT} as user`, m.stderr)
    if (m.exitCode !== 0) return
  } else {
    // The template's rpcbind and rpc.statd (what its systemd runs; remote
    // locking for an NFSv3 mount needs statd), then /init as the platform
    // sends it with a volume.
    const s = await run(sbx, 'pgrep -x rpcbind >/dev/null || rpcbind; pgrep -x rpc.statd >/dev/null || rpc.statd --no-notify', { user: 'root' })
    check(s.exitCode === 0, 'rpcbind and rpc.statd run in the guest', s.stderr)
    const ts = new Date().toISOString()
    const r = await fetch(`${URL_}/init`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        timestamp: ts, defaultUser: 'user', accessToken: process.env.VM_TOKEN,
        volumeMounts: [{ nfs_target: `169.254.169.254:${process.env.HUNGFS_NFS_EXPORT}`, path: MNT }],
      }),
      signal: bounded(HANG_MS).signal,
    })
    const t = await r.text()
    if (r.status === 204) {
      ok(`/init mounts the NFS volume at ${MNT}`)
    } else if (r.status === 400 && /timed out/.test(t)) {
      // /init gives the mounts 10 s in all; under emulation on a busy host
      // mount.nfs can take longer. The same mount, with /init's options,
      // through a command then.
      note(`/init: ${t.trim()}: mounting with the same options through a command`)
      const m = await run(sbx, `mkdir -p ${MNT} && mount -t nfs -o fg,hard,sync,rsize=1048576,wsize=1048576,mountproto=tcp,mountport=2049,proto=tcp,port=2049,nfsvers=3,noacl,noac,lookupcache=none 169.254.169.254:${process.env.HUNGFS_NFS_EXPORT} ${MNT}`, { user: 'root' })
      check(m.exitCode === 0, `the NFS volume is mounted at ${MNT} with /init's options`, m.stderr)
      if (m.exitCode !== 0) return
    } else {
      nok(`/init mounts the NFS volume at ${MNT}`, `${r.status} ${t}`)
      return
    }
    await run(sbx, `chmod 1777 ${MNT}`, { user: 'root' })
  }
  const mnt = await run(sbx, `findmnt -n -o FSTYPE,OPTIONS ${MNT}`, user)
  note(`${MNT}: ${mnt.stdout.trim()}`)

  // ---- it works ----
  const events = []
  let watch
  try {
    watch = await sbx.files.watchDir(MNT, (e) => events.push(e), { ...user, timeoutMs: 0 })
    ok('watchDir on the mount')
  } catch (e) {
    // The reference refuses to watch a network filesystem, with this message.
    check(/invalid_argument|InvalidArgument/.test(`${e.name} ${e.message}`) && /network filesystem/.test(e.message),
      'watchDir on the mount is refused as a network filesystem (as the reference does)', String(e))
  }
  try {
    await sbx.files.write(`${MNT}/a.txt`, 'hello over the wire\n', user)
    const back = await sbx.files.read(`${MNT}/a.txt`, user)
    check(back === 'hello over the wire\n', 'files.write then files.read on the mount', JSON.stringify(back))
    const l = await sbx.files.list(MNT, user)
    check(l.some((e) => e.name === 'a.txt'), 'files.list on the mount shows the file', JSON.stringify(l.map((e) => e.name)))
    const i = await sbx.files.getInfo(`${MNT}/a.txt`, user)
    check(i.size === 20 && i.type === 'file', 'files.getInfo on the mount', JSON.stringify(i))
  } catch (e) {
    nok('files API on the mount', String(e))
  }
  if (watch) {
    const seen = await waitFor(() => events.some((e) => e.name === 'a.txt'), HANG_MS)
    check(seen, 'the watch reported the write', JSON.stringify(events))
  }
  const c = await run(sbx, `cat ${MNT}/a.txt && ls ${MNT}`, user)
  check(c.exitCode === 0 && c.stdout.includes('hello over the wire'), 'a command reads the mount', `${c.exitCode} ${c.stdout} ${c.stderr}`)

  // ---- the server stops answering ----
  stopServer('SIGSTOP')
  note(`server stopped (SIGSTOP ${pids().join(' ')})`)
  // Fresh names: cached ones may still answer from the kernel's caches.
  const hung = [
    ['filesystem.Filesystem/Stat', { path: `${MNT}/fresh-stat` }],
    ['filesystem.Filesystem/ListDir', { path: `${MNT}/fresh-dir`, depth: 1 }],
    ['filesystem.Filesystem/MakeDir', { path: `${MNT}/fresh-mkdir` }],
    ['filesystem.Filesystem/Move', { source: `${MNT}/a.txt`, destination: `${MNT}/fresh-moved` }],
    ['filesystem.Filesystem/Remove', { path: `${MNT}/fresh-remove` }],
    ['filesystem.Filesystem/CreateWatcher', { path: `${MNT}/fresh-watch` }],
  ]
  const pending = []
  for (const [m, b] of hung) pending.push(connect(m, b).then((r) => ({ m, r })))
  // A download has no Connect deadline header of its own: the server's
  // default deadline applies (HUNGFS_GET_BOUND_MS bounds the wait).
  const getBound = Number(process.env.HUNGFS_GET_BOUND_MS ?? 40000)
  const getHung = get(`/files?path=${encodeURIComponent(`${MNT}/fresh-get`)}`, { bound: getBound, headers: { 'Connect-Timeout-Ms': String(DEADLINE_MS) } })

  // envd answers elsewhere while those hang.
  const h0 = await health()
  const blocked = h0.hung || h0.status !== 204
  check(!blocked, `/health answers while requests hang on the stopped mount (${Math.round(h0.ms)} ms)`,
    blocked ? `no answer within ${ANSWER_MS} ms: the event loop is blocked by the hung mount` : '')
  if (blocked) {
    // The old envd: its loop waits for the mount. Let the server answer
    // again now, so the rest of the run (and of the VM suite) goes on.
    stopServer('SIGCONT')
    note('envd is blocked by the hung mount: server resumed early')
  }
  const lat = { health: [], stat: [], download: [], start: [] }
  if (!blocked) {
    for (let i = 0; i < 5; i++) {
      const a = await health(); lat.health.push(a.hung ? Infinity : a.ms)
      const b = await connect('filesystem.Filesystem/Stat', { path: '/tmp' }, { timeoutMs: 0 }); lat.stat.push(b.hung ? Infinity : b.ms)
      const d = await get('/files?path=/etc/hostname'); lat.download.push(d.hung || d.status !== 200 ? Infinity : d.ms)
      const t0 = now(); const e = await within(run(sbx, 'true', { ...user, timeoutMs: ANSWER_MS }), ANSWER_MS, t0)
      lat.start.push(e.exitCode === 0 ? now() - t0 : Infinity)
      note(`round ${i}: health ${Math.round(lat.health[i])} stat ${Math.round(lat.stat[i])} download ${Math.round(lat.download[i])} start ${Math.round(lat.start[i])} ms`)
    }
    for (const [k, v] of Object.entries(lat)) {
      check(v.every(Number.isFinite), `${k} answers during the hang (p50 ${Math.round(pct(v, 50))} ms, max ${Math.round(Math.max(...v))} ms)`)
    }
  } else {
    nok('the rest of envd stays responsive', 'skipped: /health did not answer')
  }
  // Every hung request ends, with deadline_exceeded, within deadline + 1 s.
  const done = await Promise.all(pending)
  for (const { m, r } of done) {
    const code = r.body?.code ?? (r.status === 504 || /deadline/.test(r.text ?? '') ? 'deadline_exceeded' : undefined)
    const within = !r.hung && r.ms <= DEADLINE_MS + 1000
    const what = r.hung ? `no answer within ${ANSWER_MS} ms` : `HTTP ${r.status} ${JSON.stringify(r.body ?? r.text).slice(0, 160)} after ${Math.round(r.ms)} ms`
    check(code === 'deadline_exceeded' && within, `${m} on the hung mount: deadline_exceeded within ${DEADLINE_MS} + 1000 ms`, what)
    if (m === 'filesystem.Filesystem/Stat' && r.body?.message) note(`message: ${r.body.message}`)
  }
  // Through the SDK: the same request fails (it does not hang).
  try {
    const t0 = now()
    await sbx.files.getInfo(`${MNT}/fresh-sdk`, { ...user, requestTimeoutMs: DEADLINE_MS })
    nok('SDK getInfo on the hung mount fails')
  } catch (e) {
    check(/deadline|timeout|timed out/i.test(`${e.name} ${e.message}`), `SDK getInfo on the hung mount fails with a timeout (${e.name})`, e.message)
  }

  const g = await getHung
  check(!g.hung && g.status >= 400, `GET /files on the hung mount ends with an error (HTTP ${g.status ?? '-'} after ${Math.round(g.ms)} ms)`,
    g.hung ? `no answer within ${getBound} ms` : (g.text ?? '').slice(0, 160))

  // umount -l through a command clears it (when envd still starts commands).
  let cleared = false
  if (!blocked) {
    const u = await run(sbx, `sudo umount -l ${MNT}`, { ...user, timeoutMs: ANSWER_MS * 3 })
    check(u.exitCode === 0, `sudo umount -l ${MNT} through a command while the server is stopped`, u.stderr)
    cleared = u.exitCode === 0
  }
  if (cleared) {
    try {
      await sbx.files.write(`${MNT}/plain.txt`, 'plain\n', user)
      const l = await sbx.files.list(MNT, user)
      const i = await sbx.files.getInfo(MNT, user)
      check(l.length === 1 && l[0].name === 'plain.txt' && i.type === 'dir',
        'after umount -l the mount point is a plain directory again', JSON.stringify(l.map((e) => e.name)))
    } catch (e) {
      nok('after umount -l the mount point is a plain directory again', String(e))
    }
  }
  // ---- the server answers again ----
  stopServer('SIGCONT')
  note('server resumed (SIGCONT)')
  const h1 = await health(HANG_MS)
  check(!h1.hung && h1.status === 204, `envd answers after the server resumed (${Math.round(h1.ms)} ms)`)
  if (!cleared) {
    // The old daemon was blocked: take the mount away so the suite goes on.
    const u = await run(sbx, `sudo umount -l ${MNT}`, user)
    check(u.exitCode === 0, `sudo umount -l ${MNT} after the resume`, u.stderr)
  }
  if (watch) await watch.stop().catch(() => {})
  const envd = await run(sbx, 'ls /proc/$(pgrep -xo envd)/fd | wc -l; grep Threads /proc/$(pgrep -xo envd)/status', { user: 'root' })
  note(`envd after the ${MODE} run: fds and threads ${envd.stdout.replace(/\s+/g, ' ').trim()}`)
}

try {
  await main()
} catch (e) {
  nok('the scenario ran to its end', e?.stack ?? String(e))
  stopServer('SIGCONT')
}
console.log(`hungfs-${MODE}: ${passed} passed, ${failed} failed`)
process.exit(failed ? 1 : 0)
