// Cover All Bonus on the player display: the game's pay table with the column of the
// hands in play lit from ROUND on, then the winning row and cell with the cards.

import { h, odds, cards } from "./dom.js";

const POSITIONS = { DL: "Dealer" };

function position(p) {
  return POSITIONS[p] || (p && p.startsWith("P") ? `Player ${p.slice(1)}` : p);
}

// The pay table to draw: the whole table of `info`, else the column of `cover_all/payouts`.
function payTable(info, payouts) {
  const whole = info && info.paytables && info.paytables.cover_all;
  if (whole) return { title: whole.title, columns: whole.columns, rows: whole.rows };
  if (payouts) {
    return {
      title: "Cover All Bonus",
      columns: [payouts.hands],
      rows: payouts.paytable.map((r) => ({ hand: r.hand, pays: [r.pays] })),
    };
  }
  return null;
}

export function coverAll(t) {
  const info = t.topics.get("info");
  const payouts = t.topics.get("cover_all/payouts") || null;
  const result = t.topics.get("cover_all/result") || null;
  // The newer of the two says where the table is: a round in play, or its result.
  const inPlay = payouts && (!result || payouts.seq > result.seq) ? payouts : null;
  const shown = inPlay ? null : result;
  const hands = inPlay ? inPlay.hands : shown ? shown.hands : null;
  const winning = shown && shown.outcome === "win" ? shown.highest.hand : null;

  const table = payTable(info, payouts);
  const left = h("div");
  if (table) {
    const head = h("tr", {}, h("th", {}, "Hand"),
      table.columns.map((c) => h("th", { class: c === hands ? "lit" : null, dataset: { hands: String(c) } }, `${c} hands`)));
    const body = table.rows.map((row) => h("tr", { class: row.hand === winning ? "lit" : null, dataset: { hand: row.hand } },
      h("td", {}, row.hand),
      row.pays.map((pays, i) => {
        const column = table.columns[i];
        const cls = row.hand === winning && column === hands ? "hit" : column === hands ? "lit" : null;
        return h("td", { class: cls, dataset: { hands: String(column) } }, odds(pays));
      })));
    left.append(h("table.pays#paytable", {}, h("thead", {}, head), h("tbody", {}, body)));
  } else {
    left.append(h("div.panel", {}, h("div.headline.muted", {}, "Waiting for the pay table")));
  }

  const right = h("div.panel#round");
  if (inPlay) {
    right.append(h("h2", {}, `Round ${inPlay.round_id}`),
      h("div.headline", {}, `${inPlay.hands} hands in play`),
      h("div.line.muted", {}, "The highest hand at the table wins the Cover All Bonus"));
  } else if (shown) {
    right.append(h("h2", {}, `Round ${shown.round_id}`));
    switch (shown.outcome) {
      case "win":
        right.append(h("div.headline#hand", {}, shown.highest.hand),
          h("div.pays-big#pays", {}, odds(shown.pays)),
          h("div.line", {}, `${position(shown.highest.position)} \u00b7 ${shown.hands} hands`),
          cards(shown.highest.cards));
        break;
      case "no_qualifier":
        right.append(h("div.headline#hand", {}, "No qualifying hand"));
        break;
      case "void":
        right.append(h("div.headline#hand", {}, "Round void"));
        break;
      default:
        right.append(h("div.headline#hand.warn", {}, "Under review"),
          h("div.line", {}, "A supervisor will review this round."));
    }
  } else {
    right.append(h("div.headline.muted", {}, "Waiting for the next round"));
  }
  const title = table ? table.title : "Cover All Bonus";
  return { title, content: h("div.layout", {}, left, right) };
}
