// SyncHealth dashboard. No framework, no build step, nothing fetched from anywhere but this server.
// The page holds no data of its own: everything comes from the API with the key kept in sessionStorage.
"use strict";

const KEY_NAME = "synchealth.apiKey";
const SVG_NS = "http://www.w3.org/2000/svg";

// CloudKitSyncMonitor's labels and colours for each summary (SyncStateSummary.description and symbolColor);
// a server test holds this table equal to the Swift one. The second colour name picks a shade, so that
// neighbouring values of one colour stay apart in the bar.
const SUMMARIES = {
  noNetwork: ["No network available", "gray", "c-gray"],
  accountNotAvailable: ["No iCloud account", "gray", "c-gray-2"],
  error: ["Error", "red", "c-red"],
  notSyncing: ["Not syncing to iCloud", "red", "c-red-2"],
  notStarted: ["Sync not started", "gray", "c-gray-3"],
  inProgress: ["Syncing...", "gray", "c-gray-4"],
  succeeded: ["Synced with iCloud", "green", "c-green"],
  unknown: ["Error", "red", "c-red-3"],
};
const ERROR_CLASSES = {
  transient: "Transient (retried by CloudKit)",
  unknown: "Unknown",
  appRecoverable: "App can recover",
  userAction: "User must act",
  developer: "Developer error",
  dataLoss: "Data at risk",
};
const KIND_LABELS = {
  syncError: "Sync error",
  notSyncing: "Not syncing",
  syncStalled: "Sync stalled",
  exportAtRisk: "Export at risk",
  fleetDegraded: "Fleet degraded",
  releaseRegression: "Release regression",
};

// ---- DOM helpers -----------------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}
function append(el, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}
function svg(tag, attrs) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) el.setAttribute(name, String(value));
  return el;
}
const main = () => document.getElementById("main");
function show(...children) {
  const m = main();
  m.replaceChildren();
  append(m, children);
}
const fmt = (n) => Number(n).toLocaleString("en-US");
function ago(iso) {
  if (!iso) return "–";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 129600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}
const time = (iso) => (iso ? h("time", { datetime: iso, title: iso }, ago(iso)) : "–");
function summaryText(value) {
  const [label, color] = SUMMARIES[value] || [value, "gray"];
  return h("span", { class: `state ${color}`, "data-summary": value }, label);
}
const scopeLabel = (appId, containerId) => [appId || "all apps", containerId || (appId ? "(no container)" : "all containers")].join(" · ");

// ---- API -------------------------------------------------------------------------------------------------

const apiKey = () => sessionStorage.getItem(KEY_NAME);
class APIError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
  }
}
// ---- The signed-in key: its role and apps (GET /v1/keys/current) -----------------------------------------

const APP_NAME = "synchealth.app";
let currentKey = null;
// A key limited to several apps reads lists and summaries one app at a time: the one picked in the header. A key
// for one app, or for every app, reads as it is (the server narrows a one-app key itself).
function chosenApp() {
  const apps = currentKey?.appIds;
  if (!apps || apps.length < 2) return null;
  const picked = sessionStorage.getItem(APP_NAME);
  return apps.includes(picked) ? picked : apps[0];
}
const NARROWED = new Set(["/v1/summary", "/v1/summary/history", "/v1/devices", "/v1/alerts", "/v1/incidents"]);
function narrowed(path) {
  const app = chosenApp();
  const [base, search] = path.split("?");
  if (!app || !NARROWED.has(base)) return path;
  const q = new URLSearchParams(search || "");
  if (!q.has("appId")) q.set("appId", app);
  return `${base}?${q}`;
}
function renderScope() {
  const box = document.getElementById("scope");
  const apps = currentKey?.appIds;
  const label = `${currentKey?.role || ""} key · ${apps ? apps.join(", ") : "all apps"}`;
  const picker = apps && apps.length > 1
    ? h("select", { id: "app-picker", "aria-label": "App", onchange: (event) => { sessionStorage.setItem(APP_NAME, event.target.value); route(); } },
      apps.map((a) => h("option", { value: a, selected: a === chosenApp() }, a)))
    : null;
  box.replaceChildren(h("span", { id: "scope-label", title: currentKey?.id || "" }, label), picker || "");
  box.hidden = false;
  document.querySelector('#nav a[data-view="keys"]').hidden = currentKey?.role !== "admin";
}

async function api(path, options = {}) {
  const response = await fetch(narrowed(path), {
    ...options,
    headers: { Accept: "application/json", Authorization: `Bearer ${apiKey()}`, ...(options.headers || {}) },
  });
  if (response.status === 401) {
    signOut("That key was not accepted. Sign in again.");
    throw new APIError(401);
  }
  const body = response.headers.get("content-type")?.includes("json") ? await response.json() : null;
  if (!response.ok) throw new APIError(response.status, body);
  return body;
}
const query = (params) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
};

// ---- Sign-in ---------------------------------------------------------------------------------------------

function signOut(message) {
  sessionStorage.removeItem(KEY_NAME);
  sessionStorage.removeItem(APP_NAME);
  currentKey = null;
  document.getElementById("scope").hidden = true;
  stream.stop();
  renderLogin(message);
}
function renderLogin(message) {
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("live").hidden = true;
  const form = document.getElementById("login-template").content.cloneNode(true);
  show(form);
  document.getElementById("login-error").textContent = message || "";
  document.getElementById("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = document.getElementById("api-key").value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY_NAME, key);
    try {
      const key = await api("/v1/keys/current");
      if (key.role !== "read" && key.role !== "admin") throw new APIError(403);
      start();
    } catch (error) {
      if (error.status !== 401) {
        sessionStorage.removeItem(KEY_NAME);
        document.getElementById("login-error").textContent =
          error.status === 403 ? "That key cannot read. Use a read or admin key." : `Could not sign in: ${error.message}`;
      }
    }
  });
}

