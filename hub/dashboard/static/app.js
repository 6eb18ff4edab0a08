// Flotilla hub dashboard: plain JavaScript, no dependencies. Data comes from
// one server-sent event stream (a snapshot, then deltas); lease ages are
// computed here every second from the last renewal and the hub's clock
// offset, so the page ticks without polling.
"use strict";

const TOKEN_KEY = "flotilla.dashboard.token";
const ROW_HEIGHT = 34;
const HISTO_BINS = 12; // over 0 .. 1.5 × grace; the last bin holds everything older

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  me: null,
  settings: { gracePeriodMs: 40000, defaultLeaseDurationMs: 40000 },
  offset: 0, // hub clock minus browser clock, ms
  clusters: new Map(),
  bindings: new Map(),
  zones: {},
  bindingsLimited: false,
  sort: { key: "name", desc: false },
  filter: "",
  order: null, // sorted, filtered names; null when stale
  abort: null,
  connected: false,
  events: { cluster: "", list: [], error: "" },
  history: { cluster: "", renewals: [], asOf: 0, loading: false },
};

const $ = (id) => document.getElementById(id);

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function hubNow() { return Date.now() + state.offset; }

function fmtAge(ms) {
  if (ms == null || !isFinite(ms)) return "–";
  if (ms < 0) ms = 0;
  const s = ms / 1000;
  if (s < 10) return s.toFixed(1) + "s";
  if (s < 120) return Math.floor(s) + "s";
  const m = s / 60;
  if (m < 120) return Math.floor(m) + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
  const h = m / 60;
  if (h < 48) return Math.floor(h) + "h" + String(Math.floor(m % 60)).padStart(2, "0") + "m";
  return Math.floor(h / 24) + "d";
}

function fmtTime(ms) { return ms ? new Date(ms - state.offset).toLocaleTimeString() : "–"; }

// lease returns the freshness of a cluster's lease at the hub's now.
function lease(c) {
  const duration = c.leaseDurationMs || state.settings.defaultLeaseDurationMs;
  const grace = state.settings.gracePeriodMs;
  if (!c.lastRenewal) return { cls: "never", age: null, duration, grace, frac: 0 };
  const age = hubNow() - c.lastRenewal;
  const cls = age <= duration ? "fresh" : age <= grace ? "late" : "expired";
  return { cls, age, duration, grace, frac: Math.min(Math.max(age / grace, 0), 1) };
}

function leaseHTML(c) {
  const l = lease(c);
  const mark = Math.min(l.duration / l.grace, 1) * 100;
  return `<div class="lease ${l.cls}" data-state="${l.cls}" title="lease ${fmtAge(l.duration)}, grace ${fmtAge(l.grace)}">` +
    `<div class="track"><div class="fill" style="width:${(l.frac * 100).toFixed(1)}%"></div><div class="mark" style="left:${mark.toFixed(1)}%"></div></div>` +
    `<span class="age">${l.age == null ? "never" : fmtAge(l.age)}</span></div>`;
}

function taintsHTML(c) {
  return (c.taints || []).map((t) => {
    const age = t.added ? " " + fmtAge(hubNow() - t.added) : "";
    const by = t.policy ? ` by ClusterTaintPolicy ${t.policy}` : "";
    const owner = t.policy ? ` <span class="taint-policy">by ${esc(t.policy)}</span>` : "";
    return `<span class="taint ${esc(t.effect)}" title="added ${esc(fmtTime(t.added))}${esc(by)}">${esc(t.key.replace("cluster.flotilla.io/", ""))}${t.value ? "=" + esc(t.value) : ""}:${esc(t.effect)}${esc(age)}${owner}</span>`;
  }).join("");
}

function readyHTML(c) {
  const r = c.ready || "None";
  return `<span class="pill ${esc(r)} ready" title="${esc(c.readyReason)}: ${esc(c.readyMessage)}">${esc(r)}</span>`;
}

// ---- API ----

