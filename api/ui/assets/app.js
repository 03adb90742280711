// eskv console: an overview of the projects the session may read, the
// cluster's health, a project's keys (searched and paged by cursor) and a
// key's live history. It renders /ui/api/... JSON and /ui/api/watch
// events, which never carry a value (fingerprints only). Every datum is
// set as text, never as HTML. Views are addressed by the URL's hash:
// #/ (overview), #/health, #/p/<project prefix>, #/k/<key>.
"use strict";

const state = {
  me: null, serverSkew: 0, source: null, timer: null, reload: null,
  projectsCursor: "", projectsSeen: 0,
  prefix: "", search: "", purpose: "", type: "", cursors: [""], next: "",
  key: "", row: null,
};

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (r.status === 401) { location.href = "/ui/login"; throw new Error("session ended"); }
  const body = await r.json();
  if (!r.ok) throw new Error((body.error && body.error.message) || r.statusText);
  return body;
}

function showError(err) {
  const p = $("error");
  p.textContent = err ? String(err.message || err) : "";
  p.hidden = !err;
}

// duration renders seconds as "3d 4h", "5m 10s", "42s".
function duration(s) {
  if (s < 0) s = 0;
  s = Math.floor(s);
  const out = [];
  for (const [n, u] of [[86400, "d"], [3600, "h"], [60, "m"], [1, "s"]]) {
    if (s >= n || (u === "s" && out.length === 0)) { out.push(Math.floor(s / n) + u); s %= n; }
    if (out.length === 2) break;
  }
  return out.join(" ");
}

function now() { return Date.now() + state.serverSkew; }
function skew(serverTime) { if (serverTime) state.serverSkew = Date.parse(serverTime) - Date.now(); }
function rate(x) { return x === undefined || x === null ? "—" : (Math.round(x * 10) / 10).toString(); }
function ago(t) { return t ? el("span", { class: "ago", "data-since": t }, "") : "—"; }
function projectHref(prefix) { return "#/p/" + encodeURIComponent(prefix); }
function keyHref(key) { return "#/k/" + encodeURIComponent(key); }
function projectOf(key) { return key.split("/").slice(0, 4).join("/") + "/"; }

// stopLive ends the view's stream and timer.
function stopLive() {
  if (state.source) { state.source.close(); state.source = null; }
  clearInterval(state.timer); state.timer = null;
  clearTimeout(state.reload);
}