// ---- Live stream (fetch, since EventSource cannot send an Authorization header) ---------------------------

const stream = {
  controller: null,
  lastEventId: null,
  listeners: new Set(),
  retry: 1000,
  start() {
    if (this.controller) return;
    this.controller = new AbortController();
    this.run(this.controller.signal);
  },
  stop() {
    this.controller?.abort();
    this.controller = null;
  },
  setLive(on, text) {
    const el = document.getElementById("live");
    el.hidden = false;
    el.className = `live ${on ? "on" : "off"}`;
    el.textContent = text;
  },
  emit(type, data) {
    for (const listener of this.listeners) listener(type, data);
  },
  async run(signal) {
    while (!signal.aborted) {
      try {
        const headers = { Authorization: `Bearer ${apiKey()}`, Accept: "text/event-stream" };
        if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
        const response = await fetch("/v1/stream", { headers, signal, cache: "no-store" });
        if (response.status === 401) return signOut("That key was not accepted. Sign in again.");
        if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
        this.setLive(true, "Live");
        this.retry = 1000;
        await this.read(response.body.getReader(), signal);
      } catch (error) {
        if (signal.aborted) return;
      }
      this.setLive(false, "Reconnecting…");
      await new Promise((resolve) => setTimeout(resolve, this.retry));
      this.retry = Math.min(this.retry * 2, 10000);
    }
  },
  async read(reader, signal) {
    const decoder = new TextDecoder();
    let buffer = "";
    let event = { type: "message", data: [], id: null };
    while (!signal.aborted) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (event.data.length) {
            if (event.id !== null) this.lastEventId = event.id;
            let data = null;
            try { data = JSON.parse(event.data.join("\n")); } catch { data = null; }
            this.emit(event.type, data);
          }
          event = { type: "message", data: [], id: null };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event.type = val;
        else if (field === "data") event.data.push(val);
        else if (field === "id") event.id = val;
      }
    }
  },
};

// ---- Views -----------------------------------------------------------------------------------------------

let viewListener = null;
function listen(listener) {
  if (viewListener) stream.listeners.delete(viewListener);
  viewListener = listener;
  if (listener) stream.listeners.add(listener);
}

function summaryBar(bySummary, total) {
  const bar = h("div", { class: "bar", role: "img", "aria-label": "Devices by sync state" });
  const legend = h("ul", { class: "legend" });
  // Two values share CloudKitSyncMonitor's "Error"; the legend names the value after a repeated label.
  const labels = Object.values(SUMMARIES).map(([label]) => label);
  for (const [value, [text, , shade]] of Object.entries(SUMMARIES)) {
    const n = bySummary[value] || 0;
    const label = labels.indexOf(text) === labels.lastIndexOf(text) ? text : `${text} (${value})`;
    if (n > 0) {
      const part = h("span", { class: shade, title: `${label}: ${fmt(n)}` });
      part.style.flexGrow = String(n);
      bar.append(part);
    }
    legend.append(h("li", { "data-summary": value }, h("span", { class: `swatch ${shade}` }), `${label}: `, h("strong", {}, fmt(n)),
      total ? h("span", { class: "muted" }, ` (${Math.round((100 * n) / total)}%)`) : null));
  }
  return [bar, legend];
}

function cards(s) {
  const card = (label, value, name, bad, note) =>
    h("div", { class: `card${bad && value > 0 ? " bad" : ""}`, "data-count": name }, h("div", { class: "label" }, label), h("div", { class: "value" }, fmt(value)),
      note ? h("div", { class: "muted" }, note) : null);
  return h("div", { class: "cards" },
    card("Devices", s.devices, "devices"), card("Active", s.active, "active"), card("Silent", s.silent, "silent"),
    card("Broken", s.broken, "broken", true), card("Not syncing", s.notSyncing, "notSyncing", true),
    s.attestedDevices ? card("Attested", attestedTotal(s), "attested", false, `${percentOf(attestedTotal(s), s.devices)} of devices`) : null);
}

// Devices with a verified App Attest key (production and development).
function attestedTotal(s) {
  return Object.values(s.attestedDevices || {}).reduce((a, b) => a + b, 0);
}

function percentOf(part, whole) {
  return whole > 0 ? `${Math.round((100 * part) / whole)}%` : "–";
}

// Each app's attested share: one summary per app (the largest 20), read once when the view opens.
async function attestationPanel(scopes) {
  const apps = [...new Set(scopes.data.map((s) => s.appId).filter(Boolean))].slice(0, 20);
  const summaries = await Promise.all(apps.map((appId) => api(`/v1/summary${query({ appId })}`).catch(() => null)));
  const rows = apps.map((appId, i) => [appId, summaries[i]]).filter(([, s]) => s && s.appAttest);
  if (!rows.length) return null;
  return h("section", { class: "panel" }, h("h2", {}, "App Attest"),
    h("p", { class: "muted" }, "Devices whose uploads are signed by a key Apple attested for the app; required: unsigned uploads are refused, reported: accepted and counted here (docs/security.md)."),
    h("div", { class: "scroll" }, h("table", { id: "attestation" }, h("thead", {}, h("tr", {}, h("th", {}, "App"), h("th", {}, "Mode"), ["Attested", "Devices", "Share"].map((t) => h("th", { class: "num" }, t)))),
      h("tbody", {}, rows.map(([appId, s]) => h("tr", { "data-app": appId, class: attestedTotal(s) < s.devices ? "warn" : "" },
        h("td", {}, h("a", { href: `#/devices${query({ appId })}` }, appId)),
        h("td", {}, s.appAttest === "require" ? "required" : "reported"), h("td", { class: "num" }, fmt(attestedTotal(s))),
        h("td", { class: "num" }, fmt(s.devices)), h("td", { class: "num", "data-share": appId }, percentOf(attestedTotal(s), s.devices))))))));
}