async function api(path, opts = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + state.token }, opts.headers || {});
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method: opts.method || "GET", headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), cache: "no-store" });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text }; }
  if (!resp.ok) {
    const err = new Error((data && data.error) || resp.statusText);
    err.status = resp.status;
    throw err;
  }
  return data;
}

// stream reads the server-sent events with fetch, so that the token goes in
// a header (EventSource cannot send one), and reconnects after a loss.
async function stream() {
  let backoff = 500;
  while (state.token) {
    const ctl = new AbortController();
    state.abort = ctl;
    try {
      const resp = await fetch("/dashboard/api/stream", { headers: { Authorization: "Bearer " + state.token }, signal: ctl.signal, cache: "no-store" });
      if (resp.status === 401 || resp.status === 403) {
        const body = await resp.json().catch(() => ({}));
        signOut(body.error || resp.statusText);
        return;
      }
      if (!resp.ok) throw new Error("stream: " + resp.status);
      setConnected(true);
      backoff = 500;
      await readEvents(resp.body, onEvent);
    } catch (e) {
      if (ctl.signal.aborted) return;
      $("error").textContent = "connection to the hub lost: " + e.message + "; retrying";
    }
    setConnected(false);
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 10000);
  }
}

async function readEvents(body, handle) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "", name = "message", data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(buf[nl] === "\r" && buf[nl + 1] === "\n" ? nl + 2 : nl + 1);
      if (line === "") {
        if (data.length) handle(name, data.join("\n"));
        name = "message"; data = [];
      } else if (line.startsWith(":")) {
        // comment: keep-alive
      } else {
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        let v = i < 0 ? "" : line.slice(i + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "event") name = v;
        else if (field === "data") data.push(v);
      }
    }
  }
}

function onEvent(name, raw) {
  const msg = JSON.parse(raw);
  state.offset = msg.now - Date.now();
  if (name === "snapshot") {
    state.settings = msg.settings;
    state.clusters = new Map((msg.clusters || []).map((c) => [c.name, c]));
    state.bindings = new Map((msg.bindings || []).map((b) => [b.key, b]));
    state.zones = msg.zones || {};
    state.bindingsLimited = !!msg.bindingsLimited;
    $("hub").textContent = "hub " + (msg.settings.hubID || "");
    $("error").textContent = "";
  } else if (name === "delta") {
    for (const c of msg.clusters || []) state.clusters.set(c.name, c);
    for (const n of msg.removedClusters || []) state.clusters.delete(n);
    for (const b of msg.bindings || []) state.bindings.set(b.key, b);
    for (const k of msg.removedBindings || []) state.bindings.delete(k);
    if (msg.zones) state.zones = msg.zones;
  }
  state.order = null;
  scheduleRender();
}

// scheduleRender draws once per animation frame however many batches came.
let renderPending = false;
function scheduleRender() {
  if (renderPending) return;
  renderPending = true;
  requestAnimationFrame(() => { renderPending = false; render(); });
}

function setConnected(on) {
  state.connected = on;
  const el = $("conn");
  el.textContent = on ? "live" : "offline";
  el.className = "conn " + (on ? "on" : "off");
}

// ---- sign in ----

async function signIn(token) {
  state.token = token.trim();
  try {
    state.me = await api("/dashboard/api/whoami");
  } catch (e) {
    signOut(e.status === 401 ? "token not accepted: " + e.message : e.message);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, state.token);
  $("who").textContent = state.me.user;
  $("signout").hidden = false;
  $("nav").hidden = false;
  $("signin").hidden = true;
  route();
  stream();
}

function signOut(message) {
  if (state.abort) state.abort.abort();
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = ""; state.me = null;
  state.clusters = new Map(); state.bindings = new Map();
  for (const id of ["fleet", "cluster", "workloads"]) $(id).hidden = true;
  $("signin").hidden = false;
  $("nav").hidden = true;
  $("signout").hidden = true;
  $("who").textContent = "";
  $("signin-error").textContent = message || "";
  setConnected(false);
}

// ---- routing ----

