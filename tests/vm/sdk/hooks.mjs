// SPDX-License-Identifier: Apache-2.0
// Module resolution hook (see preload.mjs): node:fs and node:child_process,
// when imported by a tests/sdk suite, resolve to the guest's versions.
const redirect = {
  'node:fs': new URL('./guest-fs.mjs', import.meta.url).href,
  fs: new URL('./guest-fs.mjs', import.meta.url).href,
  'node:child_process': new URL('./guest-child-process.mjs', import.meta.url).href,
  child_process: new URL('./guest-child-process.mjs', import.meta.url).href,
}

export async function resolve(specifier, context, next) {
  if (redirect[specifier] && /\/tests\/sdk\/[^/]+\.test\.mjs$/.test(context.parentURL ?? '')) {
    return { url: redirect[specifier], shortCircuit: true }
  }
  return next(specifier, context)
}