function chart(points, range) {
  const width = 800, height = 220, left = 40, right = 10, top = 10, bottom = 24;
  const box = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img", "aria-label": `Broken and not syncing devices, last ${range}` });
  if (!points.length) {
    const t = svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "grid-label" });
    t.textContent = "No history yet: the service records a point a minute.";
    box.append(t);
    return box;
  }
  const times = points.map((p) => Date.parse(p.at));
  const t0 = Math.min(...times), t1 = Math.max(t0 + 60000, ...times);
  const max = Math.max(1, ...points.map((p) => Math.max(p.broken, p.notSyncing)));
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (width - left - right);
  const y = (v) => top + (1 - v / max) * (height - top - bottom);
  box.append(svg("line", { x1: left, y1: y(0), x2: width - right, y2: y(0), class: "axis" }));
  for (const v of [0, max]) {
    const label = svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", class: "grid-label" });
    label.textContent = fmt(v);
    box.append(label);
  }
  for (const t of [t0, t1]) {
    const label = svg("text", { x: x(t), y: height - 6, "text-anchor": t === t0 ? "start" : "end", class: "grid-label" });
    label.textContent = new Date(t).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
    box.append(label);
  }
  for (const [field, cls] of [["broken", "line-broken"], ["notSyncing", "line-notsyncing"]]) {
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(times[i]).toFixed(1)},${y(p[field]).toFixed(1)}`).join(" ");
    box.append(svg("path", { d, class: cls }));
  }
  return box;
}

async function fleetView() {
  const [summary, scopes] = await Promise.all([api("/v1/summary"), api("/v1/summary/scopes")]);
  let range = "24h";
  const chartBox = h("div", { class: "chart", id: "history-chart" });
  const tabs = h("div", { class: "tabs", role: "group", "aria-label": "History range" });
  const drawChart = async () => {
    const hours = range === "24h" ? 24 : 24 * 7;
    const history = await api(`/v1/summary/history${query({ from: new Date(Date.now() - hours * 3600e3).toISOString() })}`);
    chartBox.replaceChildren(chart(history.points, range));
    for (const b of tabs.children) b.setAttribute("aria-pressed", String(b.dataset.range === range));
  };
  for (const r of ["24h", "7d"]) tabs.append(h("button", { type: "button", "data-range": r, onclick: () => { range = r; drawChart(); } }, `Last ${r === "24h" ? "24 hours" : "7 days"}`));

  const totals = h("div", { id: "fleet-totals" });
  const breakdown = h("div", { id: "fleet-breakdown" });
  const errors = h("div", { id: "fleet-errors" });
  const rows = new Map();
  const tbody = h("tbody");
  const renderTotals = (s) => {
    totals.replaceChildren(cards(s));
    breakdown.replaceChildren(...summaryBar(s.bySummary, s.devices));
    errors.replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Error class"), h("th", { class: "num" }, "Devices"))),
      h("tbody", {}, Object.entries(ERROR_CLASSES).map(([cls, label]) =>
        h("tr", { "data-error-class": cls }, h("td", {}, `${label} `, h("span", { class: "muted" }, `(${cls})`)), h("td", { class: "num" }, fmt(s.byErrorClass[cls] || 0)))))));
  };
  const row = (s) => {
    const link = `#/devices${query({ appId: s.appId || "", containerId: s.containerId || "" })}`;
    return h("tr", { class: s.broken > 0 ? "bad" : "", "data-app": s.appId || "", "data-container": s.containerId || "" },
      h("td", {}, s.appId ? h("a", { href: link }, s.appId) : h("span", { class: "muted" }, "any app")),
      h("td", {}, s.containerId ? h("a", { href: link }, s.containerId) : h("span", { class: "muted" }, s.appId ? "all containers" : "—")),
      h("td", { class: "num" }, fmt(s.devices)), h("td", { class: "num" }, fmt(s.active)), h("td", { class: "num" }, fmt(s.silent)),
      h("td", { class: "num broken" }, fmt(s.broken)), h("td", { class: "num" }, fmt(s.notSyncing)));
  };
  const scopeKey = (s) => `${s.appId || ""}\u0000${s.containerId || ""}`;
  const renderRows = () => {
    const sorted = [...rows.values()].filter((s) => s.devices > 0)
      .sort((a, b) => (a.appId || "").localeCompare(b.appId || "") || (a.containerId || "").localeCompare(b.containerId || ""));
    tbody.replaceChildren(...sorted.map(row));
  };
  for (const s of scopes.data) rows.set(scopeKey(s), s);
  renderTotals(summary);
  renderRows();
  const attestation = await attestationPanel(scopes);

  show(
    h("h1", {}, "Fleet"),
    totals,
    attestation,
    h("section", { class: "panel" }, h("h2", {}, "By sync state"), breakdown),
    h("section", { class: "panel" }, h("h2", {}, "Broken and not syncing over time"), tabs, chartBox,
      h("p", { class: "legend" }, h("span", {}, h("span", { class: "swatch c-red" }), "Broken (solid)"), h("span", {}, h("span", { class: "swatch c-warn" }), "Not syncing (dashed)"))),
    h("section", { class: "panel" }, h("h2", {}, "By error class"), errors),
    h("section", { class: "panel" }, h("h2", {}, "Apps and containers"),
      scopes.total > scopes.data.length ? h("p", { class: "muted" }, `The ${scopes.data.length} largest of ${scopes.total} scopes.`) : null,
      h("div", { class: "scroll" }, h("table", { id: "scopes" }, h("thead", {}, h("tr", {}, ["App", "Container"].map((t) => h("th", {}, t)),
        ["Devices", "Active", "Silent", "Broken", "Not syncing"].map((t) => h("th", { class: "num" }, t)))), tbody))),
  );
  await drawChart();
  listen((type, data) => {
    if (type !== "summary" || !data) return;
    let changed = false;
    for (const s of data.data) {
      // The stream's summaries do not count attested devices: keep the last count read.
      if (!s.appId && !s.containerId) renderTotals({ ...s, attestedDevices: s.attestedDevices || summary.attestedDevices });
      else { rows.set(scopeKey(s), s); changed = true; }
    }
    if (changed) renderRows();
  });
}

