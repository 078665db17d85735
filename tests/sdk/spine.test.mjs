// SPDX-License-Identifier: Apache-2.0
// The unmodified e2b SDK in debug mode against envd: the server spine.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

test('Sandbox.create in debug mode and isRunning() against envd', async () => {
  const sbx = await Sandbox.create({ debug: true })
  assert.equal(sbx.sandboxId, 'debug_sandbox_id')
  assert.equal(await sbx.isRunning(), true)
})

test('SDK list of processes works through Connect JSON', async () => {
  const sbx = await Sandbox.create({ debug: true })
  const procs = await sbx.commands.list()
  assert.ok(Array.isArray(procs))
})

test('raw fetch: Connect error shape for an unknown pid', async () => {
  const res = await fetch(`${process.env.ENVD_URL}/process.Process/SendSignal`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'connect-protocol-version': '1' },
    body: JSON.stringify({ process: { pid: 999999 }, signal: 'SIGNAL_SIGKILL' }),
  })
  assert.equal(res.status, 404)
  const body = await res.json()
  assert.equal(body.code, 'not_found')
  assert.match(body.message, /999999/)
})
