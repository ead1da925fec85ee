// Cover All Bonus on the player display: the game's pay table with the column of the
// hands in play lit from ROUND on, then the winning row and cell with the cards, and the
// table's last results under it.

import { h, odds, card } from "./dom.js";
import { historyOf } from "./feed.js";
import { FLAGGED_LINE, outcomeText, seat } from "./player_text.js";
import { historyTable, timeOf } from "./history.js";

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

// The pay table, sized to its region by the stylesheet (--rows and --cols: container units).
export function payTableElement(table, hands, winning) {
  const head = h("tr", {}, h("th", {}, "Hand"),
    table.columns.map((c) => h("th", { class: c === hands ? "lit" : null, dataset: { hands: String(c) } },
      h("span.n", {}, String(c)), h("span.unit", {}, " hands"))));
  const body = table.rows.map((row) => h("tr", { class: row.hand === winning ? "lit" : null, dataset: { hand: row.hand } },
    h("td", {}, row.hand),
    row.pays.map((pays, i) => {
      const column = table.columns[i];
      const cls = row.hand === winning && column === hands ? "hit" : column === hands ? "lit" : null;
      return h("td", { class: cls, dataset: { hands: String(column) } }, odds(pays));
    })));
  const el = h("table.pays#paytable", {}, h("thead", {}, head), h("tbody", {}, body));
  el.style.setProperty("--rows", String(table.rows.length + 1));
  el.style.setProperty("--cols", String(table.columns.length));
  return el;
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
  const group = (label, codes, id) => h(`div.group#${id}`, {}, h("div.label", {}, label), h("div.cards", {}, codes.map(drawn)));
  if (!board.length) return h("div.hand-cards", {}, group(seat(highest.position), own, "own-cards"));
  return h("div.hand-cards", {}, group(seat(highest.position), own, "own-cards"), group("Board", board, "board-cards"));
}

// The 10 results before the one shown (all 10 latest while a round is in play).
function historyRows(t, inPlay) {
  return historyOf(t, "cover_all/result", 11).slice(inPlay ? 0 : 1).slice(0, 10).map((r) => ({
    seq: r.seq,
    cells: [`Round ${r.round_id}`, timeOf(r.ts),
      r.outcome === "win" ? r.highest.hand : outcomeText(r.outcome),
      r.hands ? `${r.hands} hands` : "",
      r.outcome === "win" ? odds(r.pays) : "",
      r.outcome === "win" ? seat(r.highest.position) : ""],
    win: r.outcome === "win",
  }));
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
  const pays = table ? payTableElement(table, hands, winning)
    : h("div.headline.muted", {}, "Waiting for the pay table");

  const round = [];
  if (inPlay) {
    round.push(h("h2", {}, `Round ${inPlay.round_id}`),
      h("div.headline", {}, `${inPlay.hands} hands in play`),
      h("div.line.muted", {}, "The highest hand at the table wins the Cover All Bonus"));
  } else if (shown) {
    round.push(h("h2", {}, `Round ${shown.round_id}`));
    switch (shown.outcome) {
      case "win":
        round.push(h("div.headline#hand", {}, shown.highest.hand),
          h("div.pays-big#pays", {}, odds(shown.pays)),
          h("div.line#seat", {}, `${seat(shown.highest.position)} \u00b7 ${shown.hands} hands`),
          handCards(shown.highest));
        break;
      case "flagged":
        round.push(h("div.headline#hand.warn", {}, outcomeText(shown.outcome)),
          h("div.line", {}, FLAGGED_LINE));
        break;
      default:
        round.push(h("div.headline#hand", {}, outcomeText(shown.outcome)));
    }
  } else {
    round.push(h("div.headline.muted", {}, "Waiting for the next round"));
  }
  const title = table ? table.title : "Cover All Bonus";
  return {
    title,
    pays,
    round,
    history: historyTable("Earlier rounds", ["Round", "Time", "Hand", "Hands", "Pays", "Seat"], historyRows(t, Boolean(inPlay))),
    // The attract view's words (table.js): what the bet is.
    bet: "Cover All Bonus",
    pitch: "Pays on the highest hand at the table",
    activity: [payouts, result],
  };
}
