// Small DOM helpers: elements from data (never from HTML text: no injection), times,
// tables and the page's status line.
const SVG_NS = "http://www.w3.org/2000/svg";

// the server's root path (`serve --root-path`, behind a reverse proxy): every link and
// request is made under it
export const ROOT = document.body.dataset.root || "";
export const to = (path) => ROOT + path;

function fill(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function main() {
  return document.getElementById("main");
}

export function setTitle(text) {
  document.title = `${text} · feedledger`;
  const h1 = main().querySelector("h1");
  if (h1) h1.textContent = text;
}

export function status(text, kind) {
  const line = document.getElementById("status");
  if (!line) return;
  line.textContent = text || "";
  line.className = kind === "error" ? "error" : "muted";
  line.hidden = !text;
}

export function fail(error) {
  const where = error && error.problem && error.problem.status ? ` (HTTP ${error.problem.status})` : "";
  status(`${error.message || error}${where}`, "error");
}

// "2026-08-03T06:00:00+00:00" -> "2026-08-03 06:00Z" (UTC, compact, sortable)
export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const text = d.toISOString();
  const secs = text.slice(17, 19) !== "00" ? text.slice(16, 19) : "";
  return `${text.slice(0, 10)} ${text.slice(11, 16)}${secs}Z`;
}

export function timeEl(iso) {
  return iso ? h("time", { datetime: iso, title: iso }, when(iso)) : "—";
}

export function ago(iso) {
  if (!iso) return "—";
  const secs = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (secs < 90) return `${Math.round(secs)} s`;
  if (secs < 5400) return `${Math.round(secs / 60)} min`;
  if (secs < 172800) return `${Math.round(secs / 3600)} h`;
  return `${Math.round(secs / 86400)} days`;
}

export const short = (id) => (id ? String(id).slice(0, 8) : "—");

export function runLink(id) {
  return id ? h("a", { href: to(`/runs/${encodeURIComponent(id)}`), class: "mono", title: id }, short(id)) : "—";
}

export function keyText(key) {
  if (Array.isArray(key)) return key.length === 1 ? String(key[0]) : JSON.stringify(key);
  return String(key);
}

// the key as the entity page's URL takes it (a compound key: its JSON array)
export function keyParam(key) {
  return Array.isArray(key) && key.length === 1 ? String(key[0]) : Array.isArray(key) ? JSON.stringify(key) : String(key);
}

export function entityLink(source, key, label) {
  const href = to(`/sources/${encodeURIComponent(source)}/entities/${encodeURIComponent(keyParam(key))}`);
  return h("a", { href }, label || keyText(key));
}

// columns: [{label, cell(row) -> node|text, num?}]
export function table(columns, rows, attrs) {
  return h(
    "table",
    attrs || {},
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : c.cls }, c.label)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, columns.map((c) => h("td", { class: c.num ? "num" : c.cls }, c.cell(row)))))),
  );
}

export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

export function cards(pairs) {
  return h("div", { class: "cards" }, pairs.map(([label, n]) => h("div", { class: "card" }, h("div", { class: "n" }, String(n)), h("div", { class: "l" }, label))));
}

export function section(title, ...children) {
  return h("section", { "aria-label": title }, h("h2", {}, title), ...children);
}

export function json(value) {
  return JSON.stringify(value, null, 0);
}
