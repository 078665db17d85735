// SPDX-License-Identifier: Apache-2.0
// SDK-level benchmarks with the official e2b npm package (debug mode,
// E2B_SANDBOX_URL pointing at the envd under test), each measured against
// the same work done locally by node in the same run. Prints one JSON line.
//
//   node bench/sdk.mjs rtt N          commands.run('true') vs spawn of bash -l -c true,
//                                     interleaved one after the other, N each
//   node bench/sdk.mjs session N      commands.run('true') in a warm session (ENVD_SESSION
//                                     in envs) vs a plain commands.run('true'), interleaved
//                                     one after the other, N each
//   node bench/sdk.mjs concurrent N   N concurrent commands.run('true') vs N concurrent
//                                     local spawns of bash -l -c true
//   node bench/sdk.mjs burst N        N concurrent commands.run('sleep 0.2; echo I') with
//                                     the SDK's default timeouts: how many complete, with
//                                     their own output, and how long the burst takes
//   node bench/sdk.mjs download N NAME=PATH=URL...
//                                     files.read(PATH, {format:'stream'}) vs fetch(URL)
//                                     with Accept-Encoding: identity (the same file from
//                                     another server), interleaved, N rounds each after
//                                     one unmeasured warm-up; the best round of each side
//                                     is reported
//   node bench/sdk.mjs pair N PATH URL_A URL_B
//                                     commands.run('true') and files.read(PATH) of a small
//                                     file through two envds (A: the build under test, B:
//                                     another build), all four interleaved, N each; p50/p99
//   node bench/sdk.mjs link N WARM_PATH DATA=PATH,... SERVER=URL...
//                                     files.read(PATH, {format:'stream'}) of every DATA
//                                     file through a Sandbox per SERVER URL (debug mode,
//                                     sandboxUrl = URL), N rounds, servers interleaved,
//                                     after one unmeasured read of WARM_PATH from each;
//                                     every round's time and the best are reported, and
//                                     the Content-Encoding each server chose (a fetch()
//                                     cut off after its head, once the rounds are over)
import { createRequire } from 'node:module'
import { spawn } from 'node:child_process'

const require = createRequire(new URL('../tests/sdk/package.json', import.meta.url))
const { Sandbox } = require('e2b')

const [mode, nArg] = process.argv.slice(2)
const n = Number(nArg)
if (!['rtt', 'session', 'concurrent', 'burst', 'download', 'link', 'pair'].includes(mode) || !(n > 0)) {
  console.error('usage: node bench/sdk.mjs rtt|session|concurrent|burst N | download N NAME=PATH=URL... | link N WARM DATA=PATH,... SERVER=URL...')
  process.exit(2)
}

const now = () => Number(process.hrtime.bigint()) / 1e3 // microseconds

// The local anchor runs bash as the sandbox user with the environment envd
// gives its children, so both sides read the same login profile.
const uid = Number(process.env.BENCH_UID ?? process.getuid())
const gid = Number(process.env.BENCH_GID ?? process.getgid())
const home = process.env.BENCH_HOME ?? process.env.HOME
const childEnv = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: home,
  USER: process.env.BENCH_USER ?? 'root',
  LOGNAME: process.env.BENCH_USER ?? 'root',
}

function localBash() {
  return new Promise((resolve, reject) => {
    const c = spawn('/bin/bash', ['-l', '-c', 'true'], { stdio: 'ignore', uid, gid, cwd: home, env: childEnv })
    c.on('error', reject)
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))))
  })
}

function stats(lat, errors, wallUs) {
  lat.sort((a, b) => a - b)
  const at = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.max(0, Math.ceil((p / 100) * lat.length) - 1))] : 0)
  const mean = lat.length ? lat.reduce((a, b) => a + b, 0) / lat.length : 0
  const r = (x) => Math.round(x * 10) / 10
  const out = { n: lat.length + errors, errors, p50_us: r(at(50)), p99_us: r(at(99)), mean_us: r(mean) }
  if (wallUs) {
    out.seconds = Math.round(wallUs / 1e3) / 1e3
    out.rps = r(((lat.length + errors) / wallUs) * 1e6)
  }
  return out
}

async function timed(fn, lat) {
  const t0 = now()
  try {
    await fn()
    lat.push(now() - t0)
    return 0
  } catch (e) {
    if (process.env.BENCH_VERBOSE) console.error(e)
    return 1
  }
}