function show(view) {
  for (const v of document.querySelectorAll("section.view")) v.hidden = v.id !== "view-" + view;
  for (const a of document.querySelectorAll("header nav a")) {
    if (a.id === "nav-" + view) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
}

// route shows the view the hash names.
function route() {
  stopLive();
  showError(null);
  const h = location.hash.replace(/^#\/?/, "");
  if (h.startsWith("p/")) return openProject(decodeURIComponent(h.slice(2)));
  if (h.startsWith("k/")) return openKey(decodeURIComponent(h.slice(2)));
  if (h === "health") return openHealth();
  return openOverview();
}

// ---- Overview ----

function renderAlerts(box, alerts) {
  box.replaceChildren(...alerts.map((a) => el("p", { class: "alert", "data-alert": a.name },
    el("strong", {}, a.name.replace(/_/g, " ")), ": " + a.message)));
  if (alerts.length === 0) box.append(el("p", { class: "ok", "data-alert": "none" }, "No alert firing."));
}

function writersText(ws) {
  const answered = ws.filter((w) => w.answered).length;
  let s = "Conflicts summed over " + answered + " of " + ws.length + (ws.length === 1 ? " writer" : " writers");
  const missing = ws.filter((w) => !w.answered).map((w) => w.addr);
  if (missing.length) s += "; not answering: " + missing.join(", ");
  return s + ".";
}

async function openOverview() {
  show("overview");
  state.projectsCursor = ""; state.projectsSeen = 0;
  $("projects-table").tBodies[0].replaceChildren();
  await loadOverview(true);
  state.timer = setInterval(() => refreshOverview(), 10000);
}

// loadOverview appends the next page of projects (first: replaces).
async function loadOverview(first) {
  try {
    const o = await getJSON("/ui/api/overview?limit=100" + (state.projectsCursor ? "&cursor=" + encodeURIComponent(state.projectsCursor) : ""));
    skew(o.serverTime);
    const body = $("projects-table").tBodies[0];
    if (first) body.replaceChildren();
    for (const p of o.projects) body.append(projectRow(p));
    state.projectsSeen += o.projects.length;
    state.projectsCursor = o.nextCursor || "";
    $("projects-more").hidden = !o.truncated;
    $("projects-none").hidden = body.rows.length > 0;
    $("overview-title").textContent = "Projects (" + body.rows.length + (o.truncated ? "+" : "") + ")";
    renderAlerts($("alerts"), o.alerts);
    $("overview-writers").textContent = writersText(o.writers) + " Rates over the last " + Math.round(o.windowSeconds / 60) + " minutes.";
    tick();
  } catch (err) { showError(err); }
}

// refreshOverview reloads the first page in place (when only one is
// shown), so that rates and alerts follow.
function refreshOverview() {
  if (state.projectsSeen > 100) return;
  state.projectsCursor = ""; state.projectsSeen = 0;
  loadOverview(true);
}

function projectRow(p) {
  const prefix = "tenant/" + p.tenant + "/project/" + p.project + "/";
  return el("tr", { "data-project": p.tenant + "/" + p.project },
    el("th", { scope: "row", class: "name" }, el("a", { href: projectHref(prefix) }, p.tenant + "/" + p.project)),
    el("td", { class: "num keys", "data-label": "keys" }, p.keys),
    el("td", { class: "num writes", "data-label": "writes/min" }, rate(p.writesPerMinute)),
    el("td", { class: "num conflicts", "data-label": "conflicts/min" }, rate(p.conflictsPerMinute)),
    el("td", { class: "last", "data-label": "last change" }, ago(p.lastChange)));
}

// ---- Health ----

async function openHealth() {
  show("health");
  await loadHealth();
  state.timer = setInterval(loadHealth, 5000);
}

function fact(dl, name, value, attrs) {
  dl.append(el("dt", {}, name), el("dd", attrs || {}, value));
}

function lagText(v) { return v === undefined || v === null ? "unknown" : String(v); }

// verificationFact says what the writer knows of the auditor's last
// periodic verification: "last verification: <time> (<ago>), <outcome>,
// <coverage>", or why it knows nothing.
function verificationFact(a) {
  const secs = (s) => s < 1 ? Math.round(s * 1000) + " ms" : duration(s);
  const every = a.verifyIntervalSeconds ? " (every " + secs(a.verifyIntervalSeconds) + ")" : "";
  switch (a.verification) {
    case "not_configured": return { node: "auditor not configured (set ESKV_AUDITOR_URL on the writers)", cls: "" };
    case "unreachable": return { node: "auditor unreachable: " + (a.verificationError || ""), cls: "bad" };
    case "off": return { node: "the auditor runs no periodic verification (ESKV_VERIFY_INTERVAL is 0)", cls: "" };
    case "not_run_yet": return { node: "none yet since the auditor started" + every, cls: "" };
  }
  const l = a.lastVerification;
  const parts = (l.partitions || []).map((p) => "p" + p.partition + " " + (p.to > p.from ? p.from + "–" + p.to : "empty"));
  const shown = parts.length > 8 ? parts.slice(0, 8).join(", ") + ", …" : parts.join(", ");
  const coverage = l.outcome === "error" ? "" : ", " + l.rows + " rows of " + l.keys + " keys against " + l.events + " events, " + l.pending + " pending" +
    (shown ? "; offsets " + shown : "");
  return {
    node: el("span", {}, "last verification: " + new Date(l.finishedAt).toISOString().replace(/\.\d+Z$/, "Z") + " (", ago(l.finishedAt), "), ",
      el("strong", { class: "outcome" }, l.outcome), coverage + ", took " + secs(l.durationSeconds) + every + (l.reason ? " — " + l.reason : "")),
    cls: l.outcome === "ok" ? "ok" : "bad",
  };
}

async function loadHealth() {
  try {
    const h = await getJSON("/ui/api/health");
    skew(h.serverTime);
    renderAlerts($("health-alerts"), h.alerts);
    const dl = $("health-summary");
    dl.replaceChildren();
    fact(dl, "Broker", h.broker.reachable ? "reachable" : "unreachable: " + h.broker.error, { id: "health-broker", class: h.broker.reachable ? "ok" : "bad" });
    fact(dl, "Database", h.database.reachable ? "reachable" : "unreachable: " + h.database.error, { id: "health-database", class: h.database.reachable ? "ok" : "bad" });
    fact(dl, "Projector lag (max)", lagText(h.maxProjectorLag) + " offsets", { id: "health-projector-lag" });
    fact(dl, "Auditor lag (max)", h.audit.positioned ? lagText(h.audit.maxLag) + " offsets" : "unknown: group " + h.audit.group + " has no committed offset", { id: "health-auditor-lag" });
    const v = verificationFact(h.audit);
    fact(dl, "Audit verification", v.node, { id: "health-verification", class: v.cls, "data-state": h.audit.verification });
    fact(dl, "This writer", h.self || "(no advertise URL)");
    const answered = new Map(h.peers.map((p) => [p.addr, p]));
    $("writers-table").tBodies[0].replaceChildren(...h.writers.map((w) => {
      const p = answered.get(w.addr);
      return el("tr", { "data-writer": w.addr },
        el("th", { scope: "row" }, (w.addr || "(no address)") + (w.self ? " (this one)" : "")),
        el("td", {}, w.id || "—"),
        el("td", { class: "parts" }, w.partitions.join(", ")),
        el("td", {}, p ? (p.answered ? "yes" : "no: " + (p.error || "")) : "—"));
    }));
    $("partitions-table").tBodies[0].replaceChildren(...h.partitions.map((p) => el("tr", { "data-partition": p.partition },
      el("th", { scope: "row", class: "num" }, p.partition),
      el("td", {}, p.addr || p.owner || "none"),
      el("td", { class: "num" }, p.epoch === undefined ? "—" : p.epoch),
      el("td", { class: "num" }, lagText(p.end)),
      el("td", { class: "num projector-lag" }, lagText(p.projectorLag)),
      el("td", { class: "num auditor-lag" }, lagText(p.auditorLag)))));
    tick();
  } catch (err) { showError(err); }
}

// ---- Project ----

function openProject(prefix) {
  show("project");
  state.prefix = prefix;
  state.cursors = [""];
  $("project-title").textContent = prefix;
  $("keys-search").value = state.search;
  $("keys-purpose").value = state.purpose;
  $("keys-type").value = state.type;
  $("feed").replaceChildren();
  refreshProject();
  watchProject();
}

function keysPath() {
  const cursor = state.cursors[state.cursors.length - 1];
  let p = "/ui/api/keys?prefix=" + encodeURIComponent(state.prefix + state.search);
  if (state.purpose) p += "&purpose=" + encodeURIComponent(state.purpose);
  if (state.type) p += "&type=" + encodeURIComponent(state.type);
  return p + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
}

async function refreshProject() {
  const prefix = state.prefix;
  try {
    const [keys, conflicts] = await Promise.all([
      getJSON(keysPath()),
      getJSON("/ui/api/conflicts?prefix=" + encodeURIComponent(prefix)),
    ]);
    if (prefix !== state.prefix) return;
    skew(keys.serverTime);
    renderKeys(keys);
    renderConflicts(conflicts);
    $("conflicts-writers").textContent = writersText(conflicts.writers || []);
    showError(null);
  } catch (err) { showError(err); }
}

// holderText says a lock or leader pool is held, by which principal,
// with its fencing token; never the holder's label (a user's string).
function holderText(k) {
  if (!k.held) return k.purpose === "lock" || k.purpose === "leader" ? "—" : "";
  return "held by " + (k.holderPrincipal || "?") + " #" + k.token;
}

function sizeText(k) {
  if (k.size === undefined) return "";
  return k.inFlight ? k.size + " (" + k.inFlight + " in flight)" : String(k.size);
}

function renderKeys(a) {
  const rows = a.keys.map((k) => el("tr", { "data-key": k.key },
    el("td", { class: "key" }, el("a", { href: keyHref(k.key) }, k.key.slice(state.prefix.length))),
    el("td", { class: "purpose" }, el("span", { class: "purpose purpose-" + (k.purpose || "plain") }, k.purpose || "plain")),
    el("td", { class: "version num" }, k.version),
    el("td", { class: "writer" }, k.lastWriter),
    el("td", { class: "age num", "data-since": k.updatedAt }, ""),
    el("td", { class: "ttl num", "data-until": k.expiresAt || "" }, ""),
    el("td", { class: "holder" }, holderText(k)),
    el("td", { class: "size num" }, sizeText(k)),
    el("td", { class: "fingerprint" }, k.fingerprint || "")));
  $("keys").tBodies[0].replaceChildren(...rows);
  state.next = a.truncated ? a.nextCursor || "" : "";
  $("keys-none").hidden = a.keys.length > 0;
  $("keys-none").textContent = state.next ? "No match among the keys read so far: Next reads on." : "No key here.";
  $("keys-page").textContent = "page " + state.cursors.length + " · " + a.keys.length + (a.keys.length === 1 ? " key" : " keys") + (state.next ? "" : " · end");
  $("keys-page").dataset.end = state.next ? "false" : "true";
  $("keys-first").disabled = $("keys-prev").disabled = state.cursors.length === 1;
  $("keys-next").disabled = !state.next;
  tick();
}

function renderConflicts(c) {
  const w = 600, h = 120, pad = 18, bw = (w - 2 * pad) / c.minutes.length;
  const max = Math.max(1, ...c.minutes.map((m) => m.count));
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("id", "conflicts-svg");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "conflicts per minute over the last hour: total " + c.total);
  svg.setAttribute("data-total", c.total);
  c.minutes.forEach((m, i) => {
    if (m.count === 0) return;
    const r = document.createElementNS(ns, "rect");
    const bh = (h - 2 * pad) * m.count / max;
    r.setAttribute("x", pad + i * bw + 1);
    r.setAttribute("y", h - pad - bh);
    r.setAttribute("width", Math.max(1, bw - 2));
    r.setAttribute("height", bh);
    r.setAttribute("data-count", m.count);
    const t = document.createElementNS(ns, "title");
    t.textContent = new Date(m.start).toLocaleTimeString() + ": " + m.count;
    r.append(t);
    svg.append(r);
  });
  const line = document.createElementNS(ns, "line");
  line.setAttribute("x1", pad); line.setAttribute("x2", w - pad);
  line.setAttribute("y1", h - pad); line.setAttribute("y2", h - pad);
  svg.append(line);
  const caption = el("p", { class: "chart-caption muted" },
    el("span", {}, "−60 min"), el("span", {}, c.total ? "max " + max + "/min · total " + c.total : "no conflict in the last hour"), el("span", {}, "now"));
  $("conflicts-chart").replaceChildren(svg, caption);
}

// watchProject follows the project's changes (metadata and fingerprints
// only): each lands in the feed and reloads the rows, at most every
// 300 ms.
function watchProject() {
  const src = new EventSource("/ui/api/watch?prefix=" + encodeURIComponent(state.prefix));
  state.source = src;
  live(src, $("live-status"));
  src.addEventListener("change", (m) => {
    const e = JSON.parse(m.data);
    const li = el("li", { "data-key": e.key }, el("a", { href: keyHref(e.key) }, e.key.slice(state.prefix.length) + "@" + e.version),
      "  " + e.kind + "/" + e.op + (e.elementOp ? "/" + e.elementOp : "") + "  by " + e.principal + (e.fingerprint ? "  fp " + e.fingerprint : ""));
    $("feed").prepend(li);
    while ($("feed").children.length > 100) $("feed").lastChild.remove();
    clearTimeout(state.reload);
    state.reload = setTimeout(refreshProject, 300);
  });
}

function live(src, status) {
  src.onopen = () => { status.textContent = "live: following changes"; status.dataset.live = "open"; };
  src.onerror = () => { status.textContent = "live: reconnecting…"; status.dataset.live = "reconnecting"; };
}

// ---- Key ----

async function openKey(key) {
  show("key");
  state.key = key;
  state.row = null;
  const project = projectOf(key);
  $("key-project").textContent = project.split("/")[1] + "/" + project.split("/")[3];
  $("key-project").setAttribute("href", projectHref(project));
  $("key-title").textContent = key.slice(project.length);
  $("at-result").hidden = true;
  $("history").tBodies[0].replaceChildren();
  await loadKeyRow();
  await loadHistory();
  watchKey();
}

async function loadKeyRow() {
  const dl = $("key-facts");
  try {
    const k = await getJSON("/ui/api/key?key=" + encodeURIComponent(state.key));
    state.row = k;
    dl.replaceChildren();
    fact(dl, "Key", k.key);
    fact(dl, "Purpose", k.purpose || "plain");
    fact(dl, "Version", k.version, { id: "key-version" });
    fact(dl, "Last writer", k.lastWriter);
    fact(dl, "Updated", ago(k.updatedAt));
    if (k.expiresAt) fact(dl, k.held ? "Lease ends" : "Expires", new Date(k.expiresAt).toISOString(), { id: "key-expires" });
    if (holderText(k)) fact(dl, k.purpose === "leader" ? "Leader" : "Holder", holderText(k), { id: "key-holder" });
    if (sizeText(k)) fact(dl, "Size", sizeText(k));
    if (k.fingerprint) fact(dl, "Fingerprint", k.fingerprint, { id: "key-fingerprint", class: "fingerprint" });
    tick();
  } catch (err) {
    dl.replaceChildren();
    fact(dl, "State", String(err.message || err), { id: "key-version" });
  }
}

function versionRow(v) {
  return el("tr", { "data-version": v.version },
    el("td", { class: "num" }, v.version),
    el("td", {}, v.kind),
    el("td", {}, v.op + (v.elementOp ? " (" + v.elementOp + ")" : "")),
    el("td", {}, v.principal),
    el("td", {}, new Date(v.ts || v.time).toISOString()),
    el("td", { class: "fingerprint" }, v.fingerprint || ""));
}

async function loadHistory() {
  const v = state.row ? state.row.version : 1;
  try {
    const h = await getJSON("/ui/api/history?key=" + encodeURIComponent(state.key) + "&fromVersion=" + Math.max(1, v - 49));
    $("history").tBodies[0].replaceChildren(...h.versions.slice().reverse().map(versionRow));
  } catch (err) { showError(err); }
}

// watchKey follows the key: each event (metadata and fingerprint only)
// is added on top of the history at once, then the row is reloaded.
function watchKey() {
  const src = new EventSource("/ui/api/watch?key=" + encodeURIComponent(state.key));
  state.source = src;
  live(src, $("key-live"));
  src.addEventListener("change", (m) => {
    const e = JSON.parse(m.data);
    if (e.key !== state.key) return;
    const body = $("history").tBodies[0];
    if (!body.querySelector('tr[data-version="' + e.version + '"]')) {
      const tr = versionRow(e);
      tr.classList.add("flash");
      body.prepend(tr);
    }
    clearTimeout(state.reload);
    state.reload = setTimeout(loadKeyRow, 300);
  });
}

// atText is the at parameter of the "at" input: a position or an RFC
// 3339 time as given, a time without a zone taken as UTC.
function atText(v) {
  v = v.trim();
  if (/^\d{4}-\d\d-\d\dT\d\d:\d\d$/.test(v)) return v + ":00Z";
  if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?$/.test(v)) return v + "Z";
  return v;
}

