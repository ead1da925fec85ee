// The pit view, /pit: every table on the broker at once, for a supervisor.

import { Feed, latest, alarmsOf } from "./feed.js";
import { h, odds, age, GAMES, BETS } from "./dom.js";
import { closedReason } from "./chrome.js";

function lastResult(t) {
  const m = latest(t, "cover_all/result", "bust_bonus/result", "craps/result", "craps/roll");
  if (!m) return "none yet";
  if ("bet" in m) return `roll ${m.roll_id}: ${BETS[m.bet]} ${m.outcome}${m.pays ? " " + odds(m.pays) : ""}`;
  if ("dice" in m) return `roll ${m.roll_id}: ${m.dice.join("+")} ${m.status}${m.reason ? " (" + m.reason + ")" : ""}`;
  const what = m.outcome === "win" && m.highest ? `${m.highest.hand} ${odds(m.pays)}`
    : m.outcome === "win" ? `win ${odds(m.pays)}` : m.outcome;
  return `round ${m.round_id}: ${what}${m.reason ? " \u2014 " + m.reason : ""}`;
}

// hh:mm of a Unix time in seconds (the server's clock: when it learned it).
function hhmm(seconds) {
  const d = new Date(seconds * 1000);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

// The floor bridge carrying a table (web.toml's floor_controllers), or null.
function bridgeOf(feed, id) {
  for (const b of feed.store.bridges.values()) {
    if (b.tables.includes(id)) return b;
  }
  return null;
}

// Why a table is unreachable on the floor: its controller's bridge is lost (its will).
function unreachable(feed, t) {
  const b = bridgeOf(feed, t.id);
  return b && !b.connected ? `controller ${b.controller} unreachable since ${hhmm(b.since)}` : null;
}

function tableCard(feed, t) {
  const state = t.topics.get("state");
  const info = t.topics.get("info");
  const alarms = alarmsOf(t);
  const lost = unreachable(feed, t);
  const closed = lost || closedReason(feed, t);
  const cls = closed ? ".offline" : alarms.length ? ".alarmed" : "";
  const devices = state ? Object.entries(state.devices).map(([name, d]) =>
    `${name}: ${d.connected ? "connected" : "NOT CONNECTED"}${d.status ? ", " + d.status : ""}${d.mode ? ", mode " + d.mode : ""}`) : [];
  return h(`div.tablecard${cls}`, { dataset: { table: t.id } },
    h("h2", {}, t.id, h("span.muted", {}, GAMES[(state || info || {}).game] || ""),
      h(`span${closed ? ".lose" : ".win"}`, { dataset: { availability: t.availability || "unknown" } },
        lost ? "unreachable" : closed ? (t.availability === "offline" ? "offline" : "closed") : "online")),
    lost ? h("div.alarm.unreachable", { dataset: { unreachable: "1" } }, `\u26a0 ${lost}`) : null,
    h("div.kv", {},
      h("span.muted", {}, "devices"), h("span", {}, devices.join(" \u00b7 ") || "-"),
      h("span.muted", {}, "last result"), h("span.last", {}, lastResult(t)),
      h("span.muted", {}, "version"), h("span", {}, info ? `lammer ${info.version}` : "-")),
    alarms.map((a) => h("div.alarm", { dataset: { code: a.code } },
      `\u26a0 ${a.code}${a.stops_payouts ? " (payouts paused)" : ""}: ${a.message} \u2014 for ${age(a.since)}`)),
    // What the server's feed gave up on: messages of the table that will not come.
    t.gaps.map((g) => h("div.warn.gap", { dataset: { from: g.from_seq, to: g.to_seq, reason: g.reason } },
      `messages lost: seq ${g.from_seq}\u2013${g.to_seq} will not come (${g.reason}) at ${hhmm(g.at)}`)),
    h("div", {}, h("a", { href: `/table/${encodeURIComponent(t.id)}` }, "player display"), " \u00b7 ",
      h("a", { href: `/stick/${encodeURIComponent(t.id)}` }, "stickperson")));
}

// The filters (pit.html): an area of web.toml's [areas] (or the tables in none), and an
// alarm (any, or one code). They are kept in the address (?area=...&alarm=...), so a
// screen can be bookmarked to its pit, and the page is drawn again when they change.
const OUTSIDE = "\u0000outside";
const params = new URLSearchParams(location.search);
const filter = { area: params.get("area") || "", alarm: params.get("alarm") || "" };

function areaOf(feed, id) {
  for (const [name, ids] of Object.entries(feed.areas)) {
    if (ids.includes(id)) return name;
  }
  return OUTSIDE;
}

function keep(feed, t) {
  if (filter.area && areaOf(feed, t.id) !== filter.area) return false;
  if (!filter.alarm) return true;
  const alarms = alarmsOf(t);
  if (filter.alarm === "*") return alarms.length > 0 || Boolean(unreachable(feed, t) || closedReason(feed, t));
  return alarms.some((a) => a.code === filter.alarm);
}

// Put the options in the selects (only when they change: an open select stays open).
function options(select, wanted, chosen) {
  const have = [...select.options].map((o) => o.value + "=" + o.textContent).join("|");
  const want = wanted.map(([v, label]) => v + "=" + label).join("|");
  if (have !== want) {
    select.replaceChildren(...wanted.map(([v, label]) => h("option", { value: v }, label)));
  }
  select.value = wanted.some(([v]) => v === chosen) ? chosen : "";
}

function drawFilters(feed, tables) {
  const areas = [["", "every area"], ...Object.keys(feed.areas).map((a) => [a, a])];
  if (tables.some((t) => areaOf(feed, t.id) === OUTSIDE) && Object.keys(feed.areas).length) {
    areas.push([OUTSIDE, "in no area"]);
  }
  options(document.getElementById("area"), areas, filter.area);
  const codes = [...new Set(tables.flatMap((t) => alarmsOf(t).map((a) => a.code)))].sort();
  if (filter.alarm && filter.alarm !== "*" && !codes.includes(filter.alarm)) codes.push(filter.alarm);
  options(document.getElementById("alarm"),
    [["", "every table"], ["*", "with an alarm, or closed"], ...codes.map((c) => [c, c])], filter.alarm);
}

function render(feed) {
  const tables = [...feed.store.tables.values()].sort((a, b) => a.id.localeCompare(b.id));
  const link = !feed.open ? "no connection to the server" : feed.broker ? "broker connected" : "broker unreachable";
  const alarmed = tables.filter((t) => alarmsOf(t).length).length;
  const closed = tables.filter((t) => unreachable(feed, t) || closedReason(feed, t)).length;
  const lostBridges = [...feed.store.bridges.values()].filter((b) => !b.connected);
  document.getElementById("top").replaceChildren(
    h("span.title", {}, "Pit"),
    h("span.sub#seen", { dataset: { tables: tables.length, alarmed, closed } },
      `${tables.length} table${tables.length === 1 ? "" : "s"} seen \u00b7 ${alarmed} with alarms \u00b7 ${closed} closed`),
    h("span.right", {}, h(`span${feed.broker && feed.open ? ".win" : ".lose"}#link`, {}, link),
      feed.dropped ? h("span.warn", {}, ` \u00b7 ${feed.dropped} bad payloads dropped`) : "",
      feed.store.bridges.size ? h(`span${lostBridges.length ? ".lose" : ".win"}#bridges`,
        { dataset: { lost: lostBridges.map((b) => b.controller).join(",") } },
        ` \u00b7 ${feed.store.bridges.size - lostBridges.length} of ${feed.store.bridges.size} controllers connected`
        + lostBridges.map((b) => ` \u00b7 ${b.controller} lost since ${hhmm(b.since)}`).join("")) : ""));
  drawFilters(feed, tables);
  const shown = tables.filter((t) => keep(feed, t));
  document.getElementById("shown").textContent =
    shown.length === tables.length ? "" : `showing ${shown.length} of ${tables.length}`;
  // Grouped by area, in web.toml's order, then the tables in none.
  const groups = [...Object.keys(feed.areas), OUTSIDE]
    .map((name) => [name, shown.filter((t) => areaOf(feed, t.id) === name)])
    .filter(([, list]) => list.length);
  const named = Object.keys(feed.areas).length > 0;
  document.getElementById("main").replaceChildren(
    !tables.length ? h("div.headline.muted", {}, "No table has published yet")
      : !shown.length ? h("div.headline.muted", {}, "No table matches the filters")
      : h("div", {}, groups.map(([name, list]) => h("section.area", { dataset: { area: name === OUTSIDE ? "" : name } },
        named ? h("h1", {}, name === OUTSIDE ? "In no area" : name) : null,
        h("div.grid", {}, list.map((t) => tableCard(feed, t)))))));
  document.getElementById("version").textContent = feed.server ? `web ${feed.server}` : "";
}

const feed = new Feed(null, render);
window.lammerFeed = feed;
for (const key of ["area", "alarm"]) {
  document.getElementById(key).addEventListener("change", (event) => {
    filter[key] = event.target.value;
    const query = new URLSearchParams();
    if (filter.area) query.set("area", filter.area);
    if (filter.alarm) query.set("alarm", filter.alarm);
    const text = query.toString();
    history.replaceState(null, "", text ? `?${text}` : location.pathname);
    render(feed);
  });
}
setInterval(() => render(feed), 5000); // alarm ages
