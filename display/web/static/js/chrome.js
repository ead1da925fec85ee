// What every page shows around its content: the "table closed" overlay, the banner while
// an alarm stops payouts, and the versions.

import { alarmsOf } from "./feed.js";
import { CLOSED, alarmText } from "./player_text.js";
import { TOPIC } from "./contract.js";

// Why a table is closed, for the staff pages (the player's words are player_text.js's).
export const CLOSED_STAFF = {
  no_server: "no connection to the table's server",
  no_broker: "the table's server cannot reach the broker",
  silent: "nothing heard from the table's server",
  waiting: "waiting for the table",
  offline: "the table is offline",
};

// Why a table cannot be shown as open now (a key of CLOSED_STAFF), or null when it can.
export function closedReason(feed, table) {
  if (!feed.open || !feed.synced) return "no_server";
  if (!feed.broker) return "no_broker";
  if (Date.now() - feed.lastFrame > feed.keepalive * 1000) return "silent";
  if (!table || table.availability === null) return "waiting";
  if (table.availability !== "online") return "offline";
  return null;
}

// The "Table closed" overlay; `player` pages say why in the player's words.
export function overlay(reason, player = false) {
  const el = document.getElementById("overlay");
  el.classList.toggle("shown", reason !== null);
  el.dataset.reason = reason || "";
  el.querySelector(".why").textContent = reason ? (player ? CLOSED : CLOSED_STAFF)[reason] : "";
}

// The alarms that stop payouts (docs/reference/mqtt.md: stops_payouts).
export function pausing(table) {
  return table ? alarmsOf(table).filter((a) => a.stops_payouts) : [];
}

// The banner while payouts are paused: one plain sentence on a player page, each alarm's
// code and message on a staff page.
export function banner(table, player = false) {
  const el = document.getElementById("banner");
  const alarms = pausing(table);
  el.classList.toggle("shown", alarms.length > 0);
  el.dataset.codes = alarms.map((a) => a.code).join(" ");
  el.textContent = player
    ? [...new Set(alarms.map(alarmText))].join(" \u00b7 ")
    : alarms.map((a) => `Payouts paused: ${a.code}: ${a.message}`).join(" \u00b7 ");
}

export function versionLine(feed, table) {
  const info = table && table.topics.get(TOPIC.INFO);
  const parts = [];
  if (info) parts.push(`lammer ${info.version}`, `contract ${info.contract}`);
  if (feed.server) parts.push(`web ${feed.server}`);
  document.getElementById("version").textContent = parts.join(" \u00b7 ");
}
