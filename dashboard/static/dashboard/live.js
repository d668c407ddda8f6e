// Live updates for the dashboard pages: one websocket, rows and numbers patched in place.
// Rows arrive as HTML rendered by the server's own row templates (escaped there).
"use strict";

(function () {
  const MAX_ROWS = 200;
  const status = document.getElementById("live-status");
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  let delay = 1000;

  function setStatus(text, on) {
    if (!status) return;
    status.textContent = text;
    status.classList.toggle("on", on);
    status.classList.toggle("off", !on);
  }

  function fragment(html) {
    const t = document.createElement("template");
    t.innerHTML = html.trim();
    // Rows rendered outside a request carry no CSRF token: give them this page's.
    t.content.querySelectorAll('input[name="csrfmiddlewaretoken"]').forEach((i) => { i.value = csrf; });
    t.content.querySelectorAll('input[name="next"]').forEach((i) => { i.value = location.pathname + location.search; });
    return t.content.firstElementChild;
  }

  // Insert or replace rows keyed by a data attribute, newest on top, in every live table body.
  function upsertRows(bodyId, key, items, prependNew) {
    const body = document.getElementById(bodyId);
    if (!body) return;
    for (const item of items) {
      const row = fragment(item.html);
      if (!row) continue;
      const old = body.querySelector("[" + key + '="' + CSS.escape(String(item.id)) + '"]');
      if (old) {
        old.replaceWith(row);
      } else if (prependNew && body.dataset.live === "prepend") {
        const empty = body.querySelector("tr.empty");
        if (empty) empty.remove();
        body.prepend(row);
        row.classList.add("fresh");
      }
    }
    while (body.rows.length > MAX_ROWS) body.deleteRow(-1);
  }

  // Cells named by data-field inside every element that carries attr="id" (an account's rows,
  // a provider's summary row), patched to the server's displayed text.
  function patchCells(attr, items) {
    for (const a of items || []) {
      document.querySelectorAll("[" + attr + '="' + CSS.escape(String(a.id)) + '"]').forEach((scope) => {
        for (const [field, text] of Object.entries(a.fields)) {
          scope.querySelectorAll('[data-field="' + field + '"]').forEach((cell) => {
            if (cell.textContent !== text) {
              cell.textContent = text;
              cell.classList.add("changed");
            }
            if (field === "status" && a.status) cell.className = "badge " + a.status + " changed";
          });
        }
      });
    }
  }

  function updatePool(m) {
    patchCells("data-account-id", m.accounts);
    patchCells("data-provider", m.providers);
  }

  // The overview's tiles and charts, re-rendered by the server for the window the page shows.
  function updateOverview(html) {
    const figures = document.getElementById("overview-figures");
    if (figures && html) figures.innerHTML = html;
  }

  const handlers = {
    "hello": (m, ws) => {
      setStatus("live", true);
      const figures = document.getElementById("overview-figures");
      if (figures) ws.send(JSON.stringify({ watch: "overview", window: figures.dataset.window }));
    },
    "requests.logged": (m) => {
      updateOverview(m.overview);
      upsertRows("request-rows", "data-request-id", m.rows, true);
      updatePool(m);
    },
    "account.disabled": (m) => {
      upsertRows("event-rows", "data-event-id", m.events, true);
      updatePool(m);
      updateOverview(m.overview);
    },
    "account.enabled": (m) => {
      upsertRows("event-rows", "data-event-id", m.events, false);
      updatePool(m);
      updateOverview(m.overview);
    },
  };

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + document.body.dataset.wsPath);
    ws.onopen = () => { delay = 1000; };
    ws.onmessage = (e) => {
      const msg = JSON.parse(e.data);
      const handle = handlers[msg.kind];
      if (handle) handle(msg, ws);
    };
    ws.onclose = (e) => {
      if (e.code === 4403) {
        setStatus("not allowed: log in as staff", false);
        return;
      }
      setStatus("disconnected, retrying…", false);
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }

  connect();
})();
