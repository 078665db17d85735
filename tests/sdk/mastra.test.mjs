// SPDX-License-Identifier: Apache-2.0
// clients/js/mastra-envd.mjs: Mastra's own workspace tools (@mastra/core,
// createWorkspaceTools, no model) on a Workspace whose filesystem is the
// envd under test, through the official e2b SDK's Sandbox (debug mode,
// default user "user"). read_file, write_file, edit_file (with its
// read-before-write guard), list_files (the native walk), grep (the native
// grep, and Mastra's fallback for a pattern envd does not take), and the
// provider's own methods and errors.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs'
import { Sandbox } from 'e2b'
import * as mastra from '@mastra/core/workspace'
import { EnvdFilesystem, grepPatternProblem } from '../../clients/js/mastra-envd.mjs'

process.env.E2B_DEBUG = 'true'
let sbx, fs, tools, dir, uid
const calls = {}
const T = mastra.WORKSPACE_TOOLS.FILESYSTEM

function run(name, input) {
  return tools[name].execute(input, {})
}

before(async () => {
  try {
    execFileSync('id', ['user'], { stdio: 'ignore' })
  } catch {
    execFileSync('useradd', ['-m', '-s', '/bin/bash', 'user'])
  }
  uid = Number(execFileSync('id', ['-u', 'user']).toString().trim())
  dir = `/home/user/envd-sdk-mastra-${process.pid}`
  const put = (p, text) => {
    mkdirSync(`${dir}/${p}`.replace(/\/[^/]*$/, ''), { recursive: true })
    writeFileSync(`${dir}/${p}`, text)
  }
  put('.gitignore', 'node_modules/\n*.log\n')
  put('src/a.ts', 'export const alpha = 1\nconst héllo = "TODO: wörld"\nexport function beta() { return alpha }\n')
  put('src/b.ts', 'import { alpha } from "./a"\n// TODO: two\nconsole.log(alpha)\n')
  put('src/deep/c.ts', 'export const gamma = "TODO deep"\n')
  put('node_modules/m/index.js', 'TODO in node_modules\n')
  put('debug.log', 'TODO in a log\n')
  put('.hidden/h.ts', 'TODO hidden\n')
  execFileSync('chown', ['-R', `${uid}`, dir])
  sbx = await Sandbox.create({ debug: true })
  fs = new EnvdFilesystem(sbx, { basePath: dir, mastra })
  // Count what the tools ask of the provider.
  for (const m of ['readFile', 'readdir', 'walk', 'grep', 'writeFile', 'stat']) {
    const orig = fs[m].bind(fs)
    calls[m] = 0
    fs[m] = (...a) => {
      calls[m]++
      return orig(...a)
    }
  }
  tools = await mastra.createWorkspaceTools(new mastra.Workspace({ filesystem: fs }))
})

