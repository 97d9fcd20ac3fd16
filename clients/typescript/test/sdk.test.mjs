// The Node client against a real deskboxd (DESKBOX_URL, DESKBOX_TOKEN):
// run by tests/integration/test_sdk_typescript.py, which starts one.
// Prints TAP.
import { Deskbox, DeskboxError } from "../index.js";

let n = 0;
function ok(cond, name, detail) {
  n++;
  console.log(`${cond ? "ok" : "not ok"} ${n} - ${name}`);
  if (!cond && detail !== undefined) console.log(`#   ${String(detail).split("\n").join("\n#   ")}`);
}
async function raises(fn) {
  try { await fn(); return null; } catch (e) { return e; }
}

const box = new Deskbox();
let sbx;
try {
  sbx = await box.create({ display: { width: 1024, height: 768 }, metadata: { suite: "ts" } });
  ok(sbx.status === "running" && /^[0-9a-f]{32}$/.test(sbx.id), "create: a running sandbox", JSON.stringify(sbx.info));
  ok(typeof sbx.info.created_at === "string" && sbx.info.created_at.endsWith("Z"), "created_at is RFC 3339 UTC", sbx.info.created_at);
  const listed = await box.list({ metadata: { suite: "ts" } });
  ok(listed.length === 1 && listed[0].id === sbx.id, "list filters on metadata", listed.map((s) => s.id));
  ok((await box.get(sbx.id)).id === sbx.id, "get by id");

  const r = await sbx.process.exec(["sh", "-c", "echo out; echo err >&2; exit 3"]);
  ok(r.exit_code === 3 && r.stdout === "out\n" && r.stderr === "err\n" && !r.ok, "exec: output and exit code", JSON.stringify(r));
  ok((await sbx.process.exec("echo $((6*7))")).stdout === "42\n", "exec of a string goes through sh -c");
  const events = [];
  for await (const ev of sbx.process.execStream(["sh", "-c", "echo a; sleep 0.2; echo b"])) events.push(ev);
  const text = events.filter((e) => e.type === "stdout").map((e) => e.text).join("");
  ok(text === "a\nb\n" && events.at(-1).type === "result" && events.at(-1).result.exit_code === 0,
    "execStream: output as it arrives, the result last", JSON.stringify(events));
  const code = await sbx.process.codeRun("print(sum(range(10)))");
  ok(code.stdout === "45\n", "codeRun python", JSON.stringify(code));
  const pid = await sbx.process.start(["sleep", "30"]);
  ok((await sbx.process.status(pid)).status === "running", "start: a background run");
  await sbx.process.kill(pid);

  const bytes = Buffer.from([0, 1, 2, 255, 254, 10]);
  const up = await sbx.files.upload("/workspace/sub/b.bin", bytes);
  ok(up.size === 6 && up.sha256.length === 64, "files.upload", JSON.stringify(up));
  ok((await sbx.files.download("/workspace/sub/b.bin")).equals(bytes), "files.download gives the same bytes");
  ok((await sbx.files.list("/workspace/sub")).map((e) => e.name).join() === "b.bin", "files.list");
  const missing = await raises(() => sbx.files.download("/workspace/nope"));
  ok(missing instanceof DeskboxError && missing.status === 404, "a missing file is a DeskboxError 404", missing);

  const png = await sbx.desktop.screenshot();
  ok(png.subarray(1, 4).toString() === "PNG" && png.readUInt32BE(16) === 1024 && png.readUInt32BE(20) === 768,
    "desktop.screenshot: a 1024x768 PNG");
  const info = await sbx.desktop.info();
  ok(info.width === 1024 && info.height === 768, "desktop.info", JSON.stringify(info));
  await sbx.desktop.move(100, 120);
  const [cx, cy] = await sbx.desktop.cursor();
  ok(cx === 100 && cy === 120, "desktop.move then cursor", [cx, cy]);
  await sbx.process.start(["xterm", "-geometry", "80x24+0+0", "-e", "sh", "-c", "cat > /tmp/typed.txt"]);
  let win = null;
  for (let i = 0; i < 100 && !win; i++) {
    win = (await sbx.desktop.windows()).find((w) => String(w.class || "").toLowerCase().includes("xterm"));
    if (!win) await new Promise((res) => setTimeout(res, 100));
  }
  ok(win !== null, "an xterm window appears");
  await sbx.desktop.click(200, 150);
  await sbx.desktop.typeText("héllo ✓ 你好");
  await sbx.desktop.key("Return");
  await sbx.desktop.key("ctrl+d");
  let typed = "";
  for (let i = 0; i < 50 && typed !== "héllo ✓ 你好\n"; i++) {
    typed = (await sbx.process.exec(["cat", "/tmp/typed.txt"])).stdout;
    if (typed !== "héllo ✓ 你好\n") await new Promise((res) => setTimeout(res, 100));
  }
  ok(typed === "héllo ✓ 你好\n", "typeText reaches the program exactly", JSON.stringify(typed));
  const bad = await raises(() => sbx.desktop.key("ctrl+nosuchkey"));
  ok(bad instanceof DeskboxError && bad.status === 400, "a bad key is a 400 DeskboxError", bad);

  const term = await sbx.terminals.create({ cols: 100, rows: 30 });
  ok(term.cols === 100 && term.created_at.endsWith("Z"), "terminals.create", JSON.stringify(term));
  ok((await sbx.terminals.list()).some((t) => t.id === term.id), "terminals.list");
  const turl = await sbx.terminals.url(term.id);
  ok(turl.startsWith(box.url + "/v1/sandboxes/") && turl.includes("token="), "terminals.url", turl);
  if (typeof WebSocket === "function") {
    const ws = await sbx.terminals.connect(term.id);
    let out = "";
    await new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error("no echo: " + out)), 15000);
      ws.onopen = () => ws.send(new TextEncoder().encode("echo ts-$((40+2))\n"));
      ws.onmessage = (ev) => {
        if (typeof ev.data !== "string") out += new TextDecoder().decode(ev.data);
        if (out.includes("ts-42")) { clearTimeout(timer); ws.close(); res(); }
      };
      ws.onerror = (e) => { clearTimeout(timer); rej(e); };
    }).then(() => ok(true, "the terminal's WebSocket echoes"), (e) => ok(false, "the terminal's WebSocket echoes", e));
  } else {
    console.log(`ok ${++n} - the terminal's WebSocket # SKIP Node ${process.version} has no WebSocket (Node >= 22)`);
  }
  await sbx.terminals.delete(term.id);

  const vnc = await sbx.vncUrl();
  ok(vnc.includes("/vnc/?token="), "vncUrl", vnc);
  const port = await sbx.portUrl(8000);
  ok(port.includes("/ports/8000/?deskbox_token="), "portUrl", port);

  await sbx.files.upload("/workspace/ck.txt", "before");
  const ck = await sbx.checkpoint("c1");
  ok(ck.name === "c1" && ck.created_at.endsWith("Z"), "checkpoint", JSON.stringify(ck));
  await sbx.files.upload("/workspace/ck.txt", "after");
  await sbx.restore("c1");
  ok((await sbx.files.download("/workspace/ck.txt")).toString() === "before", "restore brings the file back");
  const child = await sbx.fork({ checkpoint: "c1" });
  ok(child.id !== sbx.id && (await child.files.download("/workspace/ck.txt")).toString() === "before", "fork from the checkpoint");
  await child.delete();
  ok((await sbx.checkpoints()).map((c) => c.name).join() === "c1", "checkpoints lists it");
  await sbx.deleteCheckpoint("c1");

  await sbx.pause();
  ok(sbx.status === "paused", "pause");
  const paused = await raises(() => sbx.process.exec(["true"]));
  ok(paused instanceof DeskboxError && paused.code === "sandbox_paused", "a call while paused: sandbox_paused", paused);
  await sbx.resume();
  ok(sbx.status === "running", "resume");
  await sbx.setTimeout(600);
  ok(typeof sbx.info.expires_at === "string", "setTimeout: expires_at", sbx.info.expires_at);
  await sbx.stop();
  ok(sbx.status === "stopped", "stop");
  await sbx.start();
  ok(sbx.status === "running" && (await sbx.files.download("/workspace/ck.txt")).toString() === "before", "start again, files kept");

  const wrong = await raises(() => new Deskbox({ token: "x".repeat(40) }).list());
  ok(wrong instanceof DeskboxError && wrong.status === 401 && wrong.message.includes("DESKBOX_TOKEN"), "a wrong token: 401 saying DESKBOX_TOKEN", wrong);
  const gone = await raises(() => new Deskbox({ url: "http://127.0.0.1:1" }).list());
  ok(gone instanceof DeskboxError && gone.status === 0 && gone.code === "unavailable", "no server: status 0 unavailable", gone);
} catch (e) {
  ok(false, "the script ran to its end", e && e.stack);
} finally {
  if (sbx) await sbx.delete({ missingOk: true });
}
const left = await new Deskbox().list({ metadata: { suite: "ts" } });
ok(left.length === 0, "delete: no sandbox is left");
console.log(`1..${n}`);