function currentRoute() {
  const h = location.hash.replace(/^#\/?/, "");
  if (h.startsWith("cluster/")) return { view: "cluster", name: decodeURIComponent(h.slice(8)) };
  if (h === "workloads") return { view: "workloads" };
  return { view: "fleet" };
}

function route() {
  if (!state.me) return;
  const r = currentRoute();
  for (const id of ["fleet", "cluster", "workloads"]) $(id).hidden = id !== r.view;
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === r.view));
  if (r.view === "cluster" && state.events.cluster !== r.name) loadEvents(r.name);
  render();
}

function render() {
  if (!state.me) return;
  const r = currentRoute();
  if (r.view === "fleet") renderFleet();
  else if (r.view === "cluster") renderCluster(r.name);
  else renderWorkloads();
}

// ---- fleet ----

const COLUMNS = [
  { key: "name", label: "Cluster", sort: (c) => c.name },
  { key: "ready", label: "Ready", sort: (c) => c.ready || "" },
  { key: "lease", label: "Lease age", sort: (c) => -(c.lastRenewal || 0) },
  { key: "taints", label: "Taints", sort: (c) => (c.taints || []).length },
  { key: "zone", label: "Zone (mode)", sort: (c) => c.zone || "" },
  { key: "region", label: "Region", sort: (c) => c.region || "" },
  { key: "k8s", label: "Kubernetes", sort: (c) => c.kubernetes || "" },
  { key: "agent", label: "Agent", sort: (c) => c.agent || "" },
  { key: "hub", label: "Hub", sort: (c) => c.connectedTo || "" },
  { key: "skew", label: "Skew", sort: (c) => skewMs(c.clockSkew) },
  { key: "status", label: "Last status", sort: (c) => -(c.lastStatus || 0) },
];

