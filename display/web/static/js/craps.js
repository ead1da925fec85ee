// Bonus Craps on the player display: the lammers 2-6 and 8-12, the three bets with their
// progress, pays and live chance, betting open or closed, the last roll's dice.

import { h, odds, oneIn, die, BETS } from "./dom.js";
import { latest } from "./feed.js";

const NUMBERS = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

export function rollLine(roll) {
  if (!roll) return h("div.line.muted", {}, "No roll yet");
  const words = {
    counted: roll.total !== null ? `${roll.total}` : "",
    noroll: "No roll",
    pending: "Under review",
    declared_invalid: "Declared invalid",
    reinstated: `${roll.total ?? ""} (reinstated)`,
  };
  return h("div.dice#lastroll", { dataset: { roll: String(roll.roll_id), status: roll.status } },
    roll.status === "noroll" ? null : [die(roll.dice[0]), die(roll.dice[1])],
    h("span.roll-total", {}, words[roll.status] ?? roll.status));
}

export function craps(t) {
  const board = t.topics.get("craps/board");
  // The board carries the last roll (retained); a craps/roll newer than the board, too.
  const live = latest(t, "craps/roll");
  const roll = board && board.last_roll && (!live || live.seq <= board.seq) ? board.last_roll : live;
  const content = h("div");
  if (!board) {
    content.append(h("div.panel", {}, h("div.headline.muted", {}, "Waiting for the board")));
    return { title: "Bonus Craps", status: null, content };
  }
  const hit = new Set(board.numbers_hit);
  content.append(h("div.numbers#numbers", {}, NUMBERS.map((n) => h(
    `div.number${n === 7 ? ".seven" : ""}${hit.has(n) ? ".lit" : ""}`, { dataset: { number: String(n) } }, String(n)))));

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
  content.append(h("div.bets", {}, bets));

  const last = h("div.panel.below", {}, h("h2", {}, "Last roll"), rollLine(roll));
  if (board.pending_roll) last.append(h("div.line.warn", {}, "A roll is under review by the stickperson"));
  const wins = (t.recent.get("craps/result") || []).filter((r) => r.outcome === "win").slice(-3);
  const reversed = new Set((t.recent.get("craps/reversal") || []).map((r) => `${r.roll_id}/${r.bet}`));
  for (const w of wins.reverse()) {
    const taken = reversed.has(`${w.roll_id}/${w.bet}`);
    last.append(h(`div.line${taken ? ".muted" : ".win"}`, {},
      `${BETS[w.bet]} wins ${odds(w.pays)}${taken ? " \u2014 taken back: the roll was declared invalid" : ""}`));
  }
  content.append(last);
  const status = h(`span.badge${board.betting_open ? ".open" : ".closed"}#betting`, {},
    board.betting_open ? "Betting open" : "Betting closed");
  return { title: `Bonus Craps \u00b7 pay table ${board.paytable}`, status, content };
}
