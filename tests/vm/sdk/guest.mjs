// SPDX-License-Identifier: Apache-2.0
// Synchronous access to the guest for guest-fs.mjs and
// guest-child-process.mjs: a shell command run as root through envd's
// process API (scripts/vm-exec.py), and QEMU's monitor.
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const vmExec = fileURLToPath(new URL('../../../scripts/vm-exec.py', import.meta.url))
const python = '/usr/bin/python3'

export const quote = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`

// run(command, {input, background}) -> Buffer of stdout; throws like
// execFileSync (err.status) when the command fails.
// Work queued on the host side (guest-fs.mjs's appends) registers here and
// is written before any other command reaches the guest, so every command
// sees the files as the suite wrote them.
const beforeRun = []
export const onBeforeRun = (f) => beforeRun.push(f)
let flushing = false

export function run(command, opts = {}) {
  if (!flushing) {
    flushing = true
    try {
      for (const f of beforeRun) f()
    } finally {
      flushing = false
    }
  }
  const args = [vmExec, '-u', 'root']
  if (opts.background) args.push('--background')
  args.push(command)
  return execFileSync(python, args, { stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 256 << 20 })
}

export function monitor(command) {
  return execFileSync('socat', ['-t', '2', '-', `UNIX-CONNECT:${process.env.VM_MONITOR}`], {
    input: `${command}\n`,
    stdio: ['pipe', 'pipe', 'ignore'],
  }).toString()
}
