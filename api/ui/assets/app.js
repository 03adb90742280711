// eskv status page: lists the projects the session may read, pages a
// project's keys, renders /ui/api/... JSON (which never carries a value)
// and follows /ui/api/watch. Every datum is set as text, never as HTML.
"use strict";

// state: the session (me), the project open (prefix) and the search
// under it, the cursors of the keys pages shown so far (the last is the
// page shown; "" the first), the next page's cursor, the projects
// listing's next cursor.
const state = { me: null, prefix: "", search: "", cursors: [""], next: "", projectsCursor: "", serverSkew: 0, source: null, reload: null, selected: "", selectedRow: null };

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
  const parts = [[86400, "d"], [3600, "h"], [60, "m"], [1, "s"]];
  const out = [];
  for (const [n, u] of parts) {
    if (s >= n || (u === "s" && out.length === 0)) { out.push(Math.floor(s / n) + u); s %= n; }
    if (out.length === 2) break;
  }
  return out.join(" ");
}

function now() { return Date.now() + state.serverSkew; }

async function loadMe() {
  const me = await getJSON("/ui/api/me");
  state.me = me;
  $("whoami").textContent = "principal " + me.principal;
  if (me.tenants.length > 0 || me.anyTenant) {
    $("project-by-name").hidden = false;
    if (me.tenants.length > 0) $("project-name").value = me.tenants[0] + "/";
  }
  $("project-open").addEventListener("click", () => {
    const [tenant, project] = $("project-name").value.trim().split("/");
    if (tenant && project) openProject("tenant/" + tenant + "/project/" + project + "/");
  });
  $("projects-more").addEventListener("click", () => loadProjects().catch(showError));
  $("keys-search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    let s = $("keys-search").value.trim();
    if (s.startsWith(state.prefix)) s = s.slice(state.prefix.length);
    state.search = s.replace(/^\/+/, "");
    state.cursors = [""];
    refresh();
  });
  $("keys-prev").addEventListener("click", () => { if (state.cursors.length > 1) { state.cursors.pop(); refresh(); } });
  $("keys-next").addEventListener("click", () => { if (state.next) { state.cursors.push(state.next); refresh(); } });
  await loadProjects();
  const hash = decodeURIComponent(location.hash.slice(1));
  if (hash) openProject(hash);
}

// projectPrefixes are the prefixes the session may open of project p:
// the whole project when a grant covers it, else each part a grant below
// the project names (me.projects).
function projectPrefixes(p) {
  const whole = "tenant/" + p.tenant + "/project/" + p.project + "/";
  const me = state.me;
  if (me.anyTenant || me.tenants.includes(p.tenant) || me.projects.some((g) => g.prefix === whole)) return [whole];
  return me.projects.filter((g) => g.tenant === p.tenant && g.project === p.project).map((g) => g.prefix);
}

// loadProjects appends the next page of the projects the session may
// read (/ui/api/projects: counts of keys, never a value) to the picker.
async function loadProjects() {
  const a = await getJSON("/ui/api/projects?limit=100" + (state.projectsCursor ? "&cursor=" + encodeURIComponent(state.projectsCursor) : ""));
  const list = $("projects");
  for (const p of a.items) {
    for (const prefix of projectPrefixes(p)) {
      const part = prefix.split("/").slice(4).join("/");
      const b = el("button", { type: "button", class: "project", "data-prefix": prefix, "aria-pressed": String(prefix === state.prefix) },
        el("span", { class: "name" }, p.tenant + "/" + p.project + (part ? " (" + part + ")" : "")),
        el("span", { class: "count" }, p.keys + (p.keys === 1 ? " key" : " keys")));
      b.addEventListener("click", () => openProject(prefix));
      list.append(el("li", {}, b));
    }
  }
  state.projectsCursor = a.nextCursor || "";
  $("projects-more").hidden = !a.truncated;
  $("projects-count").textContent = "(" + list.children.length + (a.truncated ? "+" : "") + ")";
  $("projects-none").hidden = list.children.length > 0;
}

