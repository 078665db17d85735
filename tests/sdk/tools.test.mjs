// SPDX-License-Identifier: Apache-2.0
// clients/js/envd-tools.mjs over the official e2b SDK's Sandbox (debug
// mode, E2B_SANDBOX_URL pointing at the envd under test, default user
// "user"): Glob, Grep (collected and streamed), ReadLines, versions, the
// request's user, errors.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync, rmSync, chmodSync, chownSync, utimesSync } from 'node:fs'
import { Sandbox } from 'e2b'
import { envdTools, EnvdToolError, utf16Column } from '../../clients/js/envd-tools.mjs'

process.env.E2B_DEBUG = 'true'
let sbx, tools, dir
const rel = `envd-sdk-tools-${process.pid}`

before(async () => {
  try {
    execFileSync('id', ['user'], { stdio: 'ignore' })
  } catch {
    execFileSync('useradd', ['-m', '-s', '/bin/bash', 'user'])
  }
  dir = `/home/user/${rel}`
  const uid = Number(execFileSync('id', ['-u', 'user']).toString().trim())
  const put = (p, text) => {
    mkdirSync(`${dir}/${p}`.replace(/\/[^/]*$/, ''), { recursive: true })
    writeFileSync(`${dir}/${p}`, text)
  }
  mkdirSync(`${dir}/.git`, { recursive: true })
  put('.gitignore', 'node_modules/\n*.log\n')
  put('src/a.ts', 'export const héllo = "world"\n// TODO: one\nconst x = 1\n')
  put('src/b.ts', '// todo: two\n// TODO: three\n')
  put('src/c.js', 'TODO in js\n')
  put('node_modules/m/i.ts', 'TODO ignored\n')
  put('debug.log', 'TODO ignored too\n')
  put('secret.txt', 'TODO secret\n')
  execFileSync('chown', ['-R', `${uid}`, dir])
  chownSync(`${dir}/secret.txt`, 0, 0)
  chmodSync(`${dir}/secret.txt`, 0o600)
  utimesSync(`${dir}/src/b.ts`, new Date('2020-01-01'), new Date('2020-01-01'))
  utimesSync(`${dir}/src/a.ts`, new Date('2021-01-01'), new Date('2021-01-01'))
  utimesSync(`${dir}/src/c.js`, new Date('2022-01-01'), new Date('2022-01-01'))
  sbx = await Sandbox.create({ debug: true })
  tools = envdTools(sbx)
})

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('glob: files by pattern relative to path, ignore files applied', async () => {
  const r = await tools.glob('**/*.ts', { path: rel })
  assert.deepEqual(r.entries.map((e) => e.name), ['a.ts', 'b.ts'])
  assert.equal(r.truncated, false)
  assert.ok(r.entries.every((e) => e.version && e.type === 'FILE_TYPE_FILE'))
  const byTime = await tools.glob('src/*', { path: rel, sort: 'mtime', limit: 2 })
  assert.deepEqual(byTime.entries.map((e) => e.name), ['c.js', 'a.ts'])
  assert.equal(byTime.truncated, true)
})

test('grep: matches with line, column, context; summary', async () => {
  const r = await tools.grep('TODO', { path: rel, contextBefore: 1 })
  const got = r.matches.map((m) => `${m.path}:${m.line}:${m.column}`).sort()
  assert.deepEqual(got, ['src/a.ts:2:4', 'src/b.ts:2:4', 'src/c.js:1:1'])
  const a = r.matches.find((m) => m.path === 'src/a.ts')
  assert.deepEqual(a.before, ['export const héllo = "world"'])
  assert.equal(r.summary.filesMatched, 3)
  assert.equal(r.summary.filesSkipped, 1) // secret.txt: root's, mode 0600
  const ci = await tools.grep('todo', { path: rel, ignoreCase: true, include: ['*.ts'] })
  assert.equal(ci.matches.length, 3)
})

