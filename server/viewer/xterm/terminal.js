// deskbox's terminal page: xterm.js on the terminal's WebSocket next to the
// page (docs/terminals.md).  Binary frames carry bytes both ways; text frames
// carry JSON control messages ({"type":"resize"} from here, {"type":"exit"}
// and {"type":"lost"} from the server).  A dropped connection is retried:
// the server replays the last 64 KiB of output, so the screen is rebuilt.
(function () {
  "use strict";
  const viewOnly = document.body.dataset.viewOnly === "1";
  const status = document.getElementById("status");
  const term = new Terminal({ cursorBlink: !viewOnly, disableStdin: viewOnly, scrollback: 5000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById("term"));
  fit.fit();
  // Keys go to the terminal at once, without a click into it first.
  if (!viewOnly) term.focus();
  window.deskboxTerm = term; // for tests and embedding pages
  const enc = new TextEncoder();
  let ws = null;
  let retry = 0;
  let ended = false;

  function wsUrl() {
    const u = new URL("ws" + location.search, location.href);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    return u.toString();
  }

  function sendResize() {
    if (ws && ws.readyState === WebSocket.OPEN && !viewOnly)
      ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
  }

  function connect() {
    ws = new WebSocket(wsUrl());
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      retry = 0;
      status.textContent = viewOnly ? "connected (view only)" : "connected";
      term.reset();
      sendResize();
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data !== "string") {
        term.write(new Uint8Array(ev.data));
        return;
      }
      const m = JSON.parse(ev.data);
      if (m.type === "exit") {
        ended = true;
        status.textContent = "ended (exit code " + m.exit_code + ")";
      } else if (m.type === "lost") {
        status.textContent = "connected (" + m.bytes + " bytes of output skipped)";
      }
    };
    ws.onclose = () => {
      if (ended) return;
      status.textContent = "reconnecting";
      setTimeout(connect, Math.min(5000, 250 * 2 ** retry++));
    };
  }

  term.onData((d) => {
    if (ws && ws.readyState === WebSocket.OPEN && !viewOnly) ws.send(enc.encode(d));
  });
  term.onResize(sendResize);
  window.addEventListener("resize", () => fit.fit());
  connect();
})();