function openProject(prefix) {
  state.prefix = prefix;
  state.search = "";
  state.cursors = [""];
  state.selected = "";
  state.selectedRow = null;
  $("keys-search").value = "";
  for (const b of document.querySelectorAll("#projects button.project")) b.setAttribute("aria-pressed", String(b.dataset.prefix === prefix));
  history.replaceState(null, "", "#" + prefix);
  $("project-title").textContent = prefix;
  for (const id of ["summary", "keys-section", "conflicts-section", "feed-section"]) $(id).hidden = false;
  $("history-section").hidden = true;
  $("feed").replaceChildren();
  refresh();
  watch();
}

// keysPath is the page of keys shown: under the project and the search,
// from the last cursor.
function keysPath() {
  const cursor = state.cursors[state.cursors.length - 1];
  return "/ui/api/keys?prefix=" + encodeURIComponent(state.prefix + state.search) + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
}

async function refresh() {
  try {
    const [keys, conflicts] = await Promise.all([
      getJSON(keysPath()),
      getJSON("/ui/api/conflicts?prefix=" + encodeURIComponent(state.prefix)),
    ]);
    state.serverSkew = Date.parse(keys.serverTime) - Date.now();
    renderKeys(keys);
    renderConflicts(conflicts);
    showError(null);
  } catch (err) { showError(err); }
}

function holderText(k) {
  if (!k.holder) return k.purpose === "lock" || k.purpose === "leader" ? "—" : "";
  let s = k.holder;
  if (k.holderPrincipal) s += " (" + k.holderPrincipal + ")";
  return s + " #" + k.token;
}

function sizeText(k) {
  if (k.size === undefined) return "";
  return k.inFlight ? k.size + " (" + k.inFlight + " in flight)" : String(k.size);
}

function renderKeys(a) {
  const body = $("keys").tBodies[0];
  const rows = a.keys.map((k) => {
    const tr = el("tr", { "data-key": k.key },
      el("td", { class: "key" }, k.key.slice(state.prefix.length)),
      el("td", { class: "purpose" }, el("span", { class: "purpose purpose-" + (k.purpose || "plain") }, k.purpose || "plain")),
      el("td", { class: "version num" }, k.version),
      el("td", { class: "writer" }, k.lastWriter),
      el("td", { class: "age num", "data-since": k.updatedAt }, ""),
      el("td", { class: "ttl num", "data-until": k.expiresAt || "" }, ""),
      el("td", { class: "holder" }, holderText(k)),
      el("td", { class: "size num" }, sizeText(k)),
      el("td", { class: "fingerprint" }, k.fingerprint || ""));
    if (k.key === state.selected) { tr.classList.add("selected"); state.selectedRow = k; }
    tr.addEventListener("click", () => openHistory(k));
    return tr;
  });
  body.replaceChildren(...rows);
  state.next = a.truncated ? a.nextCursor || "" : "";
  $("keys-count").textContent = state.search ? "under " + state.search : "";
  $("keys-none").hidden = a.keys.length > 0;
  $("keys-page").textContent = "page " + state.cursors.length + " · " + a.keys.length + (a.keys.length === 1 ? " key" : " keys");
  $("keys-prev").disabled = state.cursors.length === 1;
  $("keys-next").disabled = !state.next;
  tick();
}

// tick renders the ages and TTLs left, every second.
function tick() {
  for (const td of document.querySelectorAll("td.age")) {
    td.textContent = duration((now() - Date.parse(td.dataset.since)) / 1000) + " ago";
  }
  for (const td of document.querySelectorAll("td.ttl")) {
    td.textContent = td.dataset.until ? duration((Date.parse(td.dataset.until) - now()) / 1000) : "∞";
  }
}

