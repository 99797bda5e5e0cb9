// Small DOM helpers. Text always goes in as text (never as HTML), so
// nothing the API returns can become markup.

const svgNS = "http://www.w3.org/2000/svg";

/** el makes an element with attributes and children (strings are text). */
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** svg makes an SVG element with attributes and children. */
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(svgNS, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** $ finds an element by id. */
export const $ = (id) => document.getElementById(id);

/** fill replaces the rows of a table's body. */
export function fillRows(table, rows) {
  $(table).tBodies[0].replaceChildren(...rows);
}

/** row makes a table row of cells (strings or nodes). */
export function row(...cells) {
  return el("tr", null, ...cells.map((c) => el("td", null, c)));
}

/** show shows or hides an element. */
export function show(id, on) {
  $(id).hidden = !on;
}

/** time formats Unix milliseconds as local date and time. */
export function time(ms) {
  if (!ms) return "never";
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** duration formats milliseconds for people. */
export function duration(ms) {
  if (ms <= 0) return "now";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3600000) return `${(ms / 60000).toFixed(1)} min`;
  return `${(ms / 3600000).toFixed(1)} h`;
}

/** num formats a count with thousands separators. */
export const num = (n) => Number(n).toLocaleString("en-US");
