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
// work on the mount; then the server is stopped (SIGSTOP), 40 requests
// hang on the mount, and envd must stay responsive (/health, Stat and a
// download elsewhere, Start of a command: their p50/p99 are printed) while
// each hung request ends with deadline_exceeded within its deadline
// (Connect-Timeout-Ms, or the server's default for a download) + 1 s of
// reaching envd; after SIGCONT the mount works again; stopped once more,
// `umount -l` through a command clears it and the mount point is a plain
// directory again; envd's threads and fds come back to what they were.
//
// Prints "ok - ..." / "FAIL - ..." lines, "# ..." figures, and last
// "hungfs: N passed, N failed".
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'
import http2 from 'node:http2'
import { monitorEventLoopDelay } from 'node:perf_hooks'

const { Sandbox } = createRequire(new URL('../../sdk/', import.meta.url))('e2b')
const URL_ = process.env.VM_URL
const MODE = process.argv[2] ?? 'fuse'
const DEADLINE_MS = Number(process.env.HUNGFS_DEADLINE_MS ?? 3000)
// Under emulation on a loaded host a command takes seconds; nothing here
// waits on a fixed delay to decide a result, only these hang bounds.
const ANSWER_MS = Number(process.env.HUNGFS_ANSWER_MS ?? 15000)
const HANG_MS = 120000
// 40 requests hang on the mount at once, HUNG_GETS of them downloads,
// which end at the server's default deadline (envd's -fs-timeout, 30 s).
const HUNG_N = Number(process.env.HUNGFS_HUNG ?? 40)
const HUNG_GETS = Number(process.env.HUNGFS_HUNG_GETS ?? 4)
const FS_TIMEOUT_MS = Number(process.env.HUNGFS_FS_TIMEOUT_MS ?? 30000)
const ROUNDS = Number(process.env.HUNGFS_ROUNDS ?? 8)
// envd's worker pool keeps this many threads when idle (WORKER_THREADS_CORE).
const POOL_CORE = 4

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
const waitFor = async (pred, ms, every = 50) => {
  const end = now() + ms
  while (now() < end) {
    if (await pred()) return true
    await new Promise((r) => setTimeout(r, every))
  }
  return false
}
const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b)
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : NaN
}

// envd's threads and fds, listed through envd itself (/proc/self is
// envd to its workers).
async function envdCounts() {
  const ls = async (d) => {
    const r = await connect('filesystem.Filesystem/ListDir', { path: d, depth: 1 }, { timeoutMs: 0, bound: HANG_MS })
    return r.body?.entries?.length ?? NaN
  }
  return { threads: await ls('/proc/self/task'), fds: await ls('/proc/self/fd') }
}

// One HTTP/2 connection (prior knowledge) for many requests at once.
function h2connect() {
  return new Promise((resolve, reject) => {
    const s = http2.connect(URL_)
    s.once('connect', () => resolve(s))
    s.once('error', reject)
    s.on('error', () => {})
  })
}
// A PING's round trip on the connection; one at a time is shared.
let pinging = null
function h2rtt(s) {
  if (!pinging) {
    pinging = new Promise((resolve) => {
      const t0 = now()
      try {
        s.ping((err, ms) => resolve(err ? now() - t0 : ms))
      } catch { resolve(now() - t0) }
    }).finally(() => { pinging = null })
  }
  return pinging
}
// A request on the connection; resolves to { status, text, body, ms, rtt }
// (ms from sending it to its response headers; rtt of a PING sent then),
// or { hung: true } past deadline + ANSWER_MS.
function h2send(s, headers, body, deadline) {
  return new Promise((resolve) => {
    const h = { ...headers, 'x-access-token': process.env.VM_TOKEN ?? '', ...auth }
    const t0 = now()
    const st = s.request(h)
    let status, ms, rttP, text = ''
    const t = setTimeout(() => { st.close(); resolve({ hung: true, ms: now() - t0 }) }, deadline + ANSWER_MS)
    st.on('response', (rh) => { ms = now() - t0; status = rh[':status']; rttP = h2rtt(s) })
    st.setEncoding('utf8')
    st.on('data', (c) => { text += c })
    st.on('end', async () => {
      clearTimeout(t)
      const rtt = await rttP
      let j
      try { j = JSON.parse(text) } catch {}
      resolve({ status, text, body: j, ms, rtt })
    })
    st.on('error', (e) => { clearTimeout(t); resolve({ hung: true, ms: now() - t0, err: String(e) }) })
    st.end(body)
  })
}
const h2call = (s, method, body, deadline) => h2send(s, {
  ':method': 'POST', ':path': `/${method}`, 'content-type': 'application/json', 'connect-protocol-version': '1',
  ...(deadline > 0 ? { 'connect-timeout-ms': String(deadline) } : {}),
}, JSON.stringify(body), deadline)
const h2get = (s, path, deadline) => h2send(s, { ':method': 'GET', ':path': path }, undefined, deadline)

