// The reports, /reports (pit users): per table and gaming day what `lammer records report`
// prints (the server's /api/reports gives the same report, its figures already written as
// the command writes them), and per table a chart of each paying row: the hits against
// the par sheet's expectation and the band an honest table stays in 95 % of the time,
// drawn here as SVG from the figures the server sends (no chart library, nothing fetched).
// The day, the table and the area are chosen in the form and kept in the address.

import { h } from "./dom.js";
import { alarmWords } from "./staff_text.js";

// SVG's namespace as the HTML parser gives it to an <svg> (no address written out: the
// pages name nothing outside this server, tests/display/test_web_server.py).
const SVG = (() => {
  const box = document.createElement("div");
  box.innerHTML = "<svg></svg>";
  return box.firstChild.namespaceURI;
})();
const el = (id) => document.getElementById(id);
const count = (n) => Number(n).toLocaleString("en-US");
// A contract time as the command prints it (the floor's time zone: the server's session).
const when = (iso) => (iso ? iso.slice(0, 19).replace("T", " ") : "");

function say(text, cls = "") {
  el("message").className = cls;
  el("message").textContent = text;
}

// An SVG element with attributes (text goes in as text, never markup).
function s(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// One table's chart: a row per bet and paying row, log scale (0 drawn at 0.5); the band
// from its 2.5 % to its 97.5 % quantile, a tick at the expected count, a dot at the hits
// (outside the band: marked, and said in the row's title).
export function chart(table, points, width) {
  const rowH = 26;
  const label = Math.min(340, Math.max(160, Math.round(width * 0.36)));
  const right = 24;
  const top = 30;
  const height = top + points.length * rowH + 36;
  const high = Math.max(10, ...points.map((p) => Math.max(p.high, p.observed, p.expected)));
  const lo = Math.log10(0.5);
  const hi = Math.log10(high * 1.5);
  const plot = Math.max(60, width - label - right);
  const x = (v) => label + ((Math.log10(Math.max(v, 0.5)) - lo) / (hi - lo)) * plot;
  const ticks = [];
  for (let d = 1; d <= high * 1.5; d *= 10) ticks.push(d);
  const titleId = `chart-title-${table.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const off = points.filter((p) => p.observed < p.low || p.observed > p.high).length;
  return s("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-labelledby": titleId, dataset: { table, rows: points.length, off } },
  s("title", { id: titleId }, `Table ${table}: hits of each paying row against the par sheet, `
    + `with the 95 % band of an honest table; ${off} of ${points.length} rows outside it`),
  s("text", { x: label, y: 18, class: "axis" }, "hits (log scale; 0 drawn at 0.5): band 95 %, | expected, \u25cf observed"),
  ticks.map((t) => [
    s("line", { x1: x(t), x2: x(t), y1: top - 4, y2: top + points.length * rowH, class: "grid" }),
    s("text", { x: x(t), y: top + points.length * rowH + 20, class: "axis", "text-anchor": "middle" }, count(t)),
  ]),
  points.map((p, i) => {
    const y = top + i * rowH + rowH / 2;
    const outside = p.observed < p.low || p.observed > p.high;
    return s("g", { class: outside ? "point off" : "point",
      dataset: { label: p.label, observed: p.observed, expected: p.expected, low: p.low, high: p.high } },
    s("title", {}, `${p.label}: ${count(p.observed)} hits, ${p.expected.toFixed(2)} expected, 95 % band ${count(p.low)} to ${count(p.high)}${outside ? " (outside)" : ""}`),
    s("text", { x: label - 8, y: y + 5, "text-anchor": "end", class: "label" }, p.label),
    s("rect", { x: x(p.low), y: y - 7, width: Math.max(2, x(p.high) - x(p.low)), height: 14, class: "band" }),
    s("line", { x1: x(p.expected), x2: x(p.expected), y1: y - 11, y2: y + 11, class: "expected" }),
    s("circle", { cx: x(p.observed), cy: y, r: 6, class: "observed" }));
  }));
}

function summary(day) {
  const craps = day.rolls && !day.rounds;
  const parts = craps ? [] : [`${count(day.rounds)} rounds`];
  if (day.not_settled) parts.push(`${count(day.not_settled)} void or flagged`);
  const mix = Object.entries(day.hands).map(([hands, n]) => `${hands}: ${count(n)}`).join(", ");
  if (mix) parts.push(`hands per round ${day.hands_per_round_text} (${mix})`);
  if (day.rolls || day.rolls_declared_invalid) {
    parts.push(`${count(day.rolls)} rolls counted, ${day.rolls_declared_invalid} declared invalid`);
  }
  return parts.join("; ");
}

function betTable(day, bet) {
  const unit = day.rolls && !day.rounds ? "settlements" : "rounds";
  return h("div.bet-report", { dataset: { bet: bet.bet } },
    h("table.report", {},
      h("caption", {}, `${bet.bet}: ${count(bet.rounds)} ${unit}`),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "row"), h("th.n", { scope: "col" }, "hits"),
        h("th.n", { scope: "col" }, "expected"), h("th.n", { scope: "col" }, "pays (units)"))),
      h("tbody", {}, bet.rows.map((r) => h("tr", { dataset: { row: r.row, hits: r.hits } },
        h("th", { scope: "row" }, r.row), h("td.n.hits", {}, count(r.hits)),
        h("td.n.expected", {}, r.expected_text), h("td.n.pays", {}, r.pays_units))))),
    h("p.hold", { dataset: { theoretical: bet.theoretical_hold_text, observed: bet.observed_hold_text } },
      `hold: theoretical ${bet.theoretical_hold_text}, observed ${bet.observed_hold_text}`));
}

function listSection(id, title, head, rows, empty) {
  return h(`section.panel.below#${id}`, {}, h("h2", {}, title),
    rows.length ? h("table.report.wide", {},
      h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows)) : h("p.muted", {}, empty));
}

