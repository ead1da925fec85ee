// One table for the pit, /pit/<id>: its state now, its last 50 results and the changes of
// its alarms, from the time the server started watching (the server keeps them in memory,
// bounded: contract.js HISTORY). Staff register: codes and reasons shown.

import { Feed, alarmsOf, historyOf, integrityOf } from "./feed.js";
import { h, odds, age, GAMES, BETS } from "./dom.js";
import { closedReason, overlay, banner, versionLine } from "./chrome.js";
import { timeOf } from "./history.js";
import { RESULTS, TOPIC } from "./contract.js";

const tableId = decodeURIComponent(location.pathname.split("/")[2] || "");
document.title = `Pit \u00b7 table ${tableId}`;

// One result as the pit reads it (codes and reasons included).
function resultText(topic, m) {
  switch (topic) {
    case TOPIC.COVER_ALL_RESULT:
      return `round ${m.round_id}: ${m.outcome}${m.highest ? ` ${m.highest.hand} at ${m.highest.position}` : ""}`
        + `${m.pays ? " " + odds(m.pays) : ""}${m.hands ? ` (${m.hands} hands)` : ""}${m.reason ? " \u2014 " + m.reason : ""}`;
    case TOPIC.BUST_BONUS_RESULT:
      return `round ${m.round_id}: ${m.outcome}${m.total !== null ? " total " + m.total : ""}`
        + `${m.pays ? " " + odds(m.pays) : ""}${m.reason ? " \u2014 " + m.reason : ""}`;
    case TOPIC.CRAPS_RESULT:
      return `roll ${m.roll_id}: ${BETS[m.bet]} ${m.outcome}${m.pays ? " " + odds(m.pays) : ""}`;
    default:
      return `roll ${m.roll_id}: ${m.dice.join("+")} ${m.status}${m.reason ? " (" + m.reason + ")" : ""}`;
  }
}

function render(feed) {
  const t = feed.store.tables.get(tableId) || null;
  overlay(closedReason(feed, t));
  banner(t);
  versionLine(feed, t);
  const state = t && t.topics.get(TOPIC.STATE);
  document.getElementById("top").replaceChildren(h("span.title", {}, `Table ${tableId}`),
    h("span.sub", {}, state ? GAMES[state.game] || state.game : ""),
    h("span.right", {}, h("a", { href: "/pit" }, "the pit")));
  if (!t) {
    document.getElementById("main").replaceChildren(h("div.headline.muted", {}, "Nothing heard from this table yet"));
    return;
  }
  const results = RESULTS.flatMap((topic) => historyOf(t, topic).map((m) => [topic, m]))
    .sort(([, a], [, b]) => b.seq - a.seq).slice(0, 50);
  const alarmChanges = historyOf(t, TOPIC.ALARMS);
  // A CHECK waiting for the stickperson, and since when (craps/board pending_roll.since).
  const board = t.topics.get(TOPIC.CRAPS_BOARD);
  const pending = board && board.pending_roll;
  const check = pending ? h("div.warn#pending-check", { dataset: { roll: String(pending.roll_id) } },
    `CHECK roll ${pending.roll_id}: ${pending.reason}${pending.since ? ` \u2014 waiting ${age(pending.since)}, since ${timeOf(pending.since)}` : ""}`
      + `${board.waiting_count ? `; ${board.waiting_count} behind it` : ""}`) : null;
  document.getElementById("main").replaceChildren(
    h("section.panel#now", {}, h("h2", {}, "Alarms now"),
      alarmsOf(t).length || integrityOf(t).length ? h("ul", {}, alarmsOf(t).map((a) => h("li.warn", { dataset: { code: a.code } },
        `${a.code}${a.stops_payouts ? " (payouts paused)" : ""}: ${a.message} \u2014 for ${age(a.since)}`)),
      // The integrity watch's (lammer records): what is off against the par sheet.
      integrityOf(t).map((a) => h("li.warn.integrity", { dataset: { code: "INTEGRITY", bet: a.bet, row: a.row, window: a.window } },
        `INTEGRITY: ${a.message} \u2014 for ${age(a.since)}`)))
        : h("div.muted", {}, "none"), check),
    h("section.panel.below#results", {}, h("h2", {}, `Last ${results.length} results`),
      h("table.log", {}, h("tbody", {}, results.map(([topic, m]) => h("tr", { dataset: { seq: String(m.seq) } },
        h("td", {}, timeOf(m.ts)), h("td", {}, resultText(topic, m))))))),
    h("section.panel.below#alarm-log", {}, h("h2", {}, "Alarm changes"),
      h("table.log", {}, h("tbody", {}, alarmChanges.map((m) => h("tr", { dataset: { seq: String(m.seq) } },
        h("td", {}, timeOf(m.ts)),
        h("td", {}, m.alarms.length ? m.alarms.map((a) => a.code).join(", ") : "all clear")))))));
}

const feed = new Feed(tableId, render);
window.lammerFeed = feed;
setInterval(() => render(feed), 5000); // ages of the alarms and the pending CHECK
