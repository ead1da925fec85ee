// Bust Bonus on the player display: the pay table with the up card's row lit, then bust,
// suited, three 8s and the pays, the cell that pays lit (rows and columns as published),
// and the table's last results under it.

import { h, odds, oddsFigure, cards, card } from "./dom.js";
import { historyOf } from "./feed.js";
import { FLAGGED_LINE, outcomeText } from "./player_text.js";
import { historyTable, lastShown, timeOf } from "./history.js";
import { TOPIC } from "./contract.js";

// A result in a player's words: "Dealer busts, suited, three 8s", "Dealer stands on 19".
function resultWords(r) {
  if (r.outcome === "win") {
    const words = ["Dealer busts", r.suited ? "suited" : "off-suit"];
    if (r.three_eights) words.push("three 8s");
    return words.join(", ");
  }
  if (r.outcome === "lose" && r.total !== null) return `Dealer stands on ${r.total}`;
  return outcomeText(r.outcome);
}

// The same in the history's "Dealer" column, shorter: "Busts, suited, three 8s",
// "Stands on 19".
function historyWords(r) {
  if (r.outcome === "win") return ["Busts", r.suited ? "suited" : "off-suit", r.three_eights ? "three 8s" : null].filter(Boolean).join(", ");
  if (r.outcome === "lose" && r.total !== null) return `Stands on ${r.total}`;
  return outcomeText(r.outcome);
}

function historyRows(t, inPlay) {
  return historyOf(t, TOPIC.BUST_BONUS_RESULT, 11).slice(inPlay ? 0 : 1).slice(0, 10).map((r) => ({
    seq: r.seq,
    cells: [`Round ${r.round_id}`, timeOf(r.ts), historyWords(r), r.paytable_row || "",
      r.outcome === "win" ? odds(r.pays) : ""],
    win: r.outcome === "win",
  }));
}

// The view of a Bust Bonus table; `attract`: the pay table alone, nothing lit.
export function bustBonus(t, attract = false) {
  const info = t.topics.get(TOPIC.INFO);
  const table = info && info.paytables && info.paytables.bust_bonus;
  const state = t.topics.get(TOPIC.BUST_BONUS_STATE) || null;
  const result = t.topics.get(TOPIC.BUST_BONUS_RESULT) || null;
  // A round is in play from its up card (betting closed) until END or VOID reopens betting.
  const inPlay = state && state.up_card && !state.betting_open && (!result || state.seq > result.seq) ? state : null;
  const shown = inPlay ? null : result;
  const row = attract ? null : inPlay ? inPlay.paytable_row : shown ? shown.paytable_row : null;
  const column = !attract && shown ? shown.column : null;

  let pays;
  if (table) {
    const cell = (r, key) => h("td", { class: r.row === row && column === key ? "hit" : null, dataset: { column: key } },
      oddsFigure(r[key]));
    pays = h("table.pays#paytable", {},
      h("caption.sr", {}, "Bust Bonus: all pays are to 1"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, h("span.label", {}, "Dealer's up card"),
        h("span.to-one", { dataset: { min: "small" } }, "all pays to 1")), h("th", { scope: "col" }, "Bust, off\u2011suit"),
        h("th", { scope: "col" }, "Bust, suited"))),
      h("tbody", { dataset: { min: "pays" } }, table.rows.map((r) => h("tr", { class: r.row === row ? "lit" : null, dataset: { row: r.row } },
        h("th.hand", { scope: "row" }, r.row), cell(r, "off_suit"), cell(r, "suited")))));
  } else {
    pays = h("div.headline.muted", { dataset: { min: "pays" } }, "Waiting for the pay table");
  }

  const round = [];
  if (inPlay) {
    round.push(h("div.what", {}, h("h2", { dataset: { min: "small" } }, `Round ${inPlay.round_id}`),
      h("div.headline", { dataset: { min: "pays" } }, "Dealer's up card")),
    h("div.cards", {}, card(inPlay.up_card)),
    inPlay.dealer_cards.length > 1 ? cards(inPlay.dealer_cards) : null);
  } else if (shown) {
    const heading = h("h2", { dataset: { min: "small" } }, `Round ${shown.round_id}`);
    if (shown.outcome === "flagged") {
      round.push(h("div.what", {}, heading, h("div.headline#outcome.warn", { dataset: { min: "pays" } }, outcomeText(shown.outcome)),
        h("div.line", { dataset: { min: "small" } }, FLAGGED_LINE)));
    } else {
      round.push(h("div.what", {}, heading, h("div.headline#outcome", { dataset: { min: "pays" } }, resultWords(shown))));
      if (shown.outcome === "win") round.push(h("div.pays-big#pays", { dataset: { min: "big" } }, odds(shown.pays)));
      round.push(cards(shown.dealer_cards));
    }
  } else {
    round.push(h("div.headline.muted", { dataset: { min: "pays" } }, "Waiting for the next round"));
  }
  const status = state ? h(`span.badge${state.betting_open ? ".open" : ".closed"}#betting`, {},
    state.betting_open ? "Betting open" : "Betting closed") : null;
  const rows = historyRows(t, Boolean(inPlay));
  return {
    title: "Bust Bonus",
    status,
    pays,
    round,
    history: historyTable(lastShown("Earlier rounds", rows.length), ["Round", "Time", "Dealer", "Up card", "Pays"], rows,
      { wraps: [0, 2, 3] }),
    bet: "Bust Bonus",
    pitch: "Pays when the dealer busts",
    activity: [state, result],
  };
}