function draw(data) {
  const asked = data.asked;
  el("span").textContent = asked.first === asked.last ? `gaming day ${asked.first}` : `gaming days ${asked.first} to ${asked.last}`;
  el("day").value = asked.first;
  el("table").value = asked.table || "";
  const areas = [["", "every area"], ...data.areas.map((a) => [a, a])];
  el("area").replaceChildren(...areas.map(([v, label]) => h("option", { value: v }, label)));
  el("area").value = asked.area || "";
  const tables = [...new Set([...data.days.map((d) => d.table), ...Object.keys(data.charts)])].sort();
  el("tables").replaceChildren(...tables.map((t) => h("option", { value: t })));
  const where = asked.table ? `table ${asked.table}` : asked.area ? `area ${asked.area}` : "every table";
  say(`${where}; gaming days start at ${asked.day_starts} (${asked.timezone})`, "muted");
  const sections = tables.map((table) => {
    const days = data.days.filter((d) => d.table === table);
    return h("section.panel.below.table-report", { dataset: { table } },
      h("h2", {}, `Table ${table}`),
      days.map((day) => h("div.day", { dataset: { day: day.day } },
        h("h3", {}, `Gaming day ${day.day}${day.game ? ` (${day.game})` : ""}`),
        h("p.summary", {}, summary(day)),
        h("div.bets-report", {}, day.bets.map((bet) => betTable(day, bet))))),
      data.charts[table] && data.charts[table].length
        ? h("figure.chart-box", { dataset: { table } },
          h("figcaption", {}, "Each paying row over these days: the band holds 95 % of an honest table's counts (binomial, the par sheet's chance); a dot outside it is marked."))
        : h("p.muted", {}, "No row with an expected count to chart."));
  });
  el("main").replaceChildren(...[
    tables.length ? h("div", {}, sections) : h("p.headline.muted", {}, "No rounds recorded."),
    listSection("big-hits", `Big hits (${data.big_hit} to 1 or more)`, ["time", "table", "round", "bet", "row", "pays", "seat", "cards"],
      data.big_hits.map((b) => h("tr", { dataset: { table: b.table, seq: b.seq } }, h("td", {}, when(b.ts)), h("td.id", {}, b.table),
        h("td", {}, String(b.round_id)), h("td", {}, b.bet), h("td", {}, b.row), h("td", {}, `${b.pays} to 1`),
        h("td", {}, b.seat || ""), h("td", {}, b.cards.join(" ")))), "none"),
    listSection("decisions", "Decisions", ["time", "table", "decision", "details", "operator", "status"],
      data.decisions.map((d) => h("tr", { dataset: { table: d.table, seq: d.seq } }, h("td", {}, when(d.ts)), h("td.id", {}, d.table),
        h("td", {}, d.name), h("td", {}, Object.keys(d.details).sort().map((k) => `${k}=${d.details[k]}`).join(" ")),
        h("td", {}, d.operator || "unknown operator"), h("td", {}, d.status + (d.error ? ` (${d.error})` : "")))), "none"),
    listSection("alarms", "Alarms", ["table", "alarm", "message", "from", "to", "acknowledged"],
      data.alarms.map((a) => h("tr", { dataset: { table: a.table, code: a.code } }, h("td.id", {}, a.table),
        h("td.alarm", { title: a.code }, alarmWords(a.code)),
        h("td", {}, a.message), h("td", {}, when(a.since)), h("td", {}, a.ended ? when(a.ended) : "still active"),
        h("td", {}, a.acknowledged_by ? `by ${a.acknowledged_by} at ${when(a.acknowledged_at).slice(11)}` : "not acknowledged"))), "none"),
    listSection("availability", "Availability (as received)", ["time", "table", "status"],
      data.availability.map((a) => h("tr", {}, h("td", {}, when(a.received)), h("td.id", {}, a.table), h("td", {}, a.status))), "no change"),
    data.gaps.length ? listSection("gaps", "Gaps (seqs a table could not resend)", ["table", "seqs", "reason"],
      data.gaps.map((g) => h("tr", {}, h("td.id", {}, g.table), h("td", {}, `${g.from_seq}..${g.to_seq}`), h("td", {}, g.reason))), "") : null,
  ].filter(Boolean)); // replaceChildren(null) would write "null"
  // The charts at the width their box got (beside the tables on a wide screen).
  for (const box of document.querySelectorAll("figure.chart-box")) {
    box.prepend(chart(box.dataset.table, data.charts[box.dataset.table], Math.max(300, box.clientWidth)));
  }
  document.body.dataset.loaded = "1";
}

let shown = null;

async function load() {
  say("Loading the report\u2026", "muted");
  let response;
  try {
    response = await fetch(`/api/reports${location.search}`, { credentials: "same-origin" });
  } catch {
    say("The server could not be reached.", "lose");
    return;
  }
  if (response.status === 401) {
    location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
    return;
  }
  const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) {
    el("main").replaceChildren(h("p.headline.lose#unavailable", {}, data.error));
    say("");
    document.body.dataset.loaded = "error";
    return;
  }
  shown = data;
  draw(data);
}

fetch("/api/session", { credentials: "same-origin" }).then((r) => r.json()).then((info) => {
  el("who").textContent = info.user ? `${info.user} (${(info.roles || []).join(", ")})` : "";
});
let resized = null;
window.addEventListener("resize", () => {
  clearTimeout(resized);
  resized = setTimeout(() => shown && draw(shown), 100);
});
load();
