// Small DOM helpers shared by the pages. Text always goes in as text (never as HTML), so
// nothing received can become markup.

// h("div.panel#round", {attrs}, ...children): a tag with classes (.x) and an id (#x).
export function h(tag, attrs = {}, ...children) {
  const parts = tag.match(/^[a-z0-9]*|[.#][^.#]+/g);
  const el = document.createElement(parts[0] || "div");
  const classes = parts.slice(1).filter((p) => p[0] === ".").map((p) => p.slice(1));
  const id = parts.slice(1).find((p) => p[0] === "#");
  if (classes.length) el.className = classes.join(" ");
  if (id) el.id = id.slice(1);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = [el.className, value].filter(Boolean).join(" ");
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Odds as published ("34", "1.5") read "to 1" (docs/reference/mqtt.md, Conventions).
export function odds(pays) {
  return pays === null || pays === undefined ? "" : `${pays} to 1`;
}

// A pay in a pay table's cell: the figure, with " to 1" for a screen reader (and in the
// cell's text); the table says once, as the regulations' tables do, that all pays are to 1.
export function oddsFigure(pays) {
  if (pays === null || pays === undefined) return [];
  return [h("span.figure", {}, String(pays)), h("span.sr", {}, " to 1")];
}

const SUITS = { s: "\u2660", h: "\u2665", d: "\u2666", c: "\u2663" };
const RANKS = { T: "10" };

// A card "As" drawn in CSS.
export function card(code) {
  const rank = RANKS[code[0]] || code[0];
  const suit = code[1];
  const red = suit === "h" || suit === "d";
  return h(`div.card${red ? ".red" : ""}`, { title: code, dataset: { card: code } },
    h("span.rank", {}, rank), h("span.suit", {}, SUITS[suit] || "?"));
}

export function cards(codes) {
  return h("div.cards", {}, (codes || []).map(card));
}

// A die's pips on a 3x3 grid (cells numbered 0-8); 0 is a die the reader could not read.
const PIPS = { 1: [4], 2: [0, 8], 3: [0, 4, 8], 4: [0, 2, 6, 8], 5: [0, 2, 4, 6, 8], 6: [0, 2, 3, 5, 6, 8] };

export function die(value) {
  if (!PIPS[value]) return h("div.die.unknown", { title: "unread" }, "?");
  const cells = [];
  for (let i = 0; i < 9; i += 1) cells.push(h(PIPS[value].includes(i) ? "i.pip" : "i"));
  return h("div.die", { title: String(value), dataset: { die: String(value) } }, cells);
}

// Age of an ISO time, for people ("42 s", "3 min", "2 h").
export function age(since) {
  const ms = Date.now() - Date.parse(since);
  if (!Number.isFinite(ms)) return "";
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

// The names of the games and bets: the contract's (generated from Python, never spelled here).
export { GAMES, BETS } from "./contract.js";
