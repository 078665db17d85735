// SPDX-License-Identifier: Apache-2.0
// Loaded with `node --import` before the tests/sdk suites when they run
// from the host against the VM (tests/vm/10_sdk.sh):
//
// - the suites' own look at "the machine" (node:fs and node:child_process
//   imported by tests/sdk/*.test.mjs) is redirected into the guest
//   (guest-fs.mjs, guest-child-process.mjs), so they check the VM's files
//   and processes instead of the host's;
// - requests to envd carry X-Access-Token: the SDK sends the token it gets
//   from the platform's API for a real sandbox, but a debug-mode sandbox
//   has none, so Sandbox.create hands it the token installed by /init
//   (VM_TOKEN), and plain fetch() calls to VM_URL's origin get the header.
import { createRequire, register } from 'node:module'

register('./hooks.mjs', import.meta.url)

// The suites import 'e2b' as CommonJS (its package.json has only "main"),
// so this is the very class they use.
const { Sandbox } = createRequire(new URL('../../sdk/', import.meta.url))('e2b')
const create = Sandbox.create
Sandbox.create = async function (...args) {
  const sbx = await create.apply(this, args)
  if (!process.env.VM_TOKEN || sbx.sandboxId !== 'debug_sandbox_id' || sbx.envdAccessToken) return sbx
  return new this({
    ...sbx.connectionConfig,
    sandboxId: sbx.sandboxId,
    envdVersion: sbx.envdApi?.version ?? '99.99.99', // the SDK's debug-mode version
    envdAccessToken: process.env.VM_TOKEN,
  })
}

const origin = new URL(process.env.VM_URL).origin
const token = process.env.VM_TOKEN
const realFetch = globalThis.fetch
globalThis.fetch = (input, init) => {
  if (token) {
    const req = new Request(input, init)
    if (new URL(req.url).origin === origin && !req.headers.has('X-Access-Token')) {
      const headers = new Headers(req.headers)
      headers.set('X-Access-Token', token)
      return realFetch(new Request(req, { headers }))
    }
  }
  return realFetch(input, init)
}