function renderConflicts(c) {
  const w = 600, h = 120, pad = 18, bw = (w - 2 * pad) / c.minutes.length;
  const max = Math.max(1, ...c.minutes.map((m) => m.count));
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  svg.setAttribute("id", "conflicts-svg");
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
  const label = (x, y, s, anchor) => {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", x); t.setAttribute("y", y);
    if (anchor) t.setAttribute("text-anchor", anchor);
    t.textContent = s;
    svg.append(t);
  };
  label(pad, h - 4, "−60 min");
  label(w - pad, h - 4, "now", "end");
  label(pad, 12, "max " + max + "/min · total " + c.total);
  $("conflicts-chart").replaceChildren(svg);
}

async function openHistory(k) {
  if (state.selected !== k.key) $("at-result").hidden = true;
  state.selected = k.key;
  state.selectedRow = k;
  for (const tr of $("keys").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.key === k.key);
  const from = Math.max(1, k.version - 49);
  try {
    const h = await getJSON("/ui/api/history?key=" + encodeURIComponent(k.key) + "&fromVersion=" + from);
    $("history-key").textContent = h.key;
    const rows = h.versions.slice().reverse().map((v) => el("tr", { "data-version": v.version },
      el("td", { class: "num" }, v.version),
      el("td", {}, v.kind),
      el("td", {}, v.op + (v.elementOp ? " (" + v.elementOp + ")" : "")),
      el("td", {}, v.principal),
      el("td", {}, new Date(v.ts).toISOString())));
    $("history").tBodies[0].replaceChildren(...rows);
    $("history-section").hidden = false;
  } catch (err) { showError(err); }
}

// atText is the at parameter of the "State at" input: a position or an
// RFC 3339 time as given, a time without a zone taken as UTC.
function atText(v) {
  v = v.trim();
  if (/^\d{4}-\d\d-\d\dT\d\d:\d\d$/.test(v)) return v + ":00Z";
  if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?$/.test(v)) return v + "Z";
  return v;
}

// showAt shows the selected key's state at the input's point (GET
// /ui/api/at): its version and purpose and its value's fingerprint then,
// compared with the row's, or "absent"; never the value.
async function showAt(ev) {
  ev.preventDefault();
  const k = state.selectedRow;
  const out = $("at-result");
  if (!k) return;
  try {
    const a = await getJSON("/ui/api/at?key=" + encodeURIComponent(k.key) + "&at=" + encodeURIComponent(atText($("at-input").value)));
    let text = "at " + a.at + " (" + a.position + "): ";
    if (a.absent) text += "absent";
    else {
      text += "version " + a.version + (a.purpose ? ", " + a.purpose : "");
      if (a.fingerprint) text += ", fingerprint " + a.fingerprint + (a.fingerprint === k.fingerprint ? " (same value as now)" : " (value differs from now)");
    }
    out.textContent = text;
    out.dataset.absent = a.absent ? "true" : "false";
    showError(null);
  } catch (err) { out.textContent = "at: " + err.message; out.dataset.absent = ""; }
  out.hidden = false;
}

// watch follows the project's changes (values stripped by the server):
// each lands in the feed and reloads the rows, at most every 300 ms.
function watch() {
  if (state.source) state.source.close();
  const src = new EventSource("/ui/api/watch?prefix=" + encodeURIComponent(state.prefix));
  state.source = src;
  src.onopen = () => { $("live-status").textContent = "live: following changes"; $("live-status").dataset.live = "open"; };
  src.onerror = () => { $("live-status").textContent = "live: reconnecting…"; $("live-status").dataset.live = "reconnecting"; };
  src.addEventListener("change", (m) => {
    const e = JSON.parse(m.data);
    const li = el("li", { "data-key": e.key }, e.cursor + "  " + e.key.slice(state.prefix.length) + "@" + e.version + "  " + e.kind + "/" + e.op + (e.elementOp ? "/" + e.elementOp : "") + "  by " + e.principal);
    $("feed").prepend(li);
    while ($("feed").children.length > 100) $("feed").lastChild.remove();
    clearTimeout(state.reload);
    state.reload = setTimeout(refresh, 300);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  $("at-form").addEventListener("submit", showAt);
  loadMe().catch(showError);
  setInterval(tick, 1000);
});
