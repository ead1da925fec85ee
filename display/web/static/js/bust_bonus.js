// Bust Bonus on the player display: the pay table with the up card's row lit, then bust,
// suited, three 8s and the pays, the cell that pays lit (rows and columns as published),
// and the table's last results under it.

import { h, odds, cards, card } from "./dom.js";
import { historyOf } from "./feed.js";
import { FLAGGED_LINE, outcomeText } from "./player_text.js";
import { historyTable, timeOf } from "./history.js";

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

function historyRows(t, inPlay) {
  return historyOf(t, "bust_bonus/result", 11).slice(inPlay ? 0 : 1).slice(0, 10).map((r) => ({
    seq: r.seq,
    cells: [`Round ${r.round_id}`, timeOf(r.ts), resultWords(r), r.paytable_row || "",
      r.outcome === "win" ? odds(r.pays) : ""],
    win: r.outcome === "win",
  }));
}

export function bustBonus(t) {
  const info = t.topics.get("info");
  const table = info && info.paytables && info.paytables.bust_bonus;
  const state = t.topics.get("bust_bonus/state") || null;
  const result = t.topics.get("bust_bonus/result") || null;
  // A round is in play from its up card (betting closed) until END or VOID reopens betting.
  const inPlay = state && state.up_card && !state.betting_open && (!result || state.seq > result.seq) ? state : null;
  const shown = inPlay ? null : result;
  const row = inPlay ? inPlay.paytable_row : shown ? shown.paytable_row : null;
  const column = shown ? shown.column : null;

  let pays;
  if (table) {
    pays = h("table.pays#paytable", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Dealer's up card"), h("th", {}, "Bust, off-suit"), h("th", {}, "Bust, suited"))),
      h("tbody", {}, table.rows.map((r) => h("tr", { class: r.row === row ? "lit" : null, dataset: { row: r.row } },
        h("td", {}, r.row),
        h("td", { class: r.row === row && column === "off_suit" ? "hit" : null, dataset: { column: "off_suit" } }, odds(r.off_suit)),
        h("td", { class: r.row === row && column === "suited" ? "hit" : null, dataset: { column: "suited" } }, odds(r.suited))))));
    pays.style.setProperty("--rows", String(table.rows.length + 1));
    pays.style.setProperty("--cols", "2");
  } else {
    pays = h("div.headline.muted", {}, "Waiting for the pay table");
  }

  const round = [];
  if (inPlay) {
    round.push(h("h2", {}, `Round ${inPlay.round_id}`),
      h("div.headline", {}, "Dealer's up card"),
      h("div.cards", {}, card(inPlay.up_card)),
      inPlay.dealer_cards.length > 1 ? cards(inPlay.dealer_cards) : null);
  } else if (shown) {
    round.push(h("h2", {}, `Round ${shown.round_id}`));
    if (shown.outcome === "flagged") {
      round.push(h("div.headline#outcome.warn", {}, outcomeText(shown.outcome)), h("div.line", {}, FLAGGED_LINE));
    } else {
      round.push(h("div.headline#outcome", {}, resultWords(shown)));
      if (shown.outcome === "win") round.push(h("div.pays-big#pays", {}, odds(shown.pays)));
      round.push(cards(shown.dealer_cards));
    }
  } else {
    round.push(h("div.headline.muted", {}, "Waiting for the next round"));
  }
  const status = state ? h(`span.badge${state.betting_open ? ".open" : ".closed"}#betting`, {},
    state.betting_open ? "Betting open" : "Betting closed") : null;
  return {
    title: "Bust Bonus",
    status,
    pays,
    round,
    history: historyTable("Earlier rounds", ["Round", "Time", "Dealer", "Up card", "Pays"], historyRows(t, Boolean(inPlay))),
    bet: "Bust Bonus",
    pitch: "Pays when the dealer busts",
    activity: [state, result],
  };
}
