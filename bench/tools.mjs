// SPDX-License-Identifier: Apache-2.0
// The agent tools through the official e2b SDK (clients/js/envd-tools.mjs
// over a debug-mode Sandbox) against what an agent does without them:
// commands.run('grep -rn ...') and parsing its output. Interleaved, N
// rounds each after one unmeasured round; prints one JSON line.
//
//   node bench/tools.mjs N DIR TOKEN
// DIR: the directory searched by both (a module of the generated tree).
import { createRequire } from 'node:module'
import { envdTools } from '../clients/js/envd-tools.mjs'

const require = createRequire(new URL('../tests/sdk/package.json', import.meta.url))
const { Sandbox } = require('e2b')
const [nArg, tree, token] = process.argv.slice(2)
const n = Number(nArg)
const sbx = await Sandbox.create({ debug: true })
const tools = envdTools(sbx)
const now = () => Number(process.hrtime.bigint()) / 1e3

async function viaTools() {
  const r = await tools.grep(token, { path: tree })
  return r.matches.length
}
async function viaShell() {
  const r = await sbx.commands.run(`grep -rn --exclude-dir=node_modules --exclude-dir=.git ${token} ${tree}`)
  return r.stdout.split('\n').filter((l) => l).map((l) => l.split(':')).length
}
const res = { tools: [], shell: [], errors: 0 }
for (let i = 0; i <= n; i++) {
  for (const [k, fn] of [['tools', viaTools], ['shell', viaShell]]) {
    const t0 = now()
    let found = 0
    try {
      found = await fn()
    } catch {
      res.errors++
    }
    const us = now() - t0
    if (found !== 20) res.errors++
    if (i > 0) res[k].push(us)
  }
}
const p50 = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)]
console.log(JSON.stringify({ tools_p50_us: Math.round(p50(res.tools)), shell_p50_us: Math.round(p50(res.shell)), n, errors: res.errors }))