const DEVICE_FILTERS = ["summary", "broken", "appId", "containerId", "platform", "osVersion", "appVersion"];

async function devicesView(params) {
  const filters = Object.fromEntries(DEVICE_FILTERS.map((f) => [f, params.get(f) || ""]));
  const form = h("form", { class: "filters", id: "device-filters" },
    h("label", {}, "State", h("select", { name: "summary" }, h("option", { value: "" }, "Any"),
      Object.entries(SUMMARIES).map(([v, [label]]) => h("option", { value: v, selected: filters.summary === v }, `${label} (${v})`)))),
    h("label", {}, "Broken", h("select", { name: "broken" }, h("option", { value: "" }, "Any"),
      h("option", { value: "true", selected: filters.broken === "true" }, "Broken"), h("option", { value: "false", selected: filters.broken === "false" }, "Not broken"))),
    ["appId", "containerId", "platform", "osVersion", "appVersion"].map((f) =>
      h("label", {}, { appId: "App", containerId: "Container", platform: "Platform", osVersion: "OS version", appVersion: "App version" }[f],
        h("input", { name: f, value: filters[f], size: 14 }))),
    h("button", { type: "submit" }, "Filter"),
    h("button", { type: "button", onclick: () => { location.hash = "#/devices"; } }, "Clear"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    location.hash = `#/devices${query(Object.fromEntries(DEVICE_FILTERS.map((f) => [f, data.get(f) || ""])))}`;
  });
  const tbody = h("tbody");
  const more = h("button", { type: "button", id: "more", hidden: true }, "Next page");
  const status = h("p", { class: "muted", id: "device-count" });
  let cursor = null, shown = 0;
  const load = async () => {
    const page = await api(`/v1/devices${query({ ...filters, limit: 50, cursor })}`);
    for (const d of page.data) {
      const href = `#/device/${encodeURIComponent(d.appId)}/${encodeURIComponent(d.deviceId)}`;
      tbody.append(h("tr", { "data-device": d.deviceId },
        h("td", {}, h("a", { href }, d.deviceId)), h("td", {}, d.appId), h("td", {}, d.containerId || "–"),
        h("td", {}, summaryText(d.syncStateSummary)), h("td", {}, d.errorClass || "–"),
        h("td", {}, [d.platform, d.osVersion].filter(Boolean).join(" ") || "–"), h("td", {}, d.appVersion || "–"),
        h("td", {}, d.silent ? "silent, " : "", time(d.lastSeenAt)),
        h("td", { "data-attested": String(d.attested) }, d.attested === undefined ? "–" : d.attested ? "✓ attested" : h("span", { class: "unattested" }, "not attested"))));
    }
    shown += page.data.length;
    cursor = page.nextCursor;
    more.hidden = !cursor;
    status.textContent = shown ? `${fmt(shown)} device${shown === 1 ? "" : "s"} shown${cursor ? "; more on the next page" : ""}.` : "No device matches.";
  };
  more.addEventListener("click", load);
  show(h("h1", {}, "Devices"), form,
    h("div", { class: "panel scroll" }, h("table", { id: "devices" }, h("thead", {}, h("tr", {},
      ["Device", "App", "Container", "State", "Error class", "Platform / OS", "App version", "Last seen", "App Attest"].map((t) => h("th", {}, t)))), tbody), status, more));
  listen(null);
  await load();
}

function errorLine(e) {
  if (!e) return "–";
  return h("span", {}, `${e.domain} ${e.code}`, e.name ? h("strong", {}, ` (${e.name})`) : null, ` · ${e.class}`,
    e.message ? h("span", { class: "muted" }, ` — ${e.message}`) : null,
    e.partialErrors ? h("span", { class: "muted" }, ` · partial: ${Object.entries(e.partialErrors).map(([c, n]) => `${c}×${n}`).join(", ")}`) : null);
}

const ADVICE_WHO = { developer: "The app's developer", user: "The user", none: "Nobody: it recovers on its own" };

function adviceLine(a) {
  return h("dd", { id: "advice", "data-who": a.who }, h("strong", {}, ADVICE_WHO[a.who] || a.who), ` · ${a.text}`);
}

