// E2B's code interpreter through the official `@e2b/code-interpreter` SDK,
// unchanged: runCode's NDJSON and the contexts, onto deskbox's Python
// contexts.  Effects are checked through deskbox's own API.
import { Sandbox } from '@e2b/code-interpreter'

const base = process.env.DESKBOX_URL
const token = process.env.DESKBOX_TOKEN
let n = 0, failed = 0
function ok(cond, name, detail) {
  n++
  if (!cond) failed++
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`)
  if (!cond && detail !== undefined) console.log('# ' + String(JSON.stringify(detail)).slice(0, 800))
}
async function native(path, body) {
  const headers = { Authorization: 'Bearer ' + token }
  if (body) headers['Content-Type'] = 'application/json'
  const r = await fetch(base + path, { method: body ? 'POST' : 'GET', headers, body: body && JSON.stringify(body) })
  return { status: r.status, text: await r.text() }
}

const sbx = await Sandbox.create({ timeoutMs: 300_000 })
const sb = '/v1/sandboxes/' + sbx.sandboxId
try {
  let x = await sbx.runCode('x = 40 + 2\nprint("hello")\nx')
  ok(x.text === '42' && x.results.length === 1 && x.results[0].isMainResult, 'runCode: the last expression is the main result', x.toJSON ? x.toJSON() : x)
  ok(x.logs.stdout.join('') === 'hello\n' && !x.error, 'runCode: stdout in logs', x.logs)
  x = await sbx.runCode('x * 2')
  ok(x.text === '84', 'runCode: the default context keeps its state', x.text)

  const seen = []
  x = await sbx.runCode('import sys\nprint("out")\nprint("err", file=sys.stderr)', { onStdout: (m) => seen.push(m.line), onStderr: (m) => seen.push('E:' + m.line) })
  ok(seen.includes('out\n') && seen.includes('E:err\n'), 'runCode: onStdout and onStderr', seen)

  x = await sbx.runCode('def f():\n    raise ValueError("bad value")\nf()')
  ok(x.error && x.error.name === 'ValueError' && x.error.value === 'bad value' && /Traceback/.test(x.error.traceback) && /in f/.test(x.error.traceback), 'runCode: an exception as error name, value, traceback', x.error)

  x = await sbx.runCode('open("/workspace/from-ci.txt", "w").write("written by runCode")')
  const d = await native(`${sb}/files/download?path=/workspace/from-ci.txt`)
  ok(d.status === 200 && d.text === 'written by runCode', 'runCode: its file is read back through /v1 files/download', d)

  const mpl = await native(`${sb}/process/exec`, { argv: ['python3', '-c', 'import matplotlib'] })
  if (mpl.status === 200 && JSON.parse(mpl.text).exit_code === 0) {
    x = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\n"done"')
    const figs = x.results.filter(r => r.png)
    const png = figs.length ? Buffer.from(figs[0].png, 'base64') : Buffer.alloc(0)
    ok(figs.length === 1 && png.subarray(1, 4).toString() === 'PNG' && png.length > 1000 && x.text === "'done'",
       'runCode: a matplotlib figure as a png result beside the main result', x.results.map(r => Object.keys(r)))
    x = await sbx.runCode('1')
    ok(!x.results.some(r => r.png), 'runCode: a shown figure is not sent again')
  } else {
    n++
    console.log(`ok ${n} - runCode: matplotlib figures as png # SKIP python3-matplotlib is not installed`)
  }

  const ctx = await sbx.createCodeContext()
  ok(typeof ctx.id === 'string' && ctx.id.length > 0 && ctx.language === 'python', 'createCodeContext: id and language', ctx)
  x = await sbx.runCode('y = "in ctx"', { context: ctx })
  x = await sbx.runCode('y', { context: ctx })
  ok(x.text === "'in ctx'", 'runCode in a context keeps its state', x.text)
  x = await sbx.runCode('y', {})
  ok(x.error && x.error.name === 'NameError', 'the default context does not see it', x.error)
  const list = await sbx.listCodeContexts()
  ok(list.some(c => c.id === ctx.id), 'listCodeContexts: the context is listed', list)
  const nat = await native(`${sb}/process/contexts`)
  ok(nat.status === 200 && JSON.parse(nat.text).contexts.some(c => c.id === ctx.id), 'the context is one of deskbox\'s contexts', nat.text)
  await sbx.restartCodeContext(ctx)
  x = await sbx.runCode('y', { context: ctx })
  ok(x.error && x.error.name === 'NameError', 'restartCodeContext: state is gone', x.error)
  await sbx.removeCodeContext(ctx)
  const after = await sbx.listCodeContexts()
  ok(!after.some(c => c.id === ctx.id), 'removeCodeContext: gone', after)
  let err = null
  try { await sbx.runCode('1', { context: ctx }) } catch (e) { err = e }
  ok(err && err.name === 'NotFoundError', 'runCode in a removed context: NotFoundError', err && `${err.name} ${err.message}`)
} finally {
  await sbx.kill()
}
console.log(`1..${n}`)
process.exit(failed ? 1 : 0)
