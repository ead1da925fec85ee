// Bonus Craps on the player display: the lammers 2-6 and 8-12, the three bets with their
// progress, pays and live chance, betting open or closed, the last roll's dice, and under
// it the rolls of the current series (craps/board series: the daemon says which rolls are
// in it; a seven starts a new one).

import { h, odds, oneIn, die, BETS } from "./dom.js";
import { latest, historyOf } from "./feed.js";
import { rollText, seriesNote, seriesTitle } from "./player_text.js";
import { historyTable, timeOf } from "./history.js";

const NUMBERS = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

// A roll drawn with its number: dice and what it counts as, in a player's words (the
// stickperson's page passes its own `words`).
export function rollLine(roll, words = rollText) {
  if (!roll) return h("div.line.muted", {}, "No roll yet");
  return h("div.dice#lastroll", { dataset: { roll: String(roll.roll_id), status: roll.status } },
    h("span.roll-id", {}, `Roll ${roll.roll_id}`),
    roll.status === "noroll" ? null : [die(roll.dice[0]), die(roll.dice[1])],
    h("span.roll-total", {}, words(roll)));
}

const SERIES_ROWS = 10;

// The current series, newest first, as the daemon published it (no rule worked out here).
function seriesTable(board) {
  const rows = board.series.slice(-SERIES_ROWS).reverse().map((r) => ({
    roll: r.roll_id,
    cells: [`Roll ${r.roll_id}`, r.at ? timeOf(r.at) : "", r.dice.join(" + "), String(r.total), seriesNote(r)],
    win: r.wins.length > 0,
  }));
  const count = Math.max(board.series_count || 0, board.series.length);
  return historyTable(seriesTitle(count, rows.length), ["Roll", "Time", "Dice", "Total", "Note"], rows,
    "No roll yet in this series");
}

// A table too old to publish its series: the last rolls.
function historyRows(t, current) {
  return historyOf(t, "craps/roll", 11).filter((r) => !current || r.roll_id !== current.roll_id || r.seq !== current.seq)
    .slice(0, 10).map((r) => ({
      seq: r.seq,
      cells: [`Roll ${r.roll_id}`, timeOf(r.ts), r.status === "noroll" ? "" : r.dice.map((d) => d || "?").join(" + "), rollText(r)],
      win: false,
    }));
}

export function craps(t) {
  const board = t.topics.get("craps/board");
  // The board carries the last roll (retained); a craps/roll newer than the board, too.
  const live = latest(t, "craps/roll");
  const roll = board && board.last_roll && (!live || live.seq <= board.seq) ? board.last_roll : live;
  if (!board) {
    return { title: "Bonus Craps", status: null, pays: h("div.headline.muted", {}, "Waiting for the board"),
      round: [], history: null, bet: "Bonus Craps", pitch: "", activity: [] };
  }
  const hit = new Set(board.numbers_hit);
  const numbers = h("div.numbers#numbers", {}, NUMBERS.map((n) => h(
    `div.number${n === 7 ? ".seven" : ""}${hit.has(n) ? ".lit" : ""}`, { dataset: { number: String(n) } }, String(n))));

  const bets = Object.entries(BETS).map(([key, name]) => {
    const bet = board[key];
    const all = [...bet.hit, ...bet.remaining].sort((a, b) => a - b);
    const got = new Set(bet.hit);
    return h(`div.panel.bet${bet.complete ? ".complete" : ""}`, { dataset: { bet: key } },
      h("h3", {}, name),
      h("div.odds", {}, odds(bet.pays)),
      h("div.needs", {}, all.map((n) => h(`span${got.has(n) ? ".got" : ""}`, {}, String(n)))),
      h("div.chance", {}, bet.complete ? "Complete" : oneIn(bet.chance)));
  });

  const round = [h("h2", {}, "Last roll"), rollLine(roll)];
  if (board.pending_roll) round.push(h("div.line.warn", {}, "The stickperson is checking a roll"));
  const wins = (t.recent.get("craps/result") || []).filter((r) => r.outcome === "win").slice(-3);
  const reversed = new Set((t.recent.get("craps/reversal") || []).map((r) => `${r.roll_id}/${r.bet}`));
  for (const w of wins.reverse()) {
    const taken = reversed.has(`${w.roll_id}/${w.bet}`);
    round.push(h(`div.line${taken ? ".muted" : ".win"}`, {},
      `${BETS[w.bet]} wins ${odds(w.pays)}${taken ? ": taken back, the roll is void" : ""}`));
  }
  const status = h(`span.badge${board.betting_open ? ".open" : ".closed"}#betting`, {},
    board.betting_open ? "Betting open" : "Betting closed");
  return {
    title: `Bonus Craps \u00b7 pay table ${board.paytable}`,
    status,
    pays: h("div.board", {}, numbers, h("div.bets", {}, bets)),
    round,
    history: Array.isArray(board.series) ? seriesTable(board)
      : historyTable("Earlier rolls", ["Roll", "Time", "Dice", "Total"], historyRows(t, roll)),
    bet: "Bonus Craps",
    pitch: `${Object.values(BETS).join(", ")}: every number before a seven`,
    activity: [board, live],
  };
}
