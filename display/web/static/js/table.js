// The player display, /table/<id>: every kiosk shape (app.css chooses the layout from the
// viewport), read from three metres: after each drawing the fit step (fit.js) sizes every
// region's text to fill its cell and never under the floors. Four named regions: the pay
// table, the current round, the history, and after `attract` seconds without play the
// attract view (the pay table alone, nothing lit). Player words only: no version, contract
// or pay table number (those are the staff pages' and `info`'s).

import { Feed } from "./feed.js";
import { h, GAMES } from "./dom.js";
import { closedReason, overlay, banner } from "./chrome.js";
import { coverAll } from "./cover_all.js";
import { craps } from "./craps.js";
import { bustBonus } from "./bust_bonus.js";
import { fitLine, fitPage, floors } from "./fit.js";
import { FAMILY_TOPICS, TOPIC } from "./contract.js";

const tableId = decodeURIComponent(location.pathname.split("/")[2] || "");
document.title = `Table ${tableId}`;

function gameOf(t) {
  const m = t.topics.get(TOPIC.INFO) || t.topics.get(TOPIC.STATE);
  if (m) return m.game;
  // Before info or state: the family whose own topics the table has published.
  for (const [family, topics] of Object.entries(FAMILY_TOPICS)) {
    if (topics.some((topic) => t.topics.has(topic))) return family;
  }
  return null;
}

// Idle: the newest play message (by its ts, the table's clock) is older than `attract`
// seconds. The same messages at the same time draw the same screen.
function idle(feed, activity) {
  const times = (activity || []).filter(Boolean).map((m) => Date.parse(m.ts)).filter(Number.isFinite);
  if (!times.length) return false;
  return Date.now() - Math.max(...times) > feed.attract * 1000;
}

function region(name, id, children) {
  return h(`section.region.region-${name}${id ? "#" + id : ""}`, { dataset: { region: name } }, children);
}

const VIEWS = { CRAPS: craps, BJ: bustBonus };

// The page's words at the top: the table, its game and bet (a Cover All pay table's own
// title names the game), and whether betting is open.
function topLine(game, view) {
  const name = GAMES[game] || "";
  const title = view ? view.title : "";
  const sub = title.includes(name) ? title : [name, title].filter(Boolean).join(" \u00b7 ");
  return [h("div.name", {}, h("span.title", {}, `Table ${tableId}`), sub ? h("span.sub", {}, sub) : null),
    view && view.status ? h("span.right", {}, view.status) : null];
}

// The top line as large as one line allows, from 16 px (for a player, the table's name is
// not what is read from three metres) up to the badge's size; then the regions.
function fit(top, main) {
  const name = top.querySelector(".name");
  if (name) fitLine(name, 16, floors().small);
  fitPage(main);
}

function render(feed) {
  const t = feed.store.tables.get(tableId) || null;
  overlay(closedReason(feed, t), true);
  banner(t, true);
  const top = document.getElementById("top");
  const main = document.getElementById("main");
  if (!t) {
    top.replaceChildren(h("div.name", {}, h("span.title", {}, `Table ${tableId}`)));
    main.replaceChildren();
    fit(top, main);
    return;
  }
  const game = gameOf(t);
  const make = VIEWS[game] || (game ? coverAll : null);
  let view = make ? make(t) : null;
  const attract = Boolean(view) && idle(feed, view.activity);
  if (attract) view = make(t, true);
  top.replaceChildren(...topLine(game, view).filter(Boolean));
  main.dataset.game = game === "CRAPS" ? "craps" : game === "BJ" ? "bust-bonus" : "cover-all";
  document.body.classList.toggle("attract", attract);
  if (!view) {
    main.replaceChildren(region("round", "round", h("div.headline.muted", { dataset: { min: "pays" } }, "Waiting for the table")));
    fit(top, main);
    return;
  }
  main.replaceChildren(...[
    attract ? region("attract", "attract", [h("div.bet-name", { dataset: { min: "pays" } }, view.bet),
      h("div.pitch", { dataset: { min: "small" } }, view.pitch)]) : null,
    region("pays", "region-pays", view.pays),
    attract ? null : region("round", "round", view.round),
    attract || !view.history ? null : region("history", "history", view.history),
  ].filter(Boolean));
  fit(top, main);
}

const feed = new Feed(tableId, render);
window.lammerFeed = feed;
setInterval(() => render(feed), 5000); // the attract view comes without a message
// A kiosk turned or resized: fitted again at once (before the next frame is painted).
window.addEventListener("resize", () => render(feed));