after(async () => {
  await fs?.destroy()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('the workspace tools are there', () => {
  for (const t of [T.READ_FILE, T.WRITE_FILE, T.EDIT_FILE, T.LIST_FILES, T.GREP]) assert.ok(tools[t], t)
})

test('read_file: numbered lines, offset and limit', async () => {
  const out = await run(T.READ_FILE, { path: 'src/a.ts' })
  assert.match(out, /1→export const alpha = 1/)
  assert.match(out, /2→const héllo = "TODO: wörld"/)
  const part = await run(T.READ_FILE, { path: 'src/a.ts', offset: 2, limit: 1 })
  assert.match(part, /lines 2-2 of/)
  assert.doesNotMatch(part, /alpha = 1/)
})

test('write_file: a new file with its directories, as the sandbox user', async () => {
  const out = await run(T.WRITE_FILE, { path: 'out/new/file.txt', content: 'written through Mastra\n' })
  assert.match(out, /Wrote 23 bytes/)
  assert.equal(readFileSync(`${dir}/out/new/file.txt`, 'utf8'), 'written through Mastra\n')
  assert.equal(statSync(`${dir}/out/new/file.txt`).uid, uid)
  await assert.rejects(fs.writeFile('out/new/file.txt', 'x', { overwrite: false }), mastra.FileExistsError)
})

test('edit_file: unique text replaced; missing and ambiguous text reported', async () => {
  const out = await run(T.EDIT_FILE, { path: 'src/b.ts', old_string: '// TODO: two', new_string: '// DONE: two' })
  assert.match(out, /Replaced 1 occurrence/)
  assert.match(readFileSync(`${dir}/src/b.ts`, 'utf8'), /DONE: two/)
  assert.match(await run(T.EDIT_FILE, { path: 'src/b.ts', old_string: 'nowhere', new_string: 'x' }), /not found/i)
  assert.match(await run(T.EDIT_FILE, { path: 'src/b.ts', old_string: 'alpha', new_string: 'x' }), /2|unique|multiple/i)
  const all = await run(T.EDIT_FILE, { path: 'src/b.ts', old_string: 'alpha', new_string: 'ALPHA', replace_all: true })
  assert.match(all, /Replaced 2 occurrences/)
})

test('edit_file after read_file: a change made in between is a StaleFileError, the change kept', async () => {
  await run(T.READ_FILE, { path: 'src/deep/c.ts' })
  // another writer, after the agent read the file
  writeFileSync(`${dir}/src/deep/c.ts`, 'export const gamma = "TODO deep, changed"\n')
  await assert.rejects(
    run(T.EDIT_FILE, { path: 'src/deep/c.ts', old_string: 'gamma', new_string: 'GAMMA' }),
    mastra.StaleFileError,
  )
  assert.equal(readFileSync(`${dir}/src/deep/c.ts`, 'utf8'), 'export const gamma = "TODO deep, changed"\n')
  // read again: the edit goes through
  await run(T.READ_FILE, { path: 'src/deep/c.ts' })
  assert.match(await run(T.EDIT_FILE, { path: 'src/deep/c.ts', old_string: 'gamma', new_string: 'GAMMA' }), /Replaced 1/)
})

test('the provider: a write guarded by the mtime of a read fails once the version moved, even with that mtime', async () => {
  const p = 'src/guard.txt'
  await fs.writeFile(p, 'one\n')
  await fs.readFile(p, { encoding: 'utf-8' })
  const st = await fs.stat(p)
  // written again after the read, same size, its mtime set back to the
  // one the read saw: only the version shows the change
  writeFileSync(`${dir}/${p}`, 'two\n')
  const ms = st.modifiedAt.getTime()
  execFileSync('touch', ['-m', '-d', `@${Math.floor(ms / 1000)}.${String(ms % 1000).padStart(3, '0')}`, `${dir}/${p}`])
  assert.equal((await fs.stat(p)).modifiedAt.getTime(), st.modifiedAt.getTime())
  await assert.rejects(fs.writeFile(p, 'three\n', { expectedMtime: st.modifiedAt }), mastra.StaleFileError)
  assert.equal(readFileSync(`${dir}/${p}`, 'utf8'), 'two\n')
  // read again: the guarded write goes through
  await fs.readFile(p)
  await fs.writeFile(p, 'three\n', { expectedMtime: (await fs.stat(p)).modifiedAt })
  assert.equal(readFileSync(`${dir}/${p}`, 'utf8'), 'three\n')
})

test('list_files: one native walk, the .gitignore applied by Mastra, hidden left out', async () => {
  const before = { walk: calls.walk, readdir: calls.readdir }
  const out = await run(T.LIST_FILES, { path: '.', maxDepth: 5 })
  assert.equal(calls.walk - before.walk, 1, 'one walk')
  assert.equal(calls.readdir - before.readdir, 0, 'no readdir per directory')
  assert.match(out, /a\.ts/)
  assert.match(out, /c\.ts/)
  assert.doesNotMatch(out, /node_modules/)
  assert.doesNotMatch(out, /debug\.log/)
  assert.doesNotMatch(out, /h\.ts/)
  const shallow = await run(T.LIST_FILES, { path: 'src', maxDepth: 1 })
  assert.match(shallow, /a\.ts/)
  assert.doesNotMatch(shallow, /c\.ts/)
})

test('grep: one native Grep, UTF-16 columns, gitignore and hidden filtered by Mastra', async () => {
  const before = { grep: calls.grep, readFile: calls.readFile }
  const out = await run(T.GREP, { pattern: 'TODO', path: '.' })
  assert.equal(calls.grep - before.grep, 1)
  assert.ok(calls.readFile - before.readFile <= 1, 'only the .gitignore read')
  // column 16 counts é as one (UTF-16), where its bytes would make it 17
  assert.match(out, /src\/a\.ts:2:16: const héllo = "TODO: wörld"/)
  assert.match(out, /src\/deep\/c\.ts:1:/)
  assert.doesNotMatch(out, /node_modules/)
  assert.doesNotMatch(out, /debug\.log/)
  assert.doesNotMatch(out, /hidden/)
  const ci = await run(T.GREP, { pattern: 'todo', path: 'src', caseSensitive: false, contextLines: 1 })
  assert.match(ci, /src\/a\.ts:1- export const alpha = 1/)
})

test('grep: a pattern PCRE2 reads otherwise goes to Mastra\'s own search, with the same answer', async () => {
  assert.ok(grepPatternProblem('a\\hb'))
  assert.equal(grepPatternProblem('\\bfoo\\(\\d+\\)'), '')
  await assert.rejects(fs.grep({ pattern: 'x\\p{L}', path: '.', caseSensitive: true, includeHidden: false }),
    mastra.UnsupportedGrepPatternError)
  // variable-length lookbehind: JavaScript has it, PCRE2 refuses it
  await assert.rejects(fs.grep({ pattern: '(?<=TODO:? +)\\w+', path: 'src', caseSensitive: true, includeHidden: false }),
    mastra.UnsupportedGrepPatternError)
  const out = await run(T.GREP, { pattern: '(?<=TODO:? +)\\w+', path: 'src' })
  assert.match(out, /src\/a\.ts:2:/)
})

test('the provider: stat, exists, readdir, mkdir, rmdir, copy, move, append, delete and their errors', async () => {
  const st = await fs.stat('src/a.ts')
  assert.equal(st.type, 'file')
  assert.equal(st.size, statSync(`${dir}/src/a.ts`).size)
  assert.equal((await fs.stat('src')).type, 'directory')
  assert.equal(await fs.exists('src/a.ts'), true)
  assert.equal(await fs.exists('src/nope.ts'), false)
  await assert.rejects(fs.stat('nope'), (e) => e instanceof mastra.FileNotFoundError && e.code === 'ENOENT')
  await assert.rejects(fs.readFile('nope.txt'), (e) => e.code === 'ENOENT')
  const ls = await fs.readdir('src', { recursive: true, extension: '.ts' })
  assert.deepEqual(ls.filter((e) => e.type === 'file').map((e) => e.name).sort(), ['a.ts', 'b.ts', 'deep/c.ts'])
  await assert.rejects(fs.readdir('src/a.ts'), mastra.NotDirectoryError)
  await assert.rejects(fs.readdir('nope'), mastra.DirectoryNotFoundError)
  await assert.rejects(fs.mkdir('x/y', { recursive: false }), mastra.DirectoryNotFoundError)
  await fs.mkdir('x/y', { recursive: true })
  assert.ok(statSync(`${dir}/x/y`).isDirectory())
  await fs.writeFile('x/y/f.txt', 'f')
  await assert.rejects(fs.rmdir('x'), mastra.DirectoryNotEmptyError)
  await assert.rejects(fs.deleteFile('x'), mastra.IsDirectoryError)
  await fs.copyFile('x/y/f.txt', 'x/copy.txt')
  await assert.rejects(fs.copyFile('x/y/f.txt', 'x/copy.txt', { overwrite: false }), mastra.FileExistsError)
  await fs.moveFile('x/copy.txt', 'x/moved.txt')
  assert.equal(existsSync(`${dir}/x/copy.txt`), false)
  await fs.appendFile('x/moved.txt', ' and more')
  await fs.appendFile('x/appended.txt', 'new')
  assert.equal(readFileSync(`${dir}/x/moved.txt`, 'utf8'), 'f and more')
  assert.equal(readFileSync(`${dir}/x/appended.txt`, 'utf8'), 'new')
  await fs.deleteFile('x/moved.txt')
  await fs.deleteFile('x/moved.txt', { force: true })
  await assert.rejects(fs.deleteFile('x/moved.txt'), mastra.FileNotFoundError)
  await fs.rmdir('x', { recursive: true })
  assert.equal(existsSync(`${dir}/x`), false)
  // ".." cannot leave the base
  assert.equal(await fs.resolve('../../etc/passwd'), `${dir}/etc/passwd`)
})

test('file_stat, mkdir and delete tools', async () => {
  assert.match(await run(T.FILE_STAT, { path: 'src/a.ts' }), /file/i)
  await run(T.MKDIR, { path: 'made/here' })
  assert.ok(statSync(`${dir}/made/here`).isDirectory())
  await run(T.DELETE, { path: 'made', recursive: true })
  assert.equal(existsSync(`${dir}/made`), false)
})
