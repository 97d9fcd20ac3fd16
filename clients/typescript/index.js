// deskbox's client for Node (>= 18): fetch only, no dependencies.  The
// same surface as the Python SDK (clients/python); types in index.d.ts.
const DEFAULT_URL = "http://127.0.0.1:8080";

export class DeskboxError extends Error {
  constructor(status, code, message) {
    super(status ? `${code}: ${message} (HTTP ${status})` : `${code}: ${message}`);
    this.name = "DeskboxError";
    this.status = status;
    this.code = code;
    this.serverMessage = message;
  }
}

async function errorOf(resp) {
  const text = await resp.text();
  try {
    const e = JSON.parse(text).error;
    return new DeskboxError(resp.status, String(e.code), String(e.message));
  } catch {
    return new DeskboxError(resp.status, `http_${resp.status}`, text.slice(0, 200));
  }
}

const q = (s) => encodeURIComponent(s);

class Transport {
  constructor(url, token) {
    this.url = (url || process.env.DESKBOX_URL || DEFAULT_URL).replace(/\/+$/, "");
    this.token = token !== undefined ? token : process.env.DESKBOX_TOKEN;
  }

  async send(method, path, { query, body, raw, headers, signal } = {}) {
    const h = { ...(headers || {}) };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    let data = raw;
    if (body !== undefined) {
      data = JSON.stringify(body);
      h["Content-Type"] = "application/json";
    }
    let url = this.url + path;
    if (query) {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(query))
        if (v !== undefined && v !== null) p.set(k, typeof v === "boolean" ? (v ? "1" : "0") : String(v));
      const s = p.toString();
      if (s) url += (url.includes("?") ? "&" : "?") + s;
    }
    let resp;
    try {
      resp = await fetch(url, { method, headers: h, body: data, signal });
    } catch (e) {
      throw new DeskboxError(0, "unavailable", `cannot reach ${this.url}: ${e.cause ? e.cause.message || e.cause.code : e.message}`);
    }
    if (resp.status >= 300) throw await errorOf(resp);
    return resp;
  }

  async json(method, path, opts) {
    const resp = await this.send(method, path, opts);
    const text = await resp.text();
    return text ? JSON.parse(text) : null;
  }

  // Server-sent events of a POST: yields [event, data] as each arrives.
  async *events(path, body) {
    const resp = await this.send("POST", path, { body, headers: { Accept: "text/event-stream" } });
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "", event = "", data = [];
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, "");
          buf = buf.slice(nl + 1);
          if (line === "") {
            if (data.length || event) yield [event || "message", JSON.parse(data.join("\n") || "null")];
            event = "";
            data = [];
          } else if (!line.startsWith(":")) {
            const i = line.indexOf(":");
            const key = i < 0 ? line : line.slice(0, i);
            let v = i < 0 ? "" : line.slice(i + 1);
            if (v.startsWith(" ")) v = v.slice(1);
            if (key === "event") event = v;
            else if (key === "data") data.push(v);
          }
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }
}

function execResult(j) {
  const dec = (b64, text) => (b64 ? Buffer.from(b64, "base64") : Buffer.from(text || "", "utf8"));
  return { ...j, ok: j.exit_code === 0 && !j.timed_out, stdoutBytes: dec(j.stdout_b64, j.stdout), stderrBytes: dec(j.stderr_b64, j.stderr) };
}

function runBody(cmd, opts) {
  const body = {};
  for (const k of ["timeout_s", "env", "cwd", "stdin", "background"]) if (opts && opts[k] !== undefined) body[k] = opts[k];
  if (typeof cmd === "string") body.command = cmd;
  else if (Array.isArray(cmd)) body.argv = cmd;
  else throw new TypeError("exec needs argv (an array) or a command (a string)");
  return body;
}

