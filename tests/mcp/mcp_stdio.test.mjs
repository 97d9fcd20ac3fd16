// `deskbox mcp ID`, MCP's stdio transport, through the official MCP
// TypeScript SDK client (StdioClientTransport launching the CLI as a
// command, as MCP clients do).  Needs DESKBOX_URL, DESKBOX_TOKEN,
// DESKBOX_CLI (the deskbox binary) and DESKBOX_SID; run by
// tests/integration/test_mcp.py.  Prints TAP.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

let n = 0, failed = 0;
function ok(cond, name, detail) {
  n++;
  if (!cond) failed++;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond && detail !== undefined) console.log(`#   ${String(detail).split('\n').join('\n#   ')}`);
  return cond;
}

const transport = new StdioClientTransport({
  command: process.env.DESKBOX_CLI,
  args: ['mcp', process.env.DESKBOX_SID],
  env: { DESKBOX_URL: process.env.DESKBOX_URL, DESKBOX_TOKEN: process.env.DESKBOX_TOKEN },
  stderr: 'inherit',
});
const client = new Client({ name: 'deskbox-stdio-test', version: '1.0.0' });
try {
  await client.connect(transport);
  ok(true, 'connects through `deskbox mcp ID` (initialize over stdio)');
  const { tools } = await client.listTools();
  ok(tools.some((t) => t.name === 'screenshot') && tools.some((t) => t.name === 'exec'),
    'lists the tools', tools.map((t) => t.name).join(' '));
  const shot = await client.callTool({ name: 'screenshot', arguments: {} });
  const img = shot.content.find((c) => c.type === 'image');
  const png = img ? Buffer.from(img.data, 'base64') : Buffer.alloc(0);
  ok(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
    'a screenshot comes back as a PNG image', JSON.stringify(shot).slice(0, 300));
  const w = await client.callTool({ name: 'write_file',
    arguments: { path: '/workspace/stdio.txt', content: 'through stdio ✓\n' } });
  ok(!w.isError, 'write_file', JSON.stringify(w));
  const r = await client.callTool({ name: 'exec', arguments: { argv: ['cat', '/workspace/stdio.txt'] } });
  const text = r.content.map((c) => c.text || '').join('');
  ok(!r.isError && text.includes('through stdio ✓'), 'exec reads it back', text);
  const bad = await client.callTool({ name: 'read_file', arguments: { path: '/no/such/file' } });
  ok(bad.isError === true, 'a failing tool is isError', JSON.stringify(bad));
  await client.close();
  ok(true, 'closes (the CLI ends the session at end of input)');
} catch (e) {
  ok(false, 'the stdio session ran', e && e.stack);
}
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