async function deviceView(appId, deviceId) {
  const [d, alerts] = await Promise.all([
    api(`/v1/devices/${encodeURIComponent(deviceId)}${query({ appId })}`),
    api(`/v1/alerts${query({ appId, deviceId, limit: 100 })}`),
  ]);
  const phase = (name, p) => h("tr", { "data-phase": name }, h("td", {}, name), h("td", {}, p.status), h("td", {}, time(p.startedAt)), h("td", {}, time(p.endedAt)), h("td", {}, errorLine(p.error)));
  const alertRows = h("tbody", {}, alerts.data.map(alertRow));
  show(
    h("p", {}, h("a", { href: `#/devices${query({ appId })}` }, `← Devices of ${appId}`)),
    h("h1", {}, `Device ${d.deviceId}`),
    h("section", { class: "panel" }, h("dl", { class: "kv", id: "device-facts" },
      h("dt", {}, "State"), h("dd", {}, summaryText(d.syncStateSummary), d.isBroken ? h("strong", { class: "error" }, " · broken") : null),
      h("dt", {}, "App"), h("dd", {}, `${d.appId} ${d.appVersion ? `(${d.appVersion})` : ""}`),
      h("dt", {}, "Container"), h("dd", {}, d.containerId || "–"),
      h("dt", {}, "App Attest"), h("dd", { id: "attestation-fact" }, d.attestation
        ? `attested (${d.attestation.environment} key) ${ago(d.attestation.attestedAt)}` : h("span", { class: "unattested" }, "not attested")),
      h("dt", {}, "Platform"), h("dd", {}, [d.platform, d.osVersion].filter(Boolean).join(" ") || "–"),
      h("dt", {}, "Network"), h("dd", {}, d.isNetworkAvailable === null ? "unknown" : d.isNetworkAvailable ? "available" : "unavailable"),
      h("dt", {}, "iCloud account"), h("dd", {}, d.accountStatus || "unknown"),
      h("dt", {}, "Pending changes"), h("dd", {}, d.pendingChanges === null ? "–" : fmt(d.pendingChanges), d.oldestPendingAt ? [", oldest ", time(d.oldestPendingAt)] : null),
      h("dt", {}, "Last seen"), h("dd", {}, time(d.lastSeenAt), d.silent ? " (silent)" : ""),
      h("dt", {}, "First seen"), h("dd", {}, time(d.firstSeenAt)),
      h("dt", {}, "Last sync error"), h("dd", {}, errorLine(d.lastSyncError)),
      d.lastSyncError && d.lastSyncError.advice ? [h("dt", {}, "What to do"), adviceLine(d.lastSyncError.advice)] : null)),
    h("section", { class: "panel scroll" }, h("h2", {}, "Phases"), h("table", { id: "phases" },
      h("thead", {}, h("tr", {}, ["Phase", "Status", "Started", "Ended", "Error (class, CloudKit name)"].map((t) => h("th", {}, t)))),
      h("tbody", {}, phase("setup", d.setupState), phase("import", d.importState), phase("export", d.exportState)))),
    h("section", { class: "panel scroll" }, h("h2", {}, "Alert history"),
      h("table", { id: "device-alerts" }, h("thead", {}, h("tr", {}, ["State", "Kind", "Summary", "Started", "Ended"].map((t) => h("th", {}, t)))), alertRows),
      alerts.data.length ? null : h("p", { class: "muted" }, "No alert so far.")),
  );
  listen((type, a) => {
    if (type === "alert" && a && a.appId === appId && a.deviceId === deviceId) route();
  });
}

function alertRow(a) {
  return h("tr", { "data-alert": a.id, "data-state": a.state },
    h("td", {}, h("span", { class: `badge ${a.state}` }, a.state), a.silencedBy && a.silencedBy.length ? h("span", { class: "muted" }, " silenced") : null),
    h("td", {}, KIND_LABELS[a.kind] || a.kind),
    h("td", {}, a.deviceId ? h("a", { href: `#/device/${encodeURIComponent(a.appId)}/${encodeURIComponent(a.deviceId)}` }, a.summary)
      : a.appVersion ? h("a", { href: `#/releases${query({ appId: a.appId })}` }, a.summary) : a.summary),
    h("td", {}, time(a.startsAt)), h("td", {}, time(a.endsAt)));
}

function incidentWhat(i) {
  return i.error ? `${KIND_LABELS[i.kind] || i.kind}: ${i.error.domain} ${i.error.code}${i.error.name ? ` (${i.error.name})` : ""}` : (KIND_LABELS[i.kind] || i.kind);
}

// The incident's device count over time, as steps (a count holds until the next point), to now while it is open.
function sparkline(i) {
  const points = i.history || [];
  if (!points.length) return null;
  const width = 120, height = 24, pad = 2;
  const times = points.map((p) => Date.parse(p.at));
  const end = Math.max(times[times.length - 1], i.state === "open" ? Date.now() : Date.parse(i.resolvedAt || points[points.length - 1].at));
  const t0 = times[0], t1 = Math.max(end, t0 + 1000);
  const max = Math.max(1, ...points.map((p) => p.devices));
  const x = (t) => pad + ((t - t0) / (t1 - t0)) * (width - 2 * pad);
  const y = (v) => pad + (1 - v / max) * (height - 2 * pad);
  let d = `M${x(t0).toFixed(1)},${y(points[0].devices).toFixed(1)}`;
  for (let k = 1; k < points.length; k++) d += ` H${x(times[k]).toFixed(1)} V${y(points[k].devices).toFixed(1)}`;
  d += ` H${x(t1).toFixed(1)}`;
  const box = svg("svg", { class: "sparkline", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `Devices over time, at most ${max}` });
  const title = svg("title", {});
  title.textContent = `Devices over time: ${points.map((p) => fmt(p.devices)).join(" → ")}`;
  box.append(title, svg("path", { d, class: i.state === "open" ? "line-broken" : "line-resolved" }));
  return box;
}

