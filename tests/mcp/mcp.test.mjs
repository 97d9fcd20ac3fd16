// deskbox's MCP endpoint through the official MCP TypeScript SDK client
// (StreamableHTTPClientTransport).  Needs a running deskboxd: DESKBOX_URL
// (http://127.0.0.1:PORT) and DESKBOX_TOKEN; run by
// tests/integration/test_mcp.py, which starts one.  Prints TAP.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { EmptyResultSchema, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

const BASE = process.env.DESKBOX_URL;
const TOKEN = process.env.DESKBOX_TOKEN;
const W = 1024, H = 640;
const TOOLS = ['screenshot', 'click', 'double_click', 'move', 'drag', 'scroll', 'type_text', 'key',
  'wait', 'exec', 'code_run', 'read_file', 'write_file', 'list_files'];

let n = 0, failed = 0;
function ok(cond, name, detail) {
  n++;
  if (!cond) failed++;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond && detail !== undefined) console.log(`#   ${String(detail).split('\n').join('\n#   ')}`);
  return cond;
}
const diag = (m) => console.log(`# ${m}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function api(method, path, body) {
  const r = await fetch(BASE + path, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

// Calls fn until it returns a truthy value or timeoutMs passes; returns
// the last value, so the caller asserts on what it saw.
async function waitFor(fn, timeoutMs, stepMs = 100) {
  const end = Date.now() + timeoutMs;
  let v;
  while (Date.now() < end) {
    v = await fn();
    if (v) return v;
    await sleep(stepMs);
  }
  return v;
}

const text = (res) => (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');

async function expectRpcError(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return e;
  }
}

function pngSize(buf) {
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (buf.length < 24 || !buf.subarray(0, 8).equals(sig)) return null;
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)];
}

async function connect(sid) {
  const transport = new StreamableHTTPClientTransport(new URL(`${BASE}/v1/sandboxes/${sid}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
  });
  const client = new Client({ name: 'deskbox-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

async function desktopSession(client, sid) {
  // A screenshot, as an image.
  const shot = await client.callTool({ name: 'screenshot', arguments: {} });
  const img = (shot.content || []).find((c) => c.type === 'image');
  ok(img && img.mimeType === 'image/png', 'screenshot answers an image/png content item', JSON.stringify(shot).slice(0, 300));
  const size = img ? pngSize(Buffer.from(img.data, 'base64')) : null;
  ok(size && size[0] === W && size[1] === H, `the image is a PNG of the screen (${W}x${H})`, size);

  // An xterm started through exec in the background; its window through
  // the REST windows route once it is mapped.
  const launched = await client.callTool({
    name: 'exec',
    arguments: { argv: ['xterm', '-geometry', '80x20+40+40'], background: true },
  });
  const pid = launched.isError ? null : JSON.parse(text(launched)).pid;
  ok(Number.isInteger(pid) && pid > 0, 'exec with background starts xterm and answers its pid', text(launched));
  const win = await waitFor(async () => {
    const r = await api('GET', `/v1/sandboxes/${sid}/desktop/windows`);
    return (r.body.windows || []).find((w) => w.visible && /xterm/i.test(w.title || ''));
  }, 15000, 200);
  ok(win, 'the xterm window is on the screen', JSON.stringify(win));
  if (!win) return;

  const cx = win.x + Math.floor(win.width / 2), cy = win.y + Math.floor(win.height / 2);
  const click = await client.callTool({ name: 'click', arguments: { x: cx, y: cy } });
  ok(!click.isError && JSON.parse(text(click)).events > 0, 'click into the xterm', text(click));
  // The click focuses it: wait until the window manager says so.
  const focused = await waitFor(async () => {
    const r = await api('GET', `/v1/sandboxes/${sid}/desktop/windows`);
    return (r.body.windows || []).find((w) => w.id === win.id && w.focused);
  }, 5000, 100);
  ok(focused, 'the xterm has the focus', JSON.stringify(focused));

  const typed = await client.callTool({ name: 'type_text', arguments: { text: 'echo mcp-ok > /workspace/mcp.txt' } });
  ok(!typed.isError, 'type_text types the command', text(typed));
  const key = await client.callTool({ name: 'key', arguments: { keys: 'Return' } });
  ok(!key.isError, 'key presses Return', text(key));

  const read = await waitFor(async () => {
    const r = await client.callTool({ name: 'read_file', arguments: { path: '/workspace/mcp.txt' } });
    return !r.isError && text(r) === 'mcp-ok\n' ? r : null;
  }, 10000, 200);
  ok(read, 'read_file reads back what the shell in the xterm wrote', read && JSON.stringify(read));
}

async function main() {
  const created = await api('POST', '/v1/sandboxes', { display: { width: W, height: H } });
  if (created.status !== 201) {
    ok(false, 'create a sandbox', JSON.stringify(created));
    console.log(`1..${n}`);
    process.exit(1);
  }
  const sid = created.body.id;
  try {
    const { client, transport } = await connect(sid);
    ok(client.getServerVersion()?.name === 'deskbox', 'initialize through the SDK: serverInfo names deskbox', JSON.stringify(client.getServerVersion()));
    ok(client.getServerCapabilities()?.tools, 'the server declares the tools capability', JSON.stringify(client.getServerCapabilities()));
    ok(/^[0-9a-f]{32}$/.test(transport.sessionId || ''), 'the transport holds the Mcp-Session-Id deskbox issued', transport.sessionId);
    diag(`negotiated protocol version ${transport.protocolVersion}`);
    ok(['2025-11-25', '2025-06-18'].includes(transport.protocolVersion), 'a current protocol revision was negotiated', transport.protocolVersion);

    const listed = await client.listTools();
    const names = listed.tools.map((t) => t.name);
    ok(TOOLS.every((t) => names.includes(t)), 'tools/list has every tool', names.join(' '));
    ok(listed.tools.every((t) => t.inputSchema && t.inputSchema.type === 'object' && t.description),
      'every tool has a description and an object input schema');

    await desktopSession(client, sid);

    const wrote = await client.callTool({ name: 'write_file', arguments: { path: 'sub/b.bin', content: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64', parents: true } });
    ok(!wrote.isError && JSON.parse(text(wrote)).size === 4, 'write_file writes base64 content', text(wrote));
    const bin = await client.callTool({ name: 'read_file', arguments: { path: '/workspace/sub/b.bin' } });
    const blob = (bin.content || []).find((c) => c.type === 'resource');
    ok(blob && Buffer.from(blob.resource.blob, 'base64').equals(Buffer.from([0, 1, 2, 255])), 'read_file gives bytes that are not text back as a blob', JSON.stringify(bin));
    const listing = await client.callTool({ name: 'list_files', arguments: { path: '/workspace/sub' } });
    ok(!listing.isError && JSON.parse(text(listing)).entries.some((e) => e.name === 'b.bin'), 'list_files lists the directory', text(listing));
    const code = await client.callTool({ name: 'code_run', arguments: { code: 'print(6 * 7)' } });
    ok(!code.isError && JSON.parse(text(code)).stdout === '42\n', 'code_run runs python', text(code));

    const missing = await client.callTool({ name: 'read_file', arguments: { path: '/workspace/no-such-file' } });
    ok(missing.isError === true && /no-such-file/.test(text(missing)), 'a failing tool answers isError with the reason', JSON.stringify(missing));
    const badKey = await client.callTool({ name: 'key', arguments: { keys: 'ctrl+nosuchkey' } });
    ok(badKey.isError === true && /nosuchkey/.test(text(badKey)), 'a bad argument is a tool error too', JSON.stringify(badKey));

    const unknownTool = await expectRpcError(client.callTool({ name: 'no_such_tool', arguments: {} }));
    ok(unknownTool instanceof McpError && unknownTool.code === ErrorCode.InvalidParams, 'an unknown tool is JSON-RPC error -32602', unknownTool);
    const unknownMethod = await expectRpcError(client.request({ method: 'deskbox/no-such-method', params: {} }, EmptyResultSchema));
    ok(unknownMethod instanceof McpError && unknownMethod.code === ErrorCode.MethodNotFound, 'an unknown method is JSON-RPC error -32601', unknownMethod);
    ok(await client.ping().then(() => true, () => false), 'ping');

    const ended = transport.sessionId;
    await transport.terminateSession();
    ok(transport.sessionId === undefined, 'terminateSession (DELETE) ends the session');
    const r = await fetch(`${BASE}/v1/sandboxes/${sid}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': ended },
      body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'ping' }),
    });
    ok(r.status === 404, 'the ended session id is refused with 404', r.status);
    const after = await expectRpcError(client.listTools());
    ok(after, 'the client, left without a session, is refused until it initializes again', after);
    await client.close();
  } catch (e) {
    ok(false, 'the MCP session ran to its end', e && e.stack);
  } finally {
    await api('DELETE', `/v1/sandboxes/${sid}`);
  }
  console.log(`1..${n}`);
  process.exit(failed ? 1 : 0);
}

main();
