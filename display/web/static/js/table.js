// The player display, /table/<id>: 1920x1080, read from two metres.

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

function render(feed) {
  const t = feed.store.tables.get(tableId) || null;
  overlay(closedReason(feed, t));
  banner(t);
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
  main.replaceChildren(view ? view.content : h("div.headline.muted", {}, "Waiting for the table"));
}

window.lammerFeed = new Feed(tableId, render);
