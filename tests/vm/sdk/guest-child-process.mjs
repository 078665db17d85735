// SPDX-License-Identifier: Apache-2.0
// node:child_process for the tests/sdk suites, run in the guest
// (guest.mjs). spawn() of an envd starts the image's envd in the guest and
// forwards the port it was given from the host, as a local envd would be
// reached.
import * as cp from 'node:child_process'
import { EventEmitter } from 'node:events'
import { run, quote, monitor } from './guest.mjs'

export * from 'node:child_process'
export default cp

export function execFileSync(file, args = [], opts = {}) {
  const out = run([file, ...args].map(quote).join(' '))
  const enc = opts.encoding && opts.encoding !== 'buffer' ? opts.encoding : null
  return enc ? out.toString(enc) : out
}

export function spawn(file, args = [], opts = {}) {
  if (!/(^|\/)envd$/.test(file)) throw new Error(`guest spawn: only envd is supported, not ${file}`)
  const port = args[args.indexOf('-port') + 1]
  const child = new EventEmitter()
  const guestIp = process.env.VM_GUEST_IP ?? '169.254.0.21'
  let pid
  try {
    pid = run(`exec /usr/bin/envd ${args.map(quote).join(' ')} </dev/null >/dev/null 2>&1`, { background: true })
      .toString()
      .trim()
    monitor(`hostfwd_add net0 tcp:127.0.0.1:${port}-${guestIp}:${port}`)
  } catch (e) {
    setImmediate(() => child.emit('error', e))
  }
  child.pid = Number(pid)
  child.kill = () => {
    try {
      if (pid) run(`kill ${pid}`)
      monitor(`hostfwd_remove net0 tcp:127.0.0.1:${port}`)
    } catch {}
    return true
  }
  return child
}