// showAt shows the key's state at the input's point (GET /ui/api/at): its
// version, purpose and value's fingerprint then, compared with now's, or
// "absent"; never the value.
async function showAt(ev) {
  ev.preventDefault();
  const out = $("at-result");
  try {
    const a = await getJSON("/ui/api/at?key=" + encodeURIComponent(state.key) + "&at=" + encodeURIComponent(atText($("at-input").value)));
    let text = "at " + a.at + " (" + a.position + "): ";
    if (a.absent) text += "absent";
    else {
      text += "version " + a.version + (a.purpose ? ", " + a.purpose : "");
      const cur = state.row && state.row.fingerprint;
      if (a.fingerprint) text += ", fingerprint " + a.fingerprint + (a.fingerprint === cur ? " (same value as now)" : " (value differs from now)");
    }
    out.textContent = text;
    out.dataset.absent = a.absent ? "true" : "false";
  } catch (err) { out.textContent = "at: " + err.message; out.dataset.absent = ""; }
  out.hidden = false;
}

// tick renders the ages and TTLs left, every second.
function tick() {
  for (const e of document.querySelectorAll("[data-since]")) {
    e.textContent = duration((now() - Date.parse(e.dataset.since)) / 1000) + " ago";
  }
  for (const td of document.querySelectorAll("td.ttl")) {
    td.textContent = td.dataset.until ? duration((Date.parse(td.dataset.until) - now()) / 1000) : "∞";
  }
}