export class Desktop {
  constructor(t, base) { this._t = t; this._base = base + "/desktop"; }
  async screenshot(opts = {}) {
    const query = {};
    if (opts.region) [query.x, query.y, query.w, query.h] = opts.region;
    if (opts.format) query.format = opts.format;
    const r = await this._t.send("GET", this._base + "/screenshot", { query });
    return Buffer.from(await r.arrayBuffer());
  }
  info() { return this._t.json("GET", this._base + "/info"); }
  action(name, body = {}) { return this._t.json("POST", `${this._base}/${q(name)}`, { body }); }
  click(x, y, opts = {}) { return this.action("click", { ...(x !== undefined ? { x, y } : {}), ...opts }); }
  doubleClick(x, y, opts = {}) { return this.action("double_click", { ...(x !== undefined ? { x, y } : {}), ...opts }); }
  move(x, y) { return this.action("move", { x, y }); }
  drag(path, opts = {}) { return this.action("drag", { path, ...opts }); }
  scroll(x, y, dx = 0, dy = 0) { return this.action("scroll", { x, y, dx, dy }); }
  typeText(text, opts = {}) { return this.action("type_text", { text, ...opts }); }
  key(keys) { return this.action("key", { keys }); }
  wait(opts = {}) { return this.action("wait", opts); }
  launch(argv, opts = {}) { return this.action("launch", { argv, ...opts }); }
  async windows() { return (await this._t.json("GET", this._base + "/windows")).windows; }
  async cursor() { const c = await this._t.json("GET", this._base + "/cursor"); return [c.x, c.y]; }
  actions(actions, opts = {}) { return this._t.json("POST", this._base + "/actions", { body: { actions, ...opts } }); }
}

export class Process {
  constructor(t, base) { this._t = t; this._base = base + "/process"; }
  async exec(cmd, opts = {}) { return execResult(await this._t.json("POST", this._base + "/exec", { body: runBody(cmd, opts) })); }
  async start(cmd, opts = {}) { return (await this._t.json("POST", this._base + "/exec", { body: runBody(cmd, { ...opts, background: true }) })).pid; }
  async *execStream(cmd, opts = {}) { yield* this._stream("/exec", runBody(cmd, opts)); }
  async codeRun(code, opts = {}) {
    return execResult(await this._t.json("POST", this._base + "/code_run", { body: { code, language: "python", ...opts } }));
  }
  async *codeRunStream(code, opts = {}) { yield* this._stream("/code_run", { code, language: "python", ...opts }); }
  async *_stream(route, body) {
    for await (const [name, data] of this._t.events(this._base + route + "?stream=1", body)) {
      if (name === "stdout" || name === "stderr")
        yield { type: name, text: data.data || "", data: data.data_b64 ? Buffer.from(data.data_b64, "base64") : Buffer.from(data.data || "", "utf8") };
      else if (name === "result") yield { type: "result", result: execResult(data) };
    }
  }
  status(pid) { return this._t.json("GET", `${this._base}/${pid}`); }
  kill(pid) { return this._t.json("POST", `${this._base}/${pid}/kill`, { body: {} }); }
  logs(pid) { return this._t.json("GET", `${this._base}/${pid}/logs`); }
}

export class Files {
  constructor(t, base) { this._t = t; this._base = base + "/files"; }
  upload(path, data, opts = {}) {
    const raw = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    return this._t.json("PUT", this._base + "/upload", {
      query: { path, parents: opts.parents === false ? undefined : true, mode: opts.mode === undefined ? undefined : opts.mode.toString(8) },
      raw, headers: { "Content-Type": "application/octet-stream" },
    });
  }
  async download(path) {
    const r = await this._t.send("GET", this._base + "/download", { query: { path } });
    return Buffer.from(await r.arrayBuffer());
  }
  async list(path = "/workspace") { return (await this._t.json("GET", this._base + "/list", { query: { path } })).entries; }
  stat(path) { return this._t.json("GET", this._base + "/stat", { query: { path } }); }
  mkdir(path) { return this._t.json("POST", this._base + "/mkdir", { body: { path } }); }
  move(from, to) { return this._t.json("POST", this._base + "/move", { body: { from, to } }); }
  async remove(path, opts = {}) { await this._t.send("DELETE", this._base, { query: { path, recursive: opts.recursive } }); }
}

