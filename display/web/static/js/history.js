// The history under the current result on the player display: the table's last results
// as the server sent them (display/web/store.py keeps the last 50 of each result topic and
// sends them on connect), newest first, drawn as a table.

import { h } from "./dom.js";

// "14:02" in the kiosk's time zone, from a payload's ts.
export function timeOf(ts) {
  const at = new Date(ts);
  if (Number.isNaN(at.getTime())) return "";
  return at.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" });
}

// rows: [{seq, cells: [text...], win}] newest first (a row of the craps series names its
// roll instead: {roll, ...}); `title` the caption, or a function of how many rows are shown
// (the fit step, fit.js, shows as many as fit at their floor); `empty` what the table says
// without rows; `wraps` the columns whose cells may take two lines when one does not fit
// (the fit step tries one line first; a pay never wraps).
export function historyTable(title, columns, rows, { empty = "Nothing yet", wraps = [] } = {}) {
  const key = (r) => (r.roll !== undefined ? { roll: String(r.roll) } : { seq: String(r.seq) });
  const cell = (c, i) => h(`td${wraps.includes(i) ? ".w" : ""}`, { dataset: { min: "small" } }, c);
  const body = rows.length
    ? rows.map((r) => h(`tr${r.win ? ".win" : ""}`, { dataset: key(r) }, r.cells.map(cell)))
    : [h("tr.empty", {}, h("td.muted", { colspan: String(columns.length), dataset: { min: "small" } }, empty))];
  const captionFor = typeof title === "function" ? title : () => title;
  const el = h("table.history#history-table", { dataset: { rows: String(rows.length), shown: String(rows.length) } },
    h("caption", {}, captionFor(rows.length)),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, body));
  el.captionFor = captionFor;
  return el;
}

// The caption of a history that may show fewer rows than it has.
export function lastShown(title, total) {
  return (shown) => (shown < total ? `${title}: the last ${shown}` : title);
}
