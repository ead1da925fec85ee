// Bust Bonus on the player display: the pay table with the up card's row lit, then bust,
// suited, three 8s and the pays, the cell that pays lit (rows and columns as published).

import { h, odds, cards, card } from "./dom.js";

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

  const left = h("div");
  if (table) {
    left.append(h("table.pays#paytable", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Dealer's up card"), h("th", {}, "Bust, off-suit"), h("th", {}, "Bust, suited"))),
      h("tbody", {}, table.rows.map((r) => h("tr", { class: r.row === row ? "lit" : null, dataset: { row: r.row } },
        h("td", {}, r.row),
        h("td", { class: r.row === row && column === "off_suit" ? "hit" : null, dataset: { column: "off_suit" } }, odds(r.off_suit)),
        h("td", { class: r.row === row && column === "suited" ? "hit" : null, dataset: { column: "suited" } }, odds(r.suited)))))));
  } else {
    left.append(h("div.panel", {}, h("div.headline.muted", {}, "Waiting for the pay table")));
  }

  const right = h("div.panel#round");
  if (inPlay) {
    right.append(h("h2", {}, `Round ${inPlay.round_id}`),
      h("div.headline", {}, "Dealer's up card"),
      h("div.cards", {}, card(inPlay.up_card)),
      inPlay.dealer_cards.length > 1 ? cards(inPlay.dealer_cards) : null);
  } else if (shown) {
    right.append(h("h2", {}, `Round ${shown.round_id}`));
    switch (shown.outcome) {
      case "win": {
        const words = ["Dealer busts", shown.suited ? "suited" : "off-suit"];
        if (shown.three_eights) words.push("three 8s");
        right.append(h("div.headline#outcome", {}, words.join(", ")),
          h("div.pays-big#pays", {}, odds(shown.pays)));
        break;
      }
      case "lose":
        right.append(h("div.headline#outcome", {}, `Dealer stands on ${shown.total}`));
        break;
      case "void":
        right.append(h("div.headline#outcome", {}, "Round void"));
        break;
      default:
        right.append(h("div.headline#outcome.warn", {}, "Under review"),
          h("div.line", {}, "A supervisor will review this round."));
    }
    if (shown.outcome !== "flagged") right.append(cards(shown.dealer_cards));
  } else {
    right.append(h("div.headline.muted", {}, "Waiting for the next round"));
  }
  const status = state ? h(`span.badge${state.betting_open ? ".open" : ".closed"}#betting`, {},
    state.betting_open ? "Betting open" : "Betting closed") : null;
  return { title: "Bust Bonus", status, content: h("div.layout", {}, left, right) };
}