export class Terminals {
  constructor(t, base) { this._t = t; this._base = base + "/terminals"; }
  create(opts = {}) { return this._t.json("POST", this._base, { body: opts }); }
  async list() { return (await this._t.json("GET", this._base)).terminals; }
  get(tid) { return this._t.json("GET", `${this._base}/${q(tid)}`); }
  async delete(tid) { await this._t.send("DELETE", `${this._base}/${q(tid)}`); }
  async url(tid, opts = {}) {
    const j = await this._t.json("POST", `${this._base}/${q(tid)}/tokens`, { body: opts });
    return this._t.url + j.url;
  }
  // The terminal's WebSocket (Node >= 22 has a global WebSocket).
  async connect(tid, opts = {}) {
    if (typeof WebSocket !== "function") throw new DeskboxError(0, "unavailable", "this Node has no WebSocket (Node >= 22)");
    const page = new URL(await this.url(tid, opts));
    const ws = new URL("ws" + page.search, page);
    ws.protocol = ws.protocol === "https:" ? "wss:" : "ws:";
    const sock = new WebSocket(ws.toString());
    sock.binaryType = "arraybuffer";
    return sock;
  }
}

export class Sandbox {
  constructor(t, info) {
    this._t = t;
    this.info = info;
    this.id = info.id;
    const base = `/v1/sandboxes/${q(this.id)}`;
    this._base = base;
    this.desktop = new Desktop(t, base);
    this.process = new Process(t, base);
    this.files = new Files(t, base);
    this.terminals = new Terminals(t, base);
  }
  get status() { return this.info.status; }
  async _set(p) { this.info = await p; return this; }
  refresh() { return this._set(this._t.json("GET", this._base)); }
  stop() { return this._set(this._t.json("POST", this._base + "/stop", { body: {} })); }
  start() { return this._set(this._t.json("POST", this._base + "/start", { body: {} })); }
  pause() { return this._set(this._t.json("POST", this._base + "/pause", { body: {} })); }
  resume() { return this._set(this._t.json("POST", this._base + "/resume", { body: {} })); }
  setTimeout(timeout_s) { return this._set(this._t.json("POST", this._base + "/timeout", { body: { timeout_s } })); }
  async delete(opts = {}) {
    try {
      await this._t.send("DELETE", this._base);
    } catch (e) {
      if (!(opts.missingOk && e instanceof DeskboxError && e.status === 404)) throw e;
    }
  }
  checkpoint(name) { return this._t.json("POST", this._base + "/checkpoints", { body: { name } }); }
  async checkpoints() { return (await this._t.json("GET", this._base + "/checkpoints")).checkpoints; }
  restore(name) { return this._set(this._t.json("POST", `${this._base}/checkpoints/${q(name)}/restore`, { body: {} })); }
  async deleteCheckpoint(name) { await this._t.send("DELETE", `${this._base}/checkpoints/${q(name)}`); }
  async fork(opts = {}) { return new Sandbox(this._t, await this._t.json("POST", this._base + "/fork", { body: opts })); }
  async vncUrl(opts = {}) {
    const j = await this._t.json("POST", this._base + "/vnc/tokens", { body: { view_only: opts.viewOnly !== false, ttl_s: opts.ttlS || 3600 } });
    return this._t.url + j.url;
  }
  async portUrl(port, opts = {}) {
    const j = await this._t.json("POST", `${this._base}/ports/${port}/tokens`, { body: { ttl_s: opts.ttlS || 3600 } });
    return this._t.url + j.url;
  }
}

export class Deskbox {
  constructor(opts = {}) { this._t = new Transport(opts.url, opts.token); }
  get url() { return this._t.url; }
  async create(spec = {}) { return new Sandbox(this._t, await this._t.json("POST", "/v1/sandboxes", { body: spec })); }
  async list(opts = {}) {
    const query = {};
    for (const [k, v] of Object.entries(opts.metadata || {})) query["metadata." + k] = v;
    return (await this._t.json("GET", "/v1/sandboxes", { query })).sandboxes.map((s) => new Sandbox(this._t, s));
  }
  async get(id) { return new Sandbox(this._t, await this._t.json("GET", `/v1/sandboxes/${q(id)}`)); }
}
