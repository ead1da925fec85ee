// Bonus Craps on the player display: the lammers 2-6 and 8-12, the three bets with their
// progress, pays and live chance, betting open or closed, the last roll's dice and what
// that roll did (the bets it completed, or nothing), and under it the rolls of the current
// series (craps/board series: the daemon says which rolls are in it; a seven starts a new
// one), each win on the row of the roll that made it.

import { h, odds, die, BETS } from "./dom.js";
import { latest, historyOf } from "./feed.js";
import { chanceText, rollText, seriesNote, seriesTitle } from "./player_text.js";
import { historyTable, timeOf } from "./history.js";
import { TOPIC } from "./contract.js";

const NUMBERS = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

// A roll drawn with its number: dice and what it counts as, in a player's words (the
// stickperson's page passes its own `words`).
export function rollLine(roll, words = rollText) {
  if (!roll) return h("div.line.muted", { dataset: { min: "small" } }, "No roll yet");
  return h("div.dice#lastroll", { dataset: { roll: String(roll.roll_id), status: roll.status } },
    h("span.roll-id", { dataset: { min: "small" } }, `Roll ${roll.roll_id}`),
    roll.status === "noroll" ? null : [die(roll.dice[0]), die(roll.dice[1])],
    h("span.roll-total", { dataset: { min: "pays" } }, words(roll)));
}

// What the roll shown did: the bets it completed (craps/result, win) and any taken back
// since (craps/reversal), never another roll's. A result is the roll's when it names the
// roll and came after the page's latest craps/roll of it (a decision on the roll publishes
// a new craps/roll, then its results: one from before it is no longer what the roll did).
function rollResults(t, roll) {
  if (!roll) return [];
  const own = (m) => m.roll_id === roll.roll_id;
  const last = [...historyOf(t, TOPIC.CRAPS_ROLL), ...(t.recent.get(TOPIC.CRAPS_ROLL) || [])].filter(own)
    .reduce((a, m) => Math.max(a, m.seq), -1);
  const after = (m) => own(m) && m.seq > last;
  const seen = new Set();
  const pick = (topic) => [...historyOf(t, topic), ...(t.recent.get(topic) || [])].filter(after)
    .filter((m) => !seen.has(m.seq) && seen.add(m.seq)).sort((a, b) => a.seq - b.seq);
  const wins = pick(TOPIC.CRAPS_RESULT).filter((r) => r.outcome === "win");
  const taken = pick(TOPIC.CRAPS_REVERSAL).filter((r) => r.outcome === "win");
  return [
    ...wins.map((w) => h("div.line.win.roll-win", { dataset: { bet: w.bet, min: "pays" } }, `${BETS[w.bet]} wins ${odds(w.pays)}`)),
    ...taken.map((r) => h("div.line.muted.roll-taken", { dataset: { bet: r.bet, min: "small" } },
      `${BETS[r.bet]} win taken back: the roll is void`)),
  ];
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
  return historyTable((shown) => seriesTitle(count, shown), ["Roll", "Time", "Dice", "Total", "Note"], rows,
    { empty: "No roll yet in this series", wraps: [0, 4] });
}

// A table too old to publish its series: the last rolls.
function historyRows(t, current) {
  return historyOf(t, TOPIC.CRAPS_ROLL, 11).filter((r) => !current || r.roll_id !== current.roll_id || r.seq !== current.seq)
    .slice(0, 10).map((r) => ({
      seq: r.seq,
      cells: [`Roll ${r.roll_id}`, timeOf(r.ts), r.status === "noroll" ? "" : r.dice.map((d) => d || "?").join(" + "), rollText(r)],
      win: false,
    }));
}

// The view of a Bonus Craps table; `attract`: the numbers and the three bets' pays, nothing
// lit and no series' progress.
export function craps(t, attract = false) {
  const board = t.topics.get(TOPIC.CRAPS_BOARD);
  // The board carries the last roll (retained); a craps/roll newer than the board, too.
  const live = latest(t, TOPIC.CRAPS_ROLL);
  const roll = board && board.last_roll && (!live || live.seq <= board.seq) ? board.last_roll : live;
  if (!board) {
    return { title: "Bonus Craps", status: null, pays: h("div.headline.muted", { dataset: { min: "pays" } }, "Waiting for the board"),
      round: [], history: null, bet: "Bonus Craps", pitch: "", activity: [] };
  }
  const hit = new Set(attract ? [] : board.numbers_hit);
  const numbers = h("div.numbers#numbers", {}, NUMBERS.map((n) => h(
    `div.number${n === 7 ? ".seven" : ""}${hit.has(n) ? ".lit" : ""}`, { dataset: { number: String(n), min: "small" } }, String(n))));

  const bets = Object.entries(BETS).map(([key, name]) => {
    const bet = board[key];
    const all = [...bet.hit, ...bet.remaining].sort((a, b) => a - b);
    const got = new Set(attract ? [] : bet.hit);
    const complete = bet.complete && !attract;
    return h(`div.panel.bet${complete ? ".complete" : ""}`, { dataset: { bet: key } },
      h("h3", { dataset: { min: "pays" } }, name),
      h("div.odds", { dataset: { min: "big" } }, odds(bet.pays)),
      h("div.needs", {}, all.map((n) => h(`span${got.has(n) ? ".got" : ""}`, { dataset: { min: "small" } }, String(n)))),
      attract ? null : h("div.chance", { dataset: { min: "small" } }, complete ? "Complete" : chanceText(bet.chance)));
  });

  const round = [h("h2", { dataset: { min: "small" } }, "Last roll"), rollLine(roll)];
  if (board.pending_roll) round.push(h("div.line.warn", { dataset: { min: "small" } }, "The stickperson is checking a roll"));
  round.push(...rollResults(t, roll));
  const status = h(`span.badge${board.betting_open ? ".open" : ".closed"}#betting`, {},
    board.betting_open ? "Betting open" : "Betting closed");
  return {
    // The pay table in use is the pit's business (board.paytable): a player reads the pays.
    title: "Bonus Craps",
    status,
    pays: h("div.board", {}, numbers, h("div.bets", {}, bets)),
    round,
    history: Array.isArray(board.series) ? seriesTable(board)
      : historyTable("Earlier rolls", ["Roll", "Time", "Dice", "Total"], historyRows(t, roll), { wraps: [0] }),
    bet: "Bonus Craps",
    pitch: `${Object.values(BETS).join(", ")}: every number before a seven`,
    activity: [board, live],
  };
}