test('grep: columnUtf16 for JavaScript strings', async () => {
  const r = await tools.grep('world', { path: `${rel}/src/a.ts` })
  assert.equal(r.matches.length, 1)
  const m = r.matches[0]
  assert.equal(m.column, 24) // bytes: é is two
  assert.equal(m.columnUtf16, 23)
  assert.equal(m.text.indexOf('world') + 1, m.columnUtf16)
  assert.equal(utf16Column('abc', 10), undefined)
})

test('grep: files (newest first) and count modes', async () => {
  const f = await tools.grep('TODO', { path: rel, outputMode: 'files', ignoreCase: true })
  assert.deepEqual(f.matches.map((m) => m.path).slice(-1), ['src/b.ts'])
  const c = await tools.grep('TODO', { path: rel, outputMode: 'count', ignoreCase: true })
  assert.deepEqual(Object.fromEntries(c.matches.map((m) => [m.path, m.count])), {
    'src/a.ts': 1, 'src/b.ts': 2, 'src/c.js': 1,
  })
})

test('grep: streamed, and leaving early cancels', async () => {
  let n = 0
  for await (const ev of tools.grepStream('TODO', { path: rel })) {
    if (ev.match) n++
    break
  }
  assert.equal(n, 1)
  // envd still answers
  const r = await tools.readLines(`${rel}/src/a.ts`, { limit: 1 })
  assert.deepEqual(r.lines, ['export const héllo = "world"'])
})

test('grep: collected as grepStream yields them, over one kept connection', async () => {
  const streamed = []
  let summary
  for await (const ev of tools.grepStream('TODO', { path: rel, ignoreCase: true, contextAfter: 1 })) {
    if (ev.match) streamed.push(ev.match)
    else summary = ev.summary
  }
  const sorted = (a) => a.map((m) => JSON.stringify(m)).sort()
  for (let i = 0; i < 10; i++) {
    const r = await tools.grep('TODO', { path: rel, ignoreCase: true, contextAfter: 1 })
    assert.deepEqual(sorted(r.matches), sorted(streamed))
    assert.deepEqual(r.summary, summary)
  }
  const open = Object.values(tools.agent.sockets).flat().length + Object.values(tools.agent.freeSockets).flat().length
  assert.ok(open >= 1 && open <= 8, `${open} connections`)
  await assert.rejects(tools.grep('x', { path: `${rel}/nope` }), (e) => e.code === 'not_found')
  const ac = new AbortController()
  ac.abort()
  await assert.rejects(tools.grep('TODO', { path: rel, signal: ac.signal }), (e) => e.name === 'AbortError')
})

test('grep: a bad pattern is invalid_argument with its offset', async () => {
  await assert.rejects(tools.grep('(unclosed', { path: rel }), (e) => {
    assert.ok(e instanceof EnvdToolError)
    assert.equal(e.code, 'invalid_argument')
    assert.match(e.message, /offset 9/)
    return true
  })
})

test('readLines: offset, limit, totals, version as Stat gives it', async () => {
  const r = await tools.readLines(`${rel}/src/a.ts`, { offset: 2, limit: 1 })
  assert.deepEqual(r.lines, ['// TODO: one'])
  assert.equal(r.firstLine, 2)
  assert.equal(r.totalLines, 3)
  assert.equal(r.truncated, true)
  const st = await tools.stat(`${rel}/src/a.ts`)
  assert.equal(r.version, st.version)
  // the SDK's own write changes it
  await sbx.files.write(`${rel}/src/a.ts`, 'export const héllo = "WORLD"\n// TODO: one\nconst x = 1\n')
  const r2 = await tools.readLines(`${rel}/src/a.ts`, { offset: 2, limit: 1 })
  assert.notEqual(r2.version, r.version)
})

test('the request user: root reads what user may not', async () => {
  await assert.rejects(tools.readLines(`${rel}/secret.txt`), (e) => e.code === 'permission_denied')
  const root = envdTools(sbx, { user: 'root' })
  const r = await root.readLines(`${dir}/secret.txt`)
  assert.deepEqual(r.lines, ['TODO secret'])
})

test('missing path: not_found', async () => {
  await assert.rejects(tools.glob('*', { path: `${rel}/nope` }), (e) => e.code === 'not_found')
  await assert.rejects(tools.readLines(`${rel}/nope.txt`), (e) => e.code === 'not_found')
})

