// Cover All Bonus on the player display: the game's pay table with the column of the
// hands in play lit from ROUND on, then the winning row and cell with the cards, and the
// table's last results under it.

import { h, odds, oddsFigure, card } from "./dom.js";
import { historyOf } from "./feed.js";
import { FLAGGED_LINE, handsText, outcomeText, seat } from "./player_text.js";
import { historyTable, lastShown, timeOf } from "./history.js";
import { TOPIC } from "./contract.js";

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

// The pay table, sized to its region by the fit step (fit.js): each cell the pays figure
// (" to 1" said once, in the first heading, as the regulation's tables say "All pays are TO
// 1" once, and read out by a screen reader in each cell), each column headed by its number
// of hands. `hands` and
// `winning` light the column in play and the winning row and cell (null: none lit, as in
// the attract view).
export function payTableElement(table, hands, winning) {
  const head = h("tr", {}, h("th", { scope: "col" }, h("span.label", {}, "Hand"), h("span.to-one", { dataset: { min: "small" } }, "all pays to 1")),
    table.columns.map((c) => h("th", { scope: "col", class: c === hands ? "lit" : null, dataset: { hands: String(c) } },
      h("span.n", {}, String(c)), h("span.unit", {}, c === 1 ? " hand" : " hands"))));
  const body = table.rows.map((row) => h("tr", { class: row.hand === winning ? "lit" : null, dataset: { hand: row.hand } },
    h("th.hand", { scope: "row" }, row.hand),
    row.pays.map((pays, i) => {
      const column = table.columns[i];
      const cls = row.hand === winning && column === hands ? "hit" : column === hands ? "lit" : null;
      return h("td", { class: cls, dataset: { hands: String(column) } }, oddsFigure(pays));
    })));
  return h("table.pays#paytable", {},
    h("caption.sr", {}, `${table.title}: all pays are to 1`),
    h("thead", {}, head), h("tbody", { dataset: { min: "pays" } }, body));
}

// The winning hand as a player reads it: the position's own cards apart from the board,
// the cards that make the hand marked (`best` and `board` as the daemon published them).
function handCards(highest) {
  const best = highest.best ? new Set(highest.best) : null;
  const board = highest.board || [];
  const own = highest.cards.slice(0, highest.cards.length - board.length);
  const drawn = (code) => {
    const el = card(code);
    if (best) el.classList.add(best.has(code) ? "best" : "unused");
    return el;
  };
  const group = (label, codes, id) => h(`div.group#${id}`, {},
    h("div.label", { dataset: { min: "small" } }, label), h("div.cards", {}, codes.map(drawn)));
  if (!board.length) return h("div.hand-cards", {}, group(seat(highest.position), own, "own-cards"));
  return h("div.hand-cards", {}, group(seat(highest.position), own, "own-cards"), group("Board", board, "board-cards"));
}

// The 10 results before the one shown (all 10 latest while a round is in play).
function historyRows(t, inPlay) {
  return historyOf(t, TOPIC.COVER_ALL_RESULT, 11).slice(inPlay ? 0 : 1).slice(0, 10).map((r) => ({
    seq: r.seq,
    cells: [`Round ${r.round_id}`, timeOf(r.ts),
      r.outcome === "win" ? r.highest.hand : outcomeText(r.outcome),
      r.hands ? handsText(r.hands) : "",
      r.outcome === "win" ? odds(r.pays) : "",
      r.outcome === "win" ? seat(r.highest.position) : ""],
    win: r.outcome === "win",
  }));
}

// The view of a Cover All Bonus table; `attract`: the pay table alone, nothing lit.
export function coverAll(t, attract = false) {
  const info = t.topics.get(TOPIC.INFO);
  const payouts = t.topics.get(TOPIC.COVER_ALL_PAYOUTS) || null;
  const result = t.topics.get(TOPIC.COVER_ALL_RESULT) || null;
  // The newer of the two says where the table is: a round in play, or its result.
  const inPlay = payouts && (!result || payouts.seq > result.seq) ? payouts : null;
  const shown = inPlay ? null : result;
  const hands = attract ? null : inPlay ? inPlay.hands : shown ? shown.hands : null;
  const winning = !attract && shown && shown.outcome === "win" ? shown.highest.hand : null;

  const table = payTable(info, payouts);
  const pays = table ? payTableElement(table, hands, winning)
    : h("div.headline.muted", { dataset: { min: "pays" } }, "Waiting for the pay table");

  const round = [];
  if (inPlay) {
    round.push(h("div.what", {}, h("h2", { dataset: { min: "small" } }, `Round ${inPlay.round_id}`),
      h("div.headline", { dataset: { min: "pays" } }, `${handsText(inPlay.hands)} in play`),
      h("div.line.muted", { dataset: { min: "small" } }, "The highest hand at the table wins the Cover All Bonus")));
  } else if (shown) {
    const heading = h("h2", { dataset: { min: "small" } }, `Round ${shown.round_id}`);
    switch (shown.outcome) {
      case "win":
        round.push(h("div.what", {}, heading,
          h("div.headline#hand", { dataset: { min: "pays" } }, shown.highest.hand),
          h("div.line#seat", { dataset: { min: "small" } }, `${seat(shown.highest.position)} \u00b7 ${handsText(shown.hands)}`)),
        h("div.pays-big#pays", { dataset: { min: "big" } }, odds(shown.pays)),
        handCards(shown.highest));
        break;
      case "flagged":
        round.push(h("div.what", {}, heading, h("div.headline#hand.warn", { dataset: { min: "pays" } }, outcomeText(shown.outcome)),
          h("div.line", { dataset: { min: "small" } }, FLAGGED_LINE)));
        break;
      default:
        round.push(h("div.what", {}, heading, h("div.headline#hand", { dataset: { min: "pays" } }, outcomeText(shown.outcome))));
    }
  } else {
    round.push(h("div.headline.muted", { dataset: { min: "pays" } }, "Waiting for the next round"));
  }
  const rows = historyRows(t, Boolean(inPlay));
  return {
    // The pay table's own title names the game ("... for use with Let It Ride").
    title: table ? table.title : "Cover All Bonus",
    pays,
    round,
    history: historyTable(lastShown("Earlier rounds", rows.length), ["Round", "Time", "Hand", "Hands", "Pays", "Seat"], rows,
      { wraps: [0, 2, 3, 5] }),
    // The attract view's words (table.js): what the bet is.
    bet: "Cover All Bonus",
    pitch: "Pays on the highest hand at the table",
    activity: [payouts, result],
  };
}