function incidentRow(i) {
  const versions = Object.entries(i.byAppVersion).sort((a, b) => b[1] - a[1]).map(([v, n]) => `${v || "unknown"}: ${fmt(n)}`).join(", ");
  const devices = h("div", { class: "incident-devices" });
  const details = h("details", { "data-incident": i.id },
    h("summary", {}, sparkline(i), h("strong", {}, incidentWhat(i)),
      i.flappingSince ? h("span", { class: "badge flapping", title: "Held open until its devices are quiet for an hour" }, "flapping") : null,
      ` · ${i.appId}${i.containerId ? ` (${i.containerId})` : ""} · `,
      h("strong", { class: i.state === "open" ? "error" : "" }, `${fmt(i.devices)} device${i.devices === 1 ? "" : "s"}`),
      i.state === "open" ? [" since ", time(i.openedAt)] : [" · resolved ", time(i.resolvedAt), `, at most ${fmt(i.peakDevices)}`]),
    versions ? h("p", { class: "muted" }, `App versions: ${versions}`) : null,
    i.error && i.error.advice ? h("p", { class: "advice" }, h("strong", {}, ADVICE_WHO[i.error.advice.who] || i.error.advice.who), ` · ${i.error.advice.text}`) : null,
    devices);
  details.addEventListener("toggle", async () => {
    if (!details.open || devices.childElementCount) return;
    const d = await api(`/v1/incidents/${encodeURIComponent(i.id)}?limit=50`);
    devices.replaceChildren(d.firingDevices.length ? h("ul", {}, d.firingDevices.map((x) => h("li", {},
      h("a", { href: `#/device/${encodeURIComponent(i.appId)}/${encodeURIComponent(x.deviceId)}` }, x.deviceId),
      h("span", { class: "muted" }, ` ${x.appVersion || ""} · since `, time(x.since))))) : h("p", { class: "muted" }, "No device fires now."),
      d.nextCursor ? h("p", { class: "muted" }, `The first 50 of ${fmt(i.devices)}.`) : null);
  });
  return details;
}

async function alertsView() {
  const [firing, resolved, incidents] = await Promise.all([
    api("/v1/alerts?state=firing&limit=500"), api("/v1/alerts?state=resolved&limit=100"), api("/v1/incidents?limit=50")]);
  const open = incidents.data.filter((i) => i.state === "open");
  const incidentBox = h("section", { class: "panel", id: "incidents" }, h("h2", {}, `Incidents (${open.length} open)`),
    incidents.data.length ? incidents.data.map(incidentRow) : h("p", { class: "muted" }, "No incident so far."),
    h("p", { class: "muted" }, "Device alerts with the same app, container, kind and error are one incident; the list refreshes with the page."));
  const alerts = new Map();
  for (const a of [...resolved.data, ...firing.data]) alerts.set(a.id, a);
  const box = h("div", { id: "alert-groups" });
  const render = (flashId) => {
    const groups = (state) => {
      const byGroup = new Map();
      for (const a of [...alerts.values()].filter((a) => a.state === state).sort((x, y) => y.startsAt.localeCompare(x.startsAt))) {
        const key = `${KIND_LABELS[a.kind] || a.kind} · ${a.containerId || "no container"}`;
        if (!byGroup.has(key)) byGroup.set(key, []);
        byGroup.get(key).push(a);
      }
      if (!byGroup.size) return h("p", { class: "muted" }, state === "firing" ? "Nothing is firing." : "Nothing resolved recently.");
      return [...byGroup.entries()].map(([key, list]) => h("div", { class: "group" }, h("h3", {}, `${key} (${list.length})`),
        h("div", { class: "scroll" }, h("table", {}, h("thead", {}, h("tr", {}, ["State", "Kind", "Summary", "Started", "Ended"].map((t) => h("th", {}, t)))),
          h("tbody", {}, list.map((a) => { const r = alertRow(a); if (a.id === flashId) r.classList.add("flash"); return r; }))))));
    };
    const count = [...alerts.values()].filter((a) => a.state === "firing").length;
    box.replaceChildren(
      h("section", { class: "panel", id: "firing" }, h("h2", {}, `Firing (${count})`), groups("firing")),
      h("section", { class: "panel", id: "resolved" }, h("h2", {}, "Recently resolved"), groups("resolved")));
  };
  render();
  show(h("h1", {}, "Alerts"), incidentBox, h("p", { class: "muted" }, "Device alerts update live as they fire and resolve."), box);
  listen((type, a) => {
    if (type === "alert" && a) { alerts.set(a.id, a); render(a.id); }
    if (type === "reset") route();
  });
}