test('edit: exact text replaced, all or none, the version as Stat gives it', async () => {
  const p = `${rel}/src/edit.ts`
  await sbx.files.write(p, 'const a = 1\r\nconst b = 2\r\n')
  const r = await tools.edit(p, [{ oldText: 'a = 1', newText: 'a = 10' }, { oldText: 'b = 2', newText: 'b = 20' }])
  assert.equal(r.replacements, 2)
  assert.equal(await sbx.files.read(p), 'const a = 10\r\nconst b = 20\r\n')
  assert.equal(r.version, (await tools.stat(p)).version)
  await assert.rejects(tools.edit(p, [{ oldText: 'a = 10', newText: 'x' }, { oldText: 'nowhere', newText: 'y' }]),
    (e) => e.code === 'failed_precondition' && /not found/.test(e.message))
  assert.equal(await sbx.files.read(p), 'const a = 10\r\nconst b = 20\r\n', 'nothing of a failed call lands')
  await assert.rejects(tools.edit(p, { oldText: 'const', newText: 'let' }),
    (e) => e.code === 'failed_precondition' && /found 2 times/.test(e.message))
  const all = await tools.edit(p, { oldText: 'const', newText: 'let', replaceAll: true })
  assert.equal(all.replacements, 2)
})

test('edit with ifVersion: from readLines; a change since is aborted', async () => {
  const p = `${rel}/src/guarded.ts`
  await sbx.files.write(p, 'v1\n')
  const { version } = await tools.readLines(p)
  await sbx.files.write(p, 'v2\n')
  await assert.rejects(tools.edit(p, { oldText: 'v', newText: 'V' }, { ifVersion: version }), (e) => e.code === 'aborted')
  assert.equal(await sbx.files.read(p), 'v2\n')
  const now = await tools.readLines(p)
  const r = await tools.edit(p, { oldText: 'v2', newText: 'v3' }, { ifVersion: now.version })
  assert.notEqual(r.version, now.version)
  const created = await tools.edit(`${rel}/src/new-by-edit.ts`, { oldText: '', newText: 'created\n' })
  assert.equal(created.replacements, 1)
  assert.equal(await sbx.files.read(`${rel}/src/new-by-edit.ts`), 'created\n')
})

test('readFile and writeFile: whole files with their versions, writes conditional on them', async () => {
  const p = `${rel}/src/whole.txt`
  const w = await tools.writeFile(p, 'first\n')
  const r = await tools.readFile(p, { encoding: 'utf8' })
  assert.equal(r.content, 'first\n')
  assert.equal(r.version, w.version)
  assert.equal(r.version, (await tools.stat(p)).version)
  const w2 = await tools.writeFile(p, 'second\n', { ifVersion: r.version })
  await assert.rejects(tools.writeFile(p, 'third\n', { ifVersion: r.version }), (e) => e.status === 412)
  assert.equal(await sbx.files.read(p), 'second\n')
  await assert.rejects(tools.writeFile(p, 'again\n', { create: true }), (e) => e.status === 412)
  await tools.writeFile(`${rel}/src/only-once.txt`, 'x', { create: true })
  const e = await tools.edit(p, { oldText: 'second', newText: 'edited' }, { ifVersion: w2.version })
  assert.ok(e.version)
})

test('the official SDK sends no HTTP conditionals of its own', async () => {
  // node:fs/promises: the SDK's own file on this machine (in the VM run,
  // node:fs of a suite looks into the guest)
  const { readFile } = await import('node:fs/promises')
  const { createRequire } = await import('node:module')
  const main = createRequire(import.meta.url).resolve('e2b')
  const src = await readFile(main, 'utf8')
  assert.doesNotMatch(src, /if-match|if-none-match|if-unmodified-since|if-range/i)
})

test('calls reuse their connections', async () => {
  for (let i = 0; i < 20; i++) await tools.readLines(`${rel}/src/a.ts`, { limit: 1 })
  const open = Object.values(tools.agent.sockets).flat().length + Object.values(tools.agent.freeSockets).flat().length
  assert.ok(open >= 1 && open <= 8, `${open} connections`)
})