const sbx = mode === 'link' || mode === 'pair' ? null : await Sandbox.create({ debug: true })
const run = async () => {
  const r = await sbx.commands.run('true')
  if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}`)
}

// Drain a web stream, counting bytes: what an application reading a
// download chunk by chunk does at the least.
async function drain(stream) {
  let bytes = 0
  for await (const c of stream) bytes += c.length
  return bytes
}

if (mode === 'pair') {
  const [path, urlA, urlB] = process.argv.slice(4)
  const sides = { a: await Sandbox.create({ debug: true, sandboxUrl: urlA }),
    b: await Sandbox.create({ debug: true, sandboxUrl: urlB }) }
  const lat = { a: { run: [], read: [] }, b: { run: [], read: [] } }
  const err = { a: { run: 0, read: 0 }, b: { run: 0, read: 0 } }
  const want = (await sides.a.files.read(path)).length
  for (let i = 0; i < n + 5; i++) {
    for (const k of ['a', 'b']) {
      const s = sides[k]
      const keep = i >= 5 // five unmeasured rounds first
      const r = { run: [], read: [] }
      const e1 = await timed(async () => {
        const x = await s.commands.run('true')
        if (x.exitCode !== 0) throw new Error(`exit ${x.exitCode}`)
      }, r.run)
      const e2 = await timed(async () => {
        const t = await s.files.read(path)
        if (t.length !== want) throw new Error('short read')
      }, r.read)
      if (keep) {
        lat[k].run.push(...r.run)
        lat[k].read.push(...r.read)
        err[k].run += e1
        err[k].read += e2
      }
    }
  }
  const out = {}
  for (const k of ['a', 'b'])
    out[k] = { run: stats(lat[k].run, err[k].run), read: stats(lat[k].read, err[k].read) }
  out.errors = err.a.run + err.a.read + err.b.run + err.b.read
  console.log(JSON.stringify(out))
  process.exit(0)
}

if (mode === 'link') {
  const [warm, dataArg, ...serverArgs] = process.argv.slice(4)
  const data = dataArg.split(',').map((s) => s.split('='))
  const servers = []
  for (const spec of serverArgs) {
    const i = spec.indexOf('=')
    const url = spec.slice(i + 1)
    servers.push({ name: spec.slice(0, i), url, sbx: await Sandbox.create({ debug: true, sandboxUrl: url }) })
  }
  const user = process.env.BENCH_USER ?? 'user'
  const out = {}
  for (const [name] of data) {
    out[name] = {}
    for (const sv of servers) out[name][sv.name] = { runs_ms: [], best_ms: null, bytes: 0, errors: 0 }
  }
  for (const sv of servers) await drain(await sv.sbx.files.read(warm, { format: 'stream' }))
  for (let i = 0; i < n; i++) {
    for (const [name, path] of data) {
      for (const sv of servers) {
        const o = out[name][sv.name]
        const t0 = now()
        try {
          o.bytes = await drain(await sv.sbx.files.read(path, { format: 'stream' }))
          const ms = Math.round((now() - t0) / 100) / 10
          o.runs_ms.push(ms)
          if (o.best_ms === null || ms < o.best_ms) o.best_ms = ms
        } catch (e) {
          if (process.env.BENCH_VERBOSE) console.error(e)
          o.errors++
        }
      }
    }
  }
  for (const [name, path] of data) {
    for (const sv of servers) {
      const ac = new AbortController()
      try {
        const r = await fetch(`${sv.url}/files?path=${encodeURIComponent(path)}&username=${user}`, { signal: ac.signal })
        out[name][sv.name].encoding = r.headers.get('content-encoding') ?? 'identity'
        ac.abort()
      } catch (e) {
        out[name][sv.name].encoding = null
      }
    }
  }
  console.log(JSON.stringify(out))
} else if (mode === 'download') {
  const out = {}
  for (const spec of process.argv.slice(4)) {
    const [name, path, url] = spec.split('=')
    const sdk = { best_s: null, bytes: 0, errors: 0 }
    const ref = { best_s: null, bytes: 0, errors: 0 }
    // What the SDK's HTTP stack is sent: the encoding on the wire.
    const probe = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=${encodeURIComponent(path)}&username=${process.env.BENCH_USER ?? 'user'}`)
    sdk.encoding = probe.headers.get('content-encoding') ?? 'identity'
    sdk.wire_bytes = Number(probe.headers.get('content-length') ?? 0) || null
    await drain(probe.body)
    // cpu_ms: this process's CPU time for the round (user + system), the
    // client's own cost of receiving and decoding, which load elsewhere on
    // the machine does not inflate the way it inflates wall time.
    const round = async (side, fn) => {
      const t0 = now()
      const c0 = process.cpuUsage()
      try {
        side.bytes = await fn()
        const s = (now() - t0) / 1e6
        const c = process.cpuUsage(c0)
        const cpu = Math.round((c.user + c.system) / 100) / 10
        if (side.cpu_ms === undefined || cpu < side.cpu_ms) side.cpu_ms = cpu
        if (side.best_s === null || s < side.best_s) side.best_s = Math.round(s * 1e4) / 1e4
      } catch (e) {
        if (process.env.BENCH_VERBOSE) console.error(e)
        side.errors++
      }
    }
    // One unmeasured read each first: the JIT and zlib warm up on it.
    await drain(await sbx.files.read(path, { format: 'stream' }))
    await drain((await fetch(url, { headers: { 'accept-encoding': 'identity' } })).body)
    for (let i = 0; i < n; i++) {
      await round(sdk, async () => drain(await sbx.files.read(path, { format: 'stream' })))
      await round(ref, async () => {
        const r = await fetch(url, { headers: { 'accept-encoding': 'identity' } })
        if (!r.ok) throw new Error(`status ${r.status}`)
        return drain(r.body)
      })
    }
    if (sdk.bytes !== ref.bytes) sdk.errors++
    out[name] = { sdk, fetch: ref }
  }
  console.log(JSON.stringify(out))
} else if (mode === 'burst') {
  // No options: the SDK's default request and command timeouts apply.
  // BURST_URLS (space-separated) bursts against each envd in turn, one
  // JSON object per URL keyed by it; else the E2B_SANDBOX_URL one alone.
  const burst = async (box) => {
    const lat = []
    const kinds = {}
    let wrong = 0
    let errors = 0
    const t0 = now()
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const s = now()
        try {
          const r = await box.commands.run(`sleep 0.2; echo ${i}`)
          if (r.stdout !== `${i}\n`) wrong++
          lat.push(now() - s)
        } catch (e) {
          errors++
          const k = `${e.name}: ${String(e.message).slice(0, 80)}`
          kinds[k] = (kinds[k] ?? 0) + 1
        }
      })
    )
    const out = stats(lat, errors, now() - t0)
    out.wrong_output = wrong
    out.completed = lat.length - wrong
    if (errors) out.error_kinds = kinds
    return out
  }
  const urls = (process.env.BURST_URLS ?? '').split(' ').filter(Boolean)
  if (!urls.length) {
    console.log(JSON.stringify(await burst(sbx)))
  } else {
    const out = {}
    for (const url of urls) out[url] = await burst(await Sandbox.create({ debug: true, sandboxUrl: url }))
    console.log(JSON.stringify(out))
  }
} else if (mode === 'rtt') {
  const warm = Math.min(20, Math.ceil(n / 10))
  for (let i = 0; i < warm; i++) {
    await run()
    await localBash()
  }
  const sdkLat = []
  const bashLat = []
  let sdkErr = 0
  let bashErr = 0
  for (let i = 0; i < n; i++) {
    sdkErr += await timed(run, sdkLat)
    bashErr += await timed(localBash, bashLat)
  }
  console.log(JSON.stringify({ sdk: stats(sdkLat, sdkErr), bash: stats(bashLat, bashErr) }))
} else if (mode === 'session') {
  const inSession = () => sbx.commands.run('true', { envs: { ENVD_SESSION: `bench-${process.pid}` } })
  const warm = Math.min(20, Math.ceil(n / 10))
  for (let i = 0; i < warm; i++) {
    await run()
    await inSession()
  }
  const sessLat = []
  const plainLat = []
  let sessErr = 0
  let plainErr = 0
  for (let i = 0; i < n; i++) {
    sessErr += await timed(inSession, sessLat)
    plainErr += await timed(run, plainLat)
  }
  console.log(JSON.stringify({ session: stats(sessLat, sessErr), plain: stats(plainLat, plainErr) }))
} else {
  const batch = async (fn) => {
    const lat = []
    const t0 = now()
    const errs = await Promise.all(Array.from({ length: n }, () => timed(fn, lat)))
    return stats(lat, errs.reduce((a, b) => a + b, 0), now() - t0)
  }
  await run()
  const sdk = await batch(run)
  const bash = await batch(localBash)
  console.log(JSON.stringify({ sdk, bash }))
}
process.exit(0)
