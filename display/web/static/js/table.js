// The player display, /table/<id>: every kiosk shape (app.css chooses the layout from the
// viewport), read from two metres. Four named regions: the pay table, the current round,
// the history, and after `attract` seconds without play the attract view.

import { Feed } from "./feed.js";
import { h, GAMES } from "./dom.js";
import { closedReason, overlay, banner, versionLine } from "./chrome.js";
import { coverAll } from "./cover_all.js";
import { craps } from "./craps.js";
import { bustBonus } from "./bust_bonus.js";

const tableId = decodeURIComponent(location.pathname.split("/")[2] || "");
document.title = `Table ${tableId}`;

function gameOf(t) {
  const m = t.topics.get("info") || t.topics.get("state");
  if (m) return m.game;
  if (t.topics.has("craps/board")) return "CRAPS";
  if (t.topics.has("bust_bonus/state") || t.topics.has("bust_bonus/result")) return "BJ";
  if (t.topics.has("cover_all/payouts") || t.topics.has("cover_all/result")) return "poker";
  return null;
}

// Idle: the newest play message (by its ts, the table's clock) is older than `attract`
// seconds. The same messages at the same time draw the same screen.
function idle(feed, view) {
  const times = (view.activity || []).filter(Boolean).map((m) => Date.parse(m.ts)).filter(Number.isFinite);
  if (!times.length) return false;
  return Date.now() - Math.max(...times) > feed.attract * 1000;
}

function region(name, id, children) {
  return h(`section.region.region-${name}${id ? "#" + id : ""}`, { dataset: { region: name } }, children);
}

function render(feed) {
  const t = feed.store.tables.get(tableId) || null;
  overlay(closedReason(feed, t), true);
  banner(t, true);
  versionLine(feed, t);
  const top = document.getElementById("top");
  const main = document.getElementById("main");
  if (!t) {
    top.replaceChildren(h("span.title", {}, `Table ${tableId}`));
    main.replaceChildren();
    return;
  }
  const game = gameOf(t);
  const view = game === "CRAPS" ? craps(t) : game === "BJ" ? bustBonus(t) : game ? coverAll(t) : null;
  top.replaceChildren(h("span.title", {}, `Table ${tableId}`),
    h("span.sub", {}, [GAMES[game] || "", view ? view.title : ""].filter(Boolean).join(" \u00b7 ")),
    h("span.right", {}, view && view.status ? view.status : ""));
  main.dataset.game = game === "CRAPS" ? "craps" : game === "BJ" ? "bust-bonus" : "cover-all";
  if (!view) {
    main.replaceChildren(region("round", "round", h("div.headline.muted", {}, "Waiting for the table")));
    return;
  }
  const attract = idle(feed, view);
  document.body.classList.toggle("attract", attract);
  main.replaceChildren(...[
    attract ? region("attract", "attract", [h("div.bet-name", {}, view.bet), h("div.pitch", {}, view.pitch)]) : null,
    region("pays", "region-pays", view.pays),
    attract ? null : region("round", "round", view.round),
    attract || !view.history ? null : region("history", "history", view.history),
  ].filter(Boolean));
}

const feed = new Feed(tableId, render);
window.lammerFeed = feed;
setInterval(() => render(feed), 5000); // the attract view comes without a message