async function webhooksView() {
  let hooks;
  try {
    hooks = await api("/v1/webhooks");
  } catch (error) {
    if (error.status === 403) return show(h("h1", {}, "Webhooks"), h("p", { class: "panel" }, "Webhook subscriptions need an admin key. Sign out and sign in with one to see them."));
    throw error;
  }
  const sections = [];
  for (const w of hooks.data) {
    const deliveries = await api(`/v1/webhooks/${encodeURIComponent(w.id)}/deliveries?limit=20`);
    const rows = deliveries.data.map((d) => h("tr", { "data-delivery": d.id, "data-outcome": d.outcome },
      h("td", {}, time(d.attemptedAt)), h("td", {}, d.outcome, d.attempt > 1 ? h("span", { class: "muted" }, ` (attempt ${d.attempt})`) : null),
      h("td", {}, d.statusCode ?? "–"), h("td", {}, d.error || (d.nextRetryAt ? ["retry ", time(d.nextRetryAt)] : "–")),
      h("td", {}, d.outcome === "failed" || d.outcome === "disabled" ? h("button", { type: "button", onclick: async (event) => {
        event.target.disabled = true;
        try { await api(`/v1/webhooks/${encodeURIComponent(w.id)}/deliveries/${encodeURIComponent(d.messageId)}/resend`, { method: "POST" }); event.target.textContent = "Queued"; }
        catch (error) { event.target.textContent = `Failed: ${error.message}`; }
      } }, "Resend") : null)));
    sections.push(h("section", { class: "panel scroll", "data-webhook": w.id },
      h("h2", {}, `${w.url} `, h("span", { class: "muted" }, `(${w.format})`), w.disabled ? h("span", { class: "error" }, ` disabled: ${w.disabledReason}`) : null),
      h("p", { class: "muted" }, `Kinds: ${(w.kinds || []).join(", ") || "all"} · Apps: ${(w.appIds || []).join(", ") || "all"} · Containers: ${(w.containerIds || []).join(", ") || "all"} · Messages: ${w.grouping === "incident" ? "one per incident" : "one per device alert"}`),
      rows.length ? h("table", {}, h("thead", {}, h("tr", {}, ["When", "Outcome", "HTTP status", "Error or next retry", ""].map((t) => h("th", {}, t)))), h("tbody", {}, rows))
        : h("p", { class: "muted" }, "No delivery yet.")));
  }
  show(h("h1", {}, "Webhooks"), sections.length ? sections : h("p", { class: "panel muted" }, "No subscription. Create one with POST /v1/webhooks."));
  listen(null);
}

// ---- Releases --------------------------------------------------------------------------------------------

async function releasesView(params) {
  const scopes = await api("/v1/summary/scopes");
  const apps = [...new Set(scopes.data.filter((s) => s.appId && !s.containerId).map((s) => s.appId))].sort();
  const appId = params.get("appId") || apps[0] || "";
  const by = params.get("by") === "osVersion" ? "osVersion" : "appVersion";
  const form = h("form", { class: "filters", id: "release-filters" },
    h("label", {}, "App", h("select", { name: "appId" }, apps.map((a) => h("option", { value: a, selected: a === appId }, a)))),
    h("label", {}, "By", h("select", { name: "by" },
      h("option", { value: "appVersion", selected: by === "appVersion" }, "App version"),
      h("option", { value: "osVersion", selected: by === "osVersion" }, "OS version"))));
  form.addEventListener("change", () => {
    const data = new FormData(form);
    location.hash = `#/releases${query({ appId: data.get("appId") || "", by: data.get("by") || "" })}`;
  });
  if (!appId) {
    show(h("h1", {}, "Releases"), h("p", { class: "muted" }, "No device has reported yet."));
    return;
  }
  const releases = await api(`/v1/releases${query({ appId, by })}`);
  const most = Math.max(0.0001, ...releases.data.map((r) => r.brokenShare || 0));
  // Apps that attest count each release's attested devices.
  const attests = releases.data.some((r) => r.attestedDevices !== undefined);
  const row = (r) => {
    const share = r.brokenShare;
    const bar = h("div", { class: "share-bar", role: "img", "aria-label": `Broken share ${share === null ? "unknown" : Math.round(share * 100) + "%"}` },
      h("span", { class: r.regression ? "c-red" : "c-warn" }));
    bar.firstChild.style.width = `${share === null ? 0 : Math.max(0.5, (100 * share) / most)}%`;
    const top = r.topErrors[0];
    return h("tr", { "data-release": r.version || "", class: r.regression ? "bad" : "" },
      h("td", { class: "version" }, r.version || h("span", { class: "muted" }, "not reported"),
        r.regression ? [" ", h("span", { class: "badge firing", title: `z = ${r.regression.z}` }, `regression from ${r.regression.previous}`)] : null),
      h("td", { class: "num" }, fmt(r.devices)), h("td", { class: "num" }, fmt(r.active)), h("td", { class: "num broken" }, fmt(r.activeBroken)),
      h("td", { class: "share" }, bar, h("span", { class: "share-text" }, share === null ? "–" : `${(100 * share).toFixed(1)}%`)),
      h("td", {}, top ? [h("span", {}, `${top.domain} ${top.code}`, top.name ? h("strong", {}, ` (${top.name})`) : null, ` · ${fmt(top.devices)}`),
        top.advice ? h("div", { class: "muted advice" }, `${ADVICE_WHO[top.advice.who] || top.advice.who}: ${top.advice.text}`) : null] : "–"),
      h("td", {}, time(r.lastSeenAt)),
      attests ? h("td", { class: "num", "data-attested": String(r.attestedDevices) }, `${fmt(r.attestedDevices)} (${percentOf(r.attestedDevices, r.devices)})`) : null);
  };
  const regressions = releases.data.filter((r) => r.regression);
  show(
    h("h1", {}, "Releases"),
    form,
    regressions.length ? h("p", { class: "panel error", id: "regressions", role: "status" }, regressions.map((r) =>
      `${r.version}: ${(100 * r.regression.share).toFixed(1)}% of active devices broken, against ${(100 * r.regression.previousShare).toFixed(1)}% on ${r.regression.previous}. `))
      : null,
    h("section", { class: "panel scroll" }, h("h2", {}, by === "appVersion" ? "Broken share by app version" : "Broken share by OS version"),
      h("table", { id: "releases" }, h("thead", {}, h("tr", {}, h("th", {}, "Version"), ["Devices", "Active", "Broken"].map((t) => h("th", { class: "num" }, t)),
        h("th", {}, "Broken share of active devices"), h("th", {}, "Top error and what to do"), h("th", {}, "Last seen"),
        attests ? h("th", { class: "num" }, "Attested") : null)),
        h("tbody", {}, releases.data.map(row))),
      h("p", { class: "muted" }, by === "appVersion"
        ? `A version with at least ${fmt(releases.minimumDevices)} active devices is marked a regression when its broken share is significantly higher (p < 0.001) and at least twice the previous version's.`
        : "OS versions are compared for reading only; regressions are judged between app versions.")),
  );
  listen(null);
}