async function main() {
  const sbx = await Sandbox.create({ debug: true })
  const user = { user: 'user' }
  const MNT = MODE === 'nfs' ? '/mnt/hungfs-nfs' : '/home/user/remote'

  // ---- mount ----
  if (MODE === 'fuse') {
    // As an agent framework does it (`sudo s3fs bucket /path -o allow_other,...`).
    const m = await run(sbx,
      `mkdir -p ${MNT} && sudo sshfs -o allow_other,directport=22,dir_cache=no 169.254.169.254: ${MNT} && findmnt -n -o FSTYPE,OPTIONS ${MNT}`, user)
    check(m.exitCode === 0, `sudo sshfs -o allow_other mounts ${MNT} as user`, m.stderr)
    if (m.exitCode !== 0) return
    note(`${MNT}: ${m.stdout.trim()}`)
  } else {
    // The template's rpcbind and rpc.statd (what its systemd runs; remote
    // locking for an NFSv3 mount needs statd), then /init as the platform
    // sends it with a volume.
    const s = await run(sbx, 'pgrep -x rpcbind >/dev/null || rpcbind; pgrep -x rpc.statd >/dev/null || rpc.statd --no-notify', { user: 'root' })
    check(s.exitCode === 0, 'rpcbind and rpc.statd run in the guest', s.stderr)
    const ts = new Date().toISOString()
    const ti = now()
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
      ok(`/init mounts the NFS volume at ${MNT} (${Math.round(now() - ti)} ms)`)
    } else if (r.status === 400 && /timed out/.test(t)) {
      // /init gives the mounts 10 s in all; under emulation on a busy host
      // mount.nfs can take longer. The same mount, with /init's options,
      // through a command then.
      note(`/init after ${Math.round(now() - ti)} ms: ${t.trim()}: mounting with the same options through a command`)
      const tm = now()
      const m = await run(sbx, `mkdir -p ${MNT} && mount -t nfs -o fg,hard,sync,rsize=1048576,wsize=1048576,mountproto=tcp,mountport=2049,proto=tcp,port=2049,nfsvers=3,noacl,noac,lookupcache=none 169.254.169.254:${process.env.HUNGFS_NFS_EXPORT} ${MNT}`, { user: 'root' })
      check(m.exitCode === 0, `the NFS volume is mounted at ${MNT} with /init's options (${Math.round(now() - tm)} ms)`, m.stderr)
      if (m.exitCode !== 0) return
    } else {
      nok(`/init mounts the NFS volume at ${MNT}`, `${r.status} ${t}`)
      return
    }
    const mnt = await run(sbx, `chmod 1777 ${MNT} && findmnt -n -o FSTYPE,OPTIONS ${MNT}`, { user: 'root' })
    note(`${MNT}: ${mnt.stdout.trim()}`)
  }

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

  // The hung requests go over one HTTP/2 connection made beforehand:
  // slirp's host forwarding stalls a burst of new connections for
  // seconds, which would be counted against envd's deadline.
  const h2 = await h2connect()
  // Before the hang: envd's threads and fds (listed through envd itself),
  // to compare after the resume.
  const before = await envdCounts()
  note(`envd before the hang: ${before.threads} threads, ${before.fds} fds`)

  stopServer('SIGSTOP')
  note(`server stopped (SIGSTOP ${pids().join(' ')})`)
  // Fresh names: cached ones may still answer from the kernel's caches.
  // How late this process itself ran (timers firing late: a host too busy
  // to schedule us), from the sending to the last answer of each group: an
  // answer we could not read in time is not envd's lateness.
  const lagRpc = monitorEventLoopDelay({ resolution: 10 })
  const lagGet = monitorEventLoopDelay({ resolution: 10 })
  lagRpc.enable()
  lagGet.enable()
  const hung = []
  const kinds = [
    ['Stat', (i) => ({ path: `${MNT}/fresh-stat-${i}` })],
    ['ListDir', (i) => ({ path: `${MNT}/fresh-dir-${i}`, depth: 1 })],
    ['MakeDir', (i) => ({ path: `${MNT}/fresh-mkdir-${i}` })],
    ['Move', (i) => ({ source: `${MNT}/a.txt`, destination: `${MNT}/fresh-moved-${i}` })],
    ['Remove', (i) => ({ path: `${MNT}/fresh-remove-${i}` })],
    ['CreateWatcher', (i) => ({ path: `${MNT}/fresh-watch-${i}` })],
  ]
  for (let i = 0; hung.length < HUNG_N - HUNG_GETS; i++) {
    const [k, body] = kinds[i % kinds.length]
    hung.push(h2call(h2, `filesystem.Filesystem/${k}`, body(i), DEADLINE_MS).then((r) => ({ m: k, r, deadline: DEADLINE_MS })))
  }
  // A download carries no deadline of its own: the server's default applies.
  for (let i = 0; i < HUNG_GETS; i++) {
    hung.push(h2get(h2, `/files?path=${encodeURIComponent(`${MNT}/fresh-get-${i}`)}`, FS_TIMEOUT_MS)
      .then((r) => ({ m: 'GET /files', r, deadline: FS_TIMEOUT_MS })))
  }
  note(`${hung.length} requests on the stopped mount (${HUNG_GETS} of them GET /files)`)
  const rpcsDone = Promise.all(hung.slice(0, HUNG_N - HUNG_GETS)).then(() => lagRpc.disable())
  const getsDone = Promise.all(hung.slice(HUNG_N - HUNG_GETS)).then(() => lagGet.disable())

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
    // Start's answer is its start event (the SDK's background run returns
    // on it); the command's end is waited for apart.
    for (let i = 0; i < ROUNDS; i++) {
      const a = await health(); lat.health.push(a.hung ? Infinity : a.ms)
      const b = await connect('filesystem.Filesystem/Stat', { path: '/tmp' }, { timeoutMs: 0 }); lat.stat.push(b.hung || b.status !== 200 ? Infinity : b.ms)
      const d = await get('/files?path=/etc/hostname'); lat.download.push(d.hung || d.status !== 200 ? Infinity : d.ms)
      const t0 = now()
      const e = await within(sbx.commands.run('true', { ...user, background: true, timeoutMs: HANG_MS }).catch((err) => ({ err })), ANSWER_MS, t0)
      lat.start.push(e.hung || e.err ? Infinity : now() - t0)
      const w = e.hung || e.err ? { exitCode: -1 } : await e.wait().catch((err) => err)
      if (w.exitCode !== 0) lat.start[i] = Infinity
      note(`round ${i}: health ${Math.round(lat.health[i])} stat ${Math.round(lat.stat[i])} download ${Math.round(lat.download[i])} start ${Math.round(lat.start[i])} ms`)
    }
    for (const [k, v] of Object.entries(lat)) {
      check(v.every(Number.isFinite), `${k} answers during the hang (p50 ${Math.round(pct(v, 50))} ms, p99 ${Math.round(pct(v, 99))} ms, ${v.length} samples)`)
    }
    note(`latency while ${hung.length} requests hang (ms): ` +
      Object.entries(lat).map(([k, v]) => `${k} p50 ${Math.round(pct(v, 50))} p99 ${Math.round(pct(v, 99))}`).join(', '))
  } else {
    nok('the rest of envd stays responsive', 'skipped: /health did not answer')
  }
  // Through the SDK: a request on the mount fails (it does not hang).
  try {
    await sbx.files.getInfo(`${MNT}/fresh-sdk`, { ...user, requestTimeoutMs: DEADLINE_MS })
    nok('SDK getInfo on the hung mount fails')
  } catch (e) {
    check(/deadline|timeout|timed out/i.test(`${e.name} ${e.message}`), `SDK getInfo on the hung mount fails with a timeout (${e.name})`, e.message)
  }
  // Every hung request ends, with deadline_exceeded, within twice its
  // deadline of reaching envd: the time from sending it to its answer,
  // less the connection's round trip (an HTTP/2 PING sent as the answer
  // came) and less the longest time this process did not run meanwhile.
  // The server stays stopped until after these answers, so any answer is
  // the deadline's; the bound only says it was kept, not how fast an
  // emulated guest on a busy host runs (a loaded run saw 1.06-1.09 s of
  // lateness with the guest's own scheduling, which no probe here sees).
  const LATE_MS = Math.max(1000, DEADLINE_MS)
  const done = await Promise.all(hung)
  await rpcsDone
  await getsDone
  const lag = { rpc: lagRpc.max / 1e6, get: lagGet.max / 1e6 }
  note(`this process ran late by up to ${Math.round(lag.rpc)} ms while the RPCs hung, ${Math.round(lag.get)} ms while the downloads did`)
  const by = {}
  for (const { m, r, deadline } of done) {
    const code = m === 'GET /files' ? (r.status === 504 ? 'deadline_exceeded' : `HTTP ${r.status}`) : r.body?.code
    const late = r.hung ? Infinity : r.ms - r.rtt - (m === 'GET /files' ? lag.get : lag.rpc) - deadline
    const e = (by[m] ??= { n: 0, bad: [], late: [] })
    e.n++
    e.late.push(late)
    if (code !== 'deadline_exceeded' || late > LATE_MS) {
      e.bad.push(r.hung ? `no answer within ${deadline + ANSWER_MS} ms` :
        `HTTP ${r.status} ${JSON.stringify(r.body ?? r.text).slice(0, 160)} after ${Math.round(r.ms)} ms (round trip ${Math.round(r.rtt)} ms)`)
    }
    if (m === 'Stat' && e.n === 1 && r.body?.message) note(`message: ${r.body.message}`)
  }
  for (const [m, e] of Object.entries(by)) {
    check(!e.bad.length, `${e.n} x ${m} on the hung mount: deadline_exceeded within deadline + ${LATE_MS} ms (past the deadline by ${Math.round(Math.min(...e.late))}..${Math.round(Math.max(...e.late))} ms)`,
      e.bad.slice(0, 3).join('; '))
  }
  h2.close()

  // ---- the server answers again: the mount works ----
  stopServer('SIGCONT')
  note('server resumed (SIGCONT)')
  const h1 = await health(HANG_MS)
  check(!h1.hung && h1.status === 204, `envd answers after the server resumed (${Math.round(h1.ms)} ms)`)
  try {
    await sbx.files.write(`${MNT}/b.txt`, 'after the resume\n', { ...user, requestTimeoutMs: HANG_MS })
    const back = await sbx.files.read(`${MNT}/b.txt`, { ...user, requestTimeoutMs: HANG_MS })
    const l = await sbx.files.list(MNT, { ...user, requestTimeoutMs: HANG_MS })
    check(back === 'after the resume\n' && l.some((e) => e.name === 'b.txt'), 'after the resume the files API works on the mount again',
      `${JSON.stringify(back)} ${JSON.stringify(l.map((e) => e.name))}`)
  } catch (e) {
    nok('after the resume the files API works on the mount again', String(e))
  }
  if (watch) await watch.stop().catch(() => {})

  // ---- stopped again: umount -l through a command clears it ----
  let cleared = false
  if (!blocked) {
    stopServer('SIGSTOP')
    const u = await run(sbx, `sudo umount -l ${MNT}`, { ...user, timeoutMs: HANG_MS })
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
  stopServer('SIGCONT')
  if (!cleared) {
    const u = await run(sbx, `sudo umount -l ${MNT}`, { ...user, timeoutMs: HANG_MS })
    check(u.exitCode === 0, `sudo umount -l ${MNT} after the resume`, u.stderr)
  }
  // The stuck jobs have finished; their threads leave the pool when idle,
  // and nothing they held stays open. The pool keeps POOL_CORE threads
  // once it has grown (it had at least one before: the listing's own), so
  // up to POOL_CORE - 1 more than before is its core, not a leak.
  const most = before.threads + POOL_CORE - 1
  let after = {}
  const back = await waitFor(async () => {
    after = await envdCounts()
    return after.threads <= most && after.fds <= before.fds
  }, HANG_MS, 500)
  check(back, `envd is back to its pool's core (${before.threads} threads before, at most ${most} now: ${after.threads}) and to ${before.fds} fds (${after.fds})`)
}

try {
  await main()
} catch (e) {
  nok('the scenario ran to its end', e?.stack ?? String(e))
  stopServer('SIGCONT')
}
console.log(`hungfs-${MODE}: ${passed} passed, ${failed} failed`)
process.exit(failed ? 1 : 0)