function skewMs(s) {
  if (!s) return 0;
  const m = /^(-?)(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?/.exec(s);
  if (!m) return 0;
  const v = ((+m[2] || 0) * 3600 + (+m[3] || 0) * 60 + (+m[4] || 0)) * 1000;
  return m[1] ? -v : v;
}

function zoneName(z) { return z || "default"; }

function matches(c, f) {
  if (!f) return true;
  const hay = [c.name, c.ready, c.zone, c.region, c.provider, c.kubernetes, c.agent, c.connectedTo,
    ...(c.taints || []).map((t) => t.key + ":" + t.effect), lease(c).cls].join(" ").toLowerCase();
  return f.split(/\s+/).every((w) => hay.includes(w));
}

function fleetOrder() {
  if (state.order) return state.order;
  const col = COLUMNS.find((c) => c.key === state.sort.key) || COLUMNS[0];
  const f = state.filter.toLowerCase().trim();
  const list = [];
  for (const c of state.clusters.values()) if (matches(c, f)) list.push(c);
  list.sort((a, b) => {
    const x = col.sort(a), y = col.sort(b);
    const d = x < y ? -1 : x > y ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    return state.sort.desc ? -d : d;
  });
  state.order = list.map((c) => c.name);
  return state.order;
}

function renderFleetHead() {
  $("fleet-head").innerHTML = COLUMNS.map((c) =>
    `<div data-sort="${c.key}" class="${state.sort.key === c.key ? "sorted" + (state.sort.desc ? " desc" : "") : ""}">${esc(c.label)}</div>`).join("");
}

function rowHTML(c, i) {
  const mode = state.zones[zoneName(c.zone)];
  return `<div class="row" data-cluster="${esc(c.name)}" style="top:${i * ROW_HEIGHT}px">` +
    `<div><a href="#/cluster/${encodeURIComponent(c.name)}">${esc(c.name)}</a></div>` +
    `<div>${readyHTML(c)}</div><div>${leaseHTML(c)}</div><div class="taints">${taintsHTML(c)}</div>` +
    `<div>${esc(zoneName(c.zone))}${mode ? ` <span class="pill ${esc(mode)}">${esc(mode)}</span>` : ""}</div>` +
    `<div>${esc(c.region || "–")}</div><div>${esc(c.kubernetes || "–")}</div><div>${esc(c.agent || "–")}</div>` +
    `<div>${c.connectedTo ? esc(c.connectedTo) + (c.transport === "websocket" ? ' <span class="muted" title="UDP blocked on the way: the agent uses the WebSocket over TCP">(WebSocket)</span>' : "") : '<span class="muted">none</span>'}</div><div>${esc(c.clockSkew || "–")}</div>` +
    `<div>${c.lastStatus ? fmtAge(hubNow() - c.lastStatus) + " ago" : "–"}</div></div>`;
}

function renderFleet() {
  const order = fleetOrder();
  const body = $("fleet-body");
  const first = Math.max(0, Math.floor(body.scrollTop / ROW_HEIGHT) - 5);
  const last = Math.min(order.length, Math.ceil((body.scrollTop + body.clientHeight) / ROW_HEIGHT) + 5);
  let html = `<div id="fleet-spacer" style="height:${order.length * ROW_HEIGHT}px"></div>`;
  for (let i = first; i < last; i++) html += rowHTML(state.clusters.get(order[i]), i);
  body.innerHTML = html;
  $("shown").textContent = `${order.length} of ${state.clusters.size} clusters`;
  renderSummary();
}

const SEVERITY = { never: 0, fresh: 1, late: 2, expired: 3 };

function renderSummary() {
  const counts = { fresh: 0, late: 0, expired: 0, never: 0 };
  const ready = { True: 0, False: 0, Unknown: 0 };
  const bins = new Array(HISTO_BINS).fill(0);
  const binCls = new Array(HISTO_BINS).fill("never"); // the worst freshness in each bin
  const grace = state.settings.gracePeriodMs;
  const width = (1.5 * grace) / HISTO_BINS;
  for (const c of state.clusters.values()) {
    const l = lease(c);
    counts[l.cls]++;
    if (c.ready in ready) ready[c.ready]++;
    if (l.age == null) continue;
    const b = Math.min(HISTO_BINS - 1, Math.max(0, Math.floor(l.age / width)));
    bins[b]++;
    if (SEVERITY[l.cls] > SEVERITY[binCls[b]]) binCls[b] = l.cls;
  }
  $("counts").innerHTML = `<span class="pill fresh">${counts.fresh} fresh</span><span class="pill late">${counts.late} late</span>` +
    `<span class="pill expired">${counts.expired} expired</span>` + (counts.never ? `<span class="pill">${counts.never} never renewed</span>` : "") +
    ` &nbsp; Ready: <span class="pill True">${ready.True} True</span><span class="pill False">${ready.False} False</span><span class="pill Unknown">${ready.Unknown} Unknown</span>`;
  $("zones").innerHTML = "Zones: " + (Object.keys(state.zones).sort().map((z) =>
    `<span class="pill ${esc(state.zones[z])}">${esc(z)}: ${esc(state.zones[z])}</span>`).join("") || '<span class="muted">none</span>');
  const max = Math.max(1, ...bins);
  const label = (ms) => (width < 1000 ? (ms / 1000).toFixed(1) : fmtAge(ms).replace(".0s", "s"));
  $("histogram").innerHTML = bins.map((n, b) => {
    const lo = b * width;
    const last = b === HISTO_BINS - 1;
    const color = binCls[b] === "never" ? "#b8bfc8" : `var(--${binCls[b]})`;
    return `<div class="bin" data-bin="${b}" title="${n} clusters with a lease age from ${label(lo)}${last ? " on" : " to " + label(lo + width)}"><span>${n || ""}</span>` +
      `<div class="bar" style="height:${(n / max) * 48}px;background:${color}"></div><span class="label">${label(lo)}${last ? "+" : ""}</span></div>`;
  }).join("");
}

// ---- cluster page ----

async function loadEvents(name) {
  state.events = { cluster: name, list: [], error: "" };
  if (!state.me.can.events) { state.events.error = "you may not list events"; return; }
  try {
    state.events.list = await api(`/dashboard/api/clusters/${encodeURIComponent(name)}/events`);
  } catch (e) {
    state.events.error = e.message;
  }
  render();
}

// loadHistory fetches the cluster's recent renewals when it has renewed
// since the last fetch (they are kept out of the stream).
async function loadHistory(c) {
  const h = state.history;
  if (h.loading || (h.cluster === c.name && h.asOf === c.lastRenewal)) return;
  h.loading = true;
  try {
    const r = await api(`/dashboard/api/clusters/${encodeURIComponent(c.name)}/lease`);
    state.history = { cluster: c.name, renewals: r.renewals || [], asOf: c.lastRenewal, loading: false };
  } catch (e) {
    state.history = { cluster: c.name, renewals: [], asOf: c.lastRenewal, loading: false };
  }
  scheduleRender();
}

function bindingsOn(name) {
  const out = [];
  for (const b of state.bindings.values()) {
    const p = (b.placement || []).find((x) => x.cluster === name);
    const t = (b.tasks || []).find((x) => x.fromCluster === name);
    if (p || t) out.push({ b, p, t });
  }
  return out.sort((x, y) => (x.b.key < y.b.key ? -1 : 1));
}

function renderCluster(name) {
  const c = state.clusters.get(name);
  const el = $("cluster");
  if (!c) { el.innerHTML = `<h1>${esc(name)}</h1><p class="muted">No such cluster (yet).</p>`; return; }
  const l = lease(c);
  const can = state.me.can;
  let actions = "";
  if (can.cordon) {
    actions = `<div class="card actions">` +
      (c.cordoned ? `<button class="action" id="uncordon" data-act="uncordon">Uncordon</button>` : `<button class="action" id="cordon" data-act="cordon">Cordon</button>`) +
      ` <input id="taint-spec" placeholder="key=value:NoSchedule" size="28"> <button class="action" data-act="taint-add">Add taint</button>` +
      `<button class="action danger" data-act="taint-remove">Remove taint</button> <span id="action-result" class="muted"></span></div>`;
  }
  const typed = $("taint-spec") ? $("taint-spec").value : "";
  loadHistory(c);
  const history = state.history.cluster === name ? state.history.renewals : [];
  const gaps = history.slice(1).map((t, i) => t - history[i]);
  const maxGap = Math.max(1, ...gaps, l.duration);
  el.innerHTML = `<h1>${esc(c.name)} ${readyHTML(c)} ${c.cordoned ? '<span class="pill">cordoned</span>' : ""}</h1>` + actions +
    `<div class="card grid" data-cluster="${esc(c.name)}">` +
    `<div>Lease</div><div>${leaseHTML(c)}<span class="muted">last renewal ${esc(fmtTime(c.lastRenewal))}; duration ${fmtAge(l.duration)}, grace ${fmtAge(l.grace)}</span></div>` +
    `<div>Taints</div><div class="taints">${taintsHTML(c) || '<span class="muted">none</span>'}</div>` +
    `<div>Zone</div><div>${esc(zoneName(c.zone))} ${esc(state.zones[zoneName(c.zone)] || "")}</div>` +
    `<div>Region / provider</div><div>${esc(c.region || "–")} / ${esc(c.provider || "–")}</div>` +
    `<div>Kubernetes</div><div>${esc(c.kubernetes || "–")} (nodes ready/total ${esc(c.nodes || "–")})</div>` +
    `<div>Agent</div><div>${esc(c.agent || "–")}, ${c.connected ? "connected to " + esc(c.connectedTo || "this hub") + (c.transport ? " over " + esc(c.transport) : "") : "not connected"}; clock skew ${esc(c.clockSkew || "–")}</div>` +
    `<div>Last status report</div><div>${c.lastStatus ? fmtAge(hubNow() - c.lastStatus) + " ago" : "–"}</div></div>` +
    `<h2>Conditions</h2><table class="list"><tr><th>Type</th><th>Status</th><th>Reason</th><th>Since</th><th>Message</th></tr>` +
    (c.conditions || []).map((k) => `<tr><td>${esc(k.type)}</td><td><span class="pill ${esc(k.status)}">${esc(k.status)}</span></td><td>${esc(k.reason)}</td>` +
      `<td>${fmtAge(hubNow() - k.since)} ago</td><td>${esc(k.message)}</td></tr>`).join("") + `</table>` +
    `<h2>Lease history <span class="muted">(${history.length > 1 ? `intervals between the last ${history.length} renewals` : "no renewals yet"})</span></h2>` +
    `<div class="card"><div class="history">${gaps.map((g) => `<div class="tick ${g <= l.duration ? "" : g <= l.grace ? "late" : "expired"}" title="${fmtAge(g)}" style="height:${Math.max(2, (g / maxGap) * 40)}px"></div>`).join("")}</div></div>` +
    `<h2>Bindings placed here</h2>` + bindingsTable(bindingsOn(name).map((x) => x.b), name) +
    `<h2>Events</h2>` + (state.events.error ? `<p class="muted">${esc(state.events.error)}</p>` :
      `<table class="list"><tr><th>When</th><th>Type</th><th>Reason</th><th>Message</th></tr>` +
      state.events.list.map((e) => `<tr class="event ${esc(e.type)}"><td>${esc(fmtTime(e.time))}</td><td>${esc(e.type)}</td><td>${esc(e.reason)}</td><td>${esc(e.message)}${e.count > 1 ? ` (×${e.count})` : ""}</td></tr>`).join("") + `</table>`);
  if ($("taint-spec")) $("taint-spec").value = typed;
}

async function clusterAction(act) {
  const name = currentRoute().name;
  const out = $("action-result");
  try {
    if (act === "cordon" || act === "uncordon") {
      await api(`/dashboard/api/clusters/${encodeURIComponent(name)}/cordon`, { method: "POST", body: { cordon: act === "cordon" } });
    } else {
      const m = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$/.exec($("taint-spec").value.trim());
      if (!m) throw new Error("taint: write key[=value]:Effect");
      const t = { key: m[1], value: m[2] || "", effect: m[3] };
      await api(`/dashboard/api/clusters/${encodeURIComponent(name)}/taints`, { method: "POST", body: act === "taint-add" ? { add: t } : { remove: t } });
    }
    if (out) out.textContent = act + ": done";
    loadEvents(name);
  } catch (e) {
    if ($("action-result")) $("action-result").textContent = act + " failed: " + e.message;
  }
}

// ---- workloads ----

function healthPill(p) {
  const h = p.health || (p.applied ? "Unknown" : "not applied");
  const pill = `<span class="pill ${esc(p.health || "")}" title="applied: ${p.applied}${p.message ? " – " + esc(p.message) : ""}">${esc(p.cluster)}${p.replicas ? " ×" + p.replicas : ""}: ${esc(h)}</span>`;
  // Why it is not applied there (a failure, a refusal by the member's policy).
  return p.message ? pill + `<div class="muted placement-message">${esc(p.cluster)}: ${esc(p.message)}</div>` : pill;
}

function bindingsTable(list, onCluster) {
  if (!list.length) return `<p class="muted">No bindings${state.bindingsLimited ? " you may see" : ""}.</p>`;
  const can = state.me.can;
  return `<table class="list bindings"><tr><th>Binding</th><th>Resource</th><th>Scheduled / applied</th><th>Placement and health</th><th>Eviction tasks</th></tr>` +
    list.map((b) => `<tr data-binding="${esc(b.key)}"><td>${esc(b.key)}${can.rebalance ? `<br><button class="action" data-rebalance="${esc(b.key)}">Rebalance</button>` : ""}</td>` +
      `<td>${esc(b.resource)}${b.replicas ? " ×" + b.replicas : ""}</td><td>${esc(b.scheduled || "–")} / ${esc(b.applied || "–")}</td>` +
      `<td>${(b.placement || []).map(healthPill).join("") || '<span class="muted">none</span>'}</td>` +
      `<td>${(b.tasks || []).filter((t) => !onCluster || t.fromCluster === onCluster).map((t) =>
        `<div class="task"><b>from ${esc(t.fromCluster)}</b> (${esc(t.reason)}, ${t.created ? fmtAge(hubNow() - t.created) : "not started"}): ${esc(t.waiting)}` +
        (can.purge ? ` <button class="action danger" data-purge="${esc(b.key)}" data-cluster="${esc(t.fromCluster)}">Purge</button>` : "") + `</div>`).join("")}</td></tr>`).join("") + `</table>`;
}

function renderWorkloads() {
  const list = [...state.bindings.values()].sort((x, y) => (x.key < y.key ? -1 : 1));
  const perZone = {};
  let tasks = 0;
  for (const b of list) for (const t of b.tasks || []) { perZone[zoneName(t.zone)] = (perZone[zoneName(t.zone)] || 0) + 1; tasks++; }
  $("workloads").innerHTML = `<h1>Workloads</h1>` +
    (state.bindingsLimited ? `<p class="muted">Showing the bindings of the namespaces you may list.</p>` : "") +
    `<div class="card">Evictions in progress: ${tasks ? Object.keys(perZone).sort().map((z) => `<span class="pill late">${esc(z)}: ${perZone[z]}</span>`).join("") : '<span class="muted">none</span>'}` +
    ` &nbsp; <span id="workload-result" class="muted"></span></div>` + bindingsTable(list, "");
}

async function workloadAction(target) {
  const out = () => $("workload-result") || $("action-result");
  try {
    if (target.dataset.rebalance) {
      const b = state.bindings.get(target.dataset.rebalance);
      const r = await api("/dashboard/api/rebalance", { method: "POST", body: { apiVersion: b.apiVersion, kind: b.kind, namespace: b.namespace || "", name: b.resourceName } });
      if (out()) out().textContent = "rebalancer " + r.workloadRebalancer + " created";
    } else {
      const b = state.bindings.get(target.dataset.purge);
      const r = await api("/dashboard/api/purge", { method: "POST", body: { namespace: b.namespace || "", name: b.name, cluster: target.dataset.cluster } });
      if (out()) out().textContent = "purge request " + r.purgeRequest + " created";
    }
  } catch (e) {
    if (out()) out().textContent = "failed: " + e.message;
  }
}

// ---- wiring ----

document.addEventListener("DOMContentLoaded", () => {
  renderFleetHead();
  $("signin-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("token").value); });
  $("signout").addEventListener("click", () => signOut(""));
  $("filter").addEventListener("input", (e) => { state.filter = e.target.value; state.order = null; $("fleet-body").scrollTop = 0; renderFleet(); });
  $("fleet-head").addEventListener("click", (e) => {
    const key = e.target.dataset && e.target.dataset.sort;
    if (!key) return;
    state.sort = { key, desc: state.sort.key === key ? !state.sort.desc : false };
    state.order = null;
    renderFleetHead();
    renderFleet();
  });
  $("fleet-body").addEventListener("scroll", () => renderFleet(), { passive: true });
  $("cluster").addEventListener("click", (e) => {
    if (e.target.dataset.act) clusterAction(e.target.dataset.act);
    else if (e.target.dataset.rebalance || e.target.dataset.purge) workloadAction(e.target);
  });
  $("workloads").addEventListener("click", (e) => { if (e.target.dataset.rebalance || e.target.dataset.purge) workloadAction(e.target); });
  window.addEventListener("hashchange", route);
  // The clock: ages move every second without asking the hub.
  setInterval(() => {
    const r = currentRoute();
    if (!state.me) return;
    if (r.view === "fleet") { if (state.filter) state.order = null; scheduleRender(); }
    else if (r.view === "cluster" && !(document.activeElement && document.activeElement.id === "taint-spec")) scheduleRender();
  }, 1000);
  if (state.token) signIn(state.token); else signOut("");
});