// ---- Keys (admin key) ------------------------------------------------------------------------------------

async function keysView() {
  if (currentKey?.role !== "admin") return show(h("h1", {}, "Keys"), h("p", { class: "panel" }, "Keys are managed with an admin key."));
  const form = h("form", { class: "filters", id: "key-form" },
    h("label", {}, "Role", h("select", { name: "role" }, ["read", "admin", "ingest"].map((r) => h("option", { value: r }, r)))),
    h("label", {}, "Apps", h("input", { name: "appIds", placeholder: currentKey.appIds ? currentKey.appIds.join(", ") : "all apps (or com.a, com.b)" })),
    h("label", {}, "Description", h("input", { name: "description" })),
    h("label", {}, "Expires", h("input", { name: "expiresAt", type: "date" })),
    h("button", { type: "submit" }, "Create key"));
  const made = h("div", { id: "new-key", role: "status" });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = { role: data.get("role"), description: String(data.get("description") || "") };
    const apps = String(data.get("appIds") || "").split(",").map((a) => a.trim()).filter(Boolean);
    if (apps.length) body.appIds = apps;
    if (data.get("expiresAt")) body.expiresAt = new Date(String(data.get("expiresAt"))).toISOString();
    try {
      const key = await api("/v1/keys", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      await keysView();
      document.getElementById("new-key").replaceChildren(h("p", { class: "panel" },
        `Key ${key.id} made. Copy its secret now: it is shown this once. `, h("code", { id: "new-key-secret" }, key.key)));
    } catch (error) {
      made.replaceChildren(h("p", { class: "error" }, `Could not make the key: ${error.message}`));
    }
  });
  const tbody = h("tbody");
  const more = h("button", { type: "button", id: "more-keys", hidden: true }, "More keys");
  let cursor = null;
  const load = async () => {
    const page = await api(`/v1/keys${query({ limit: 100, cursor })}`);
    tbody.append(...page.data.map((k) => h("tr", { "data-key": k.id, "data-state": k.state },
      h("td", {}, h("code", {}, k.id)), h("td", {}, k.role), h("td", {}, (k.appIds || []).join(", ") || "all"),
      h("td", {}, k.description), h("td", {}, k.revokedWith ? `${k.state} with ${k.revokedWith}, which made it` : k.state),
      h("td", {}, time(k.lastUsedAt)),
      h("td", {}, k.source === "environment" ? h("span", { class: "muted" }, "configured")
        : k.state === "active" ? h("button", { type: "button", onclick: async (event) => {
          event.target.disabled = true;
          try { await api(`/v1/keys/${encodeURIComponent(k.id)}`, { method: "DELETE" }); await keysView(); }
          catch (error) { event.target.textContent = `Failed: ${error.message}`; }
        } }, "Revoke") : null))));
    cursor = page.nextCursor;
    more.hidden = !cursor;
  };
  more.addEventListener("click", load);
  await load();
  show(h("h1", {}, "Keys"), form, made,
    h("section", { class: "panel scroll" }, h("table", { id: "keys" },
      h("thead", {}, h("tr", {}, ["Id", "Role", "Apps", "Description", "State", "Last used", ""].map((t) => h("th", {}, t)))),
      tbody), more));
  listen(null);
}

// ---- Routing ---------------------------------------------------------------------------------------------

async function route() {
  if (!apiKey()) return renderLogin();
  const hash = location.hash.replace(/^#\/?/, "") || "fleet";
  const [path, search] = hash.split("?");
  const parts = path.split("/").map(decodeURIComponent);
  const params = new URLSearchParams(search || "");
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("current", a.dataset.view === (parts[0] === "device" ? "devices" : parts[0]));
  try {
    if (parts[0] === "devices") await devicesView(params);
    else if (parts[0] === "device" && parts.length >= 3) await deviceView(parts[1], parts.slice(2).join("/"));
    else if (parts[0] === "alerts") await alertsView();
    else if (parts[0] === "releases") await releasesView(params);
    else if (parts[0] === "webhooks") await webhooksView();
    else if (parts[0] === "keys") await keysView();
    else await fleetView();
    document.body.dataset.view = parts[0] || "fleet";
  } catch (error) {
    if (error.status === 401) return;
    show(h("p", { class: "panel error", role: "alert" }, `Could not load this view: ${error.message}`));
  }
}

async function start() {
  try {
    currentKey = await api("/v1/keys/current");
  } catch (error) {
    if (error.status !== 401) show(h("p", { class: "panel error", role: "alert" }, `Could not sign in: ${error.message}`));
    return;
  }
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = false;
  renderScope();
  stream.start();
  route();
}

document.getElementById("signout").addEventListener("click", () => signOut());
window.addEventListener("hashchange", () => { if (apiKey()) route(); });
if (apiKey()) start(); else renderLogin();
