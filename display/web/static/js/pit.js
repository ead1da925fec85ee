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

function tableCard(feed, t) {
  const state = t.topics.get("state");
  const info = t.topics.get("info");
  const alarms = alarmsOf(t);
  const closed = closedReason(feed, t);
  const cls = closed ? ".offline" : alarms.length ? ".alarmed" : "";
  const devices = state ? Object.entries(state.devices).map(([name, d]) =>
    `${name}: ${d.connected ? "connected" : "NOT CONNECTED"}${d.status ? ", " + d.status : ""}${d.mode ? ", mode " + d.mode : ""}`) : [];
  return h(`div.tablecard${cls}`, { dataset: { table: t.id } },
    h("h2", {}, t.id, h("span.muted", {}, GAMES[(state || info || {}).game] || ""),
      h(`span${closed ? ".lose" : ".win"}`, { dataset: { availability: t.availability || "unknown" } },
        closed ? (t.availability === "offline" ? "offline" : "closed") : "online")),
    h("div.kv", {},
      h("span.muted", {}, "devices"), h("span", {}, devices.join(" \u00b7 ") || "-"),
      h("span.muted", {}, "last result"), h("span.last", {}, lastResult(t)),
      h("span.muted", {}, "version"), h("span", {}, info ? `lammer ${info.version}` : "-")),
    alarms.map((a) => h("div.alarm", { dataset: { code: a.code } },
      `\u26a0 ${a.code}${a.stops_payouts ? " (payouts paused)" : ""}: ${a.message} \u2014 for ${age(a.since)}`)),
    h("div", {}, h("a", { href: `/table/${encodeURIComponent(t.id)}` }, "player display"), " \u00b7 ",
      h("a", { href: `/stick/${encodeURIComponent(t.id)}` }, "stickperson")));
}

function render(feed) {
  const tables = [...feed.store.tables.values()].sort((a, b) => a.id.localeCompare(b.id));
  const link = !feed.open ? "no connection to the server" : feed.broker ? "broker connected" : "broker unreachable";
  document.getElementById("top").replaceChildren(
    h("span.title", {}, "Pit"),
    h("span.sub", {}, `${tables.length} table${tables.length === 1 ? "" : "s"}`),
    h("span.right", {}, h(`span${feed.broker && feed.open ? ".win" : ".lose"}#link`, {}, link),
      feed.dropped ? h("span.warn", {}, ` \u00b7 ${feed.dropped} bad payloads dropped`) : ""));
  document.getElementById("main").replaceChildren(
    tables.length ? h("div.grid", {}, tables.map((t) => tableCard(feed, t)))
      : h("div.headline.muted", {}, "No table has published yet"));
  document.getElementById("version").textContent = feed.server ? `web ${feed.server}` : "";
}

const feed = new Feed(null, render);
window.lammerFeed = feed;
setInterval(() => render(feed), 5000); // alarm ages
