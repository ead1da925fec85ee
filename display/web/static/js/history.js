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
// roll instead: {roll, ...}); `empty` what the table says without rows.
export function historyTable(title, columns, rows, empty = "Nothing yet") {
  const key = (r) => (r.roll !== undefined ? { roll: String(r.roll) } : { seq: String(r.seq) });
  const body = rows.length
    ? rows.map((r) => h(`tr${r.win ? ".win" : ""}`, { dataset: key(r) }, r.cells.map((c) => h("td", {}, c))))
    : [h("tr", {}, h("td.muted", { colspan: String(columns.length) }, empty))];
  const el = h("table.history#history-table", {},
    h("caption", {}, title),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, body));
  el.style.setProperty("--rows", "12");
  return el;
}
