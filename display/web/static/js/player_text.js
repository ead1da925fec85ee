// The player's register: the one place where the contract's codes become what a player
// reads. Player pages (/table/<id>) take every word about an outcome, a roll, an alarm or a
// closed screen from here; codes, reasons and spec references stay on the staff pages (pit,
// stick). tests/display/test_player_text.py checks every code the contract has is here
// (the outcome and status literals of contract/payloads.py, the alarms that stop payouts in
// rules/table.py) and that none of these words is a code.

import { BETS } from "./contract.js";

// cover_all/result, bust_bonus/result and craps/result `outcome`.
export const OUTCOMES = {
  win: "Win",
  no_qualifier: "No qualifying hand",
  void: "Round void",
  flagged: "Under review",
  lose: "No win",
};

// What a flagged round adds, never why (the reason is the pit's).
export const FLAGGED_LINE = "A supervisor will review this round.";

// craps/roll and craps/board last_roll `status`: null means "say the total".
export const ROLL_STATUSES = {
  counted: null,
  noroll: "No roll",
  pending: "Being checked",
  declared_invalid: "Roll void",
  reinstated: null,
};

// The alarms under which no payout is published (state/alarms `stops_payouts`): every one
// reads the same to a player. Any other alarm is not the player's business.
export const PAUSED = "Payouts paused: please wait for the dealer";
export const PAUSING_ALARMS = { MODE_MISMATCH: PAUSED, DECK_FAULT: PAUSED };

// Why the screen shows "Table closed" (chrome.js closedReason's codes), for a player.
export const CLOSED = {
  no_server: "Please wait: this screen reconnects by itself",
  no_broker: "Please wait: this screen reconnects by itself",
  silent: "Please wait: this screen reconnects by itself",
  waiting: "Please wait for the dealer",
  offline: "Please wait for the dealer",
};

// Hand positions as the dealer calls them (shuffler-icd.md positions P1-P8, DL).
export function seat(position) {
  if (position === "DL") return "Dealer's hand";
  const m = /^P([1-8])$/.exec(position || "");
  return m ? `Seat ${m[1]}` : "";
}

// A number of hands in play: "1 hand", "5 hands" (the regulation's "1 Total Hand").
export function handsText(count) {
  return `${count} hand${count === 1 ? "" : "s"}`;
}

export function outcomeText(outcome) {
  return OUTCOMES[outcome] || "";
}

// A roll as a player reads it: its total, or what happened to it.
export function rollText(roll) {
  if (!roll) return "";
  const words = ROLL_STATUSES[roll.status];
  if (words) return words;
  if (roll.total === null || roll.total === undefined) return "";
  return String(roll.total);
}

// A roll of the current series (craps/board series, added) as a player reads it: the bets
// it completed, else that it lit a new number.
export function seriesNote(roll) {
  const wins = (roll.wins || []).filter((bet) => BETS[bet]);
  if (wins.length) return wins.map((bet) => `${BETS[bet]} wins`).join(", ");
  return roll.new_number ? "New number" : "";
}

// The heading of the series' table: how many rolls the series has, and how many are shown.
export function seriesTitle(count, shown) {
  if (!count) return "This series";
  const rolls = `${count} roll${count === 1 ? "" : "s"}`;
  return shown < count ? `This series: ${rolls}, the last ${shown} shown` : `This series: ${rolls}`;
}

// A bet's chance to complete, as a player reads it, from the exact "n/d" the daemon
// publishes: the fraction itself while it is small enough to read at a glance ("2 in 5",
// "5 in 11", "1 in 7": both terms under 10 and 100), else "1 in X" with X = d/n rounded half
// up to one decimal, exactly (BigInt), without ".0" ("1 in 38.1"). The terminal display
// writes it the same way (display/terminal.py).
export function chanceText(chance) {
  if (!chance || !/^[1-9][0-9]*\/[1-9][0-9]*$/.test(chance)) return "";
  let [n, d] = chance.split("/").map((v) => BigInt(v));
  let [a, b] = [n, d];
  while (b) [a, b] = [b, a % b];
  [n, d] = [n / a, d / a];
  if (n < 10n && d < 100n) return `${n} in ${d}`;
  const tenths = (20n * d + n) / (2n * n);
  const whole = tenths / 10n;
  const frac = tenths % 10n;
  return `1 in ${whole.toLocaleString("en-US")}${frac ? "." + frac : ""}`;
}

// The banner's words for an alarm, or null when a player is not told of it.
export function alarmText(alarm) {
  if (!alarm.stops_payouts) return null;
  return PAUSING_ALARMS[alarm.code] || PAUSED;
}
