// What every page shows around its content: the "table closed" overlay, the banner while
// an alarm stops payouts, and the versions.

import { alarmsOf } from "./feed.js";

// Why a table cannot be shown as open now, or null when it can.
export function closedReason(feed, table) {
  if (!feed.open || !feed.synced) return "no connection to the table's server";
  if (!feed.broker) return "the table's server cannot reach the broker";
  if (Date.now() - feed.lastFrame > feed.keepalive * 1000) return "nothing heard from the table's server";
  if (!table || table.availability === null) return "waiting for the table";
  if (table.availability !== "online") return "the table is offline";
  return null;
}

export function overlay(reason) {
  const el = document.getElementById("overlay");
  el.classList.toggle("shown", reason !== null);
  el.querySelector(".why").textContent = reason || "";
}

// The alarms that stop payouts (docs/mqtt.md: stops_payouts).
export function pausing(table) {
  return table ? alarmsOf(table).filter((a) => a.stops_payouts) : [];
}

export function banner(table) {
  const el = document.getElementById("banner");
  const alarms = pausing(table);
  el.classList.toggle("shown", alarms.length > 0);
  el.textContent = alarms.map((a) => `Payouts paused: ${a.message}`).join(" \u00b7 ");
}

export function versionLine(feed, table) {
  const info = table && table.topics.get("info");
  const parts = [];
  if (info) parts.push(`lammer ${info.version}`, `contract ${info.contract}`);
  if (feed.server) parts.push(`web ${feed.server}`);
  document.getElementById("version").textContent = parts.join(" \u00b7 ");
}