function searchSubmit(ev) {
  ev.preventDefault();
  let s = $("keys-search").value.trim();
  if (s.startsWith(state.prefix)) s = s.slice(state.prefix.length);
  state.search = s.replace(/^\/+/, "");
  state.purpose = $("keys-purpose").value.trim();
  state.type = $("keys-type").value;
  state.cursors = [""];
  refreshProject();
}

async function start() {
  const me = await getJSON("/ui/api/me");
  state.me = me;
  $("whoami").textContent = me.principal;
  $("nav-health").hidden = !me.anyTenant;
  $("project-by-name").hidden = !(me.tenants.length > 0 || me.anyTenant);
  if (me.tenants.length > 0) $("project-name").value = me.tenants[0] + "/";
  route();
}

document.addEventListener("DOMContentLoaded", () => {
  $("at-form").addEventListener("submit", showAt);
  $("keys-search-form").addEventListener("submit", searchSubmit);
  $("keys-first").addEventListener("click", () => { state.cursors = [""]; refreshProject(); });
  $("keys-prev").addEventListener("click", () => { if (state.cursors.length > 1) { state.cursors.pop(); refreshProject(); } });
  $("keys-next").addEventListener("click", () => { if (state.next) { state.cursors.push(state.next); refreshProject(); } });
  $("projects-more").addEventListener("click", () => loadOverview(false));
  $("project-by-name").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const [tenant, project] = $("project-name").value.trim().split("/");
    if (tenant && project) location.hash = projectHref("tenant/" + tenant + "/project/" + project + "/");
  });
  window.addEventListener("hashchange", () => {
    if (!location.hash.startsWith("#/p/")) { state.search = ""; state.purpose = ""; state.type = ""; }
    route();
  });
  start().catch(showError);
  setInterval(tick, 1000);
});
