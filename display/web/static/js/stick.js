// The stickperson terminal, /stick/<id>: decide CHECK rolls, void the last roll under
// 4-4(c)(2), (3) or (6), overturn a declaration. Every action is confirmed first; the
// table's own answer is shown. The server checks the session and the CSRF token; this page
// only carries them.

import { Feed, latest, historyOf } from "./feed.js";
import { h, age } from "./dom.js";
import { timeOf } from "./history.js";
import { closedReason, overlay, banner, versionLine } from "./chrome.js";
import { rollLine } from "./craps.js";
import { CLAUSES, TOPIC, VOID_CLAUSES } from "./contract.js";

const tableId = decodeURIComponent(location.pathname.split("/")[2] || "");
document.title = `Stickperson \u00b7 table ${tableId}`;
let session = null; // {user, csrf}
let feed = null;

const $ = (id) => document.getElementById(id);

function answer(text, cls = "") {
  const el = $("answer");
  el.className = cls;
  el.textContent = text;
}

function confirmDialog(question) {
  const dialog = $("confirm");
  $("confirm-text").textContent = question;
  return new Promise((resolve) => {
    const done = (value) => {
      $("confirm-yes").onclick = null;
      $("confirm-no").onclick = null;
      dialog.close();
      resolve(value);
    };
    $("confirm-yes").onclick = () => done(true);
    $("confirm-no").onclick = () => done(false);
    dialog.oncancel = () => done(false);
    dialog.showModal();
  });
}

async function act(name, body, question, done) {
  if (!(await confirmDialog(question))) return;
  answer("Sent; waiting for the table\u2026");
  let response;
  try {
    response = await fetch(`/api/table/${encodeURIComponent(tableId)}/${name}`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": session.csrf },
      body: JSON.stringify(body),
    });
  } catch {
    answer("The server could not be reached; nothing was sent.", "lose");
    return;
  }
  const data = await response.json().catch(() => ({ status: "error", error: `HTTP ${response.status}` }));
  if (response.status === 401) {
    session = null;
    showLogin("Your session has ended: log in again.");
    return;
  }
  if (data.status === "ok") answer(`The table accepted: ${done}.`, "win");
  else if (response.status === 403) answer(`The server refused: ${data.error}`, "lose");
  else answer(`The table refused: ${data.error}`, "lose");
}

// A roll as the stickperson reads it: its total and, unless simply counted, its status.
function staffWords(roll) {
  const total = roll.total === null ? "" : String(roll.total);
  return roll.status === "counted" ? total : `${total} ${roll.status}`.trim();
}

function waitedText(roll, at) {
  return `Roll ${roll} is ${at ? `waiting since ${timeOf(at)} (${age(at)})` : "waiting since before the last 50 rolls"}.`;
}

// The queue behind the pending CHECK (craps/board waiting_count and waiting, added), and
// how long the CHECK has waited: since pending_roll.since (added: when it arrived, the
// oldest of the queue); from a table too old to send it, its own craps/roll message
// (status pending), while the page holds it (the server keeps the last 50 rolls).
function queueLine(t, board) {
  const pending = board.pending_roll;
  const own = pending.since ? null
    : historyOf(t, TOPIC.CRAPS_ROLL).filter((r) => r.roll_id === pending.roll_id && r.status === "pending").pop() || null;
  const at = pending.since || (own ? own.ts : null);
  const count = board.waiting_count || 0;
  const named = board.waiting || [];
  const more = count > named.length ? `, and ${count - named.length} more` : "";
  return h("div.queue#queue", { dataset: { count: String(count) } },
    h("div.line#pending-since", { dataset: { since: at || "", roll: String(pending.roll_id) } }, waitedText(pending.roll_id, at)),
    h(`div.line${count ? ".warn" : ".muted"}#queue-count`, {},
      count ? `${count} roll${count === 1 ? "" : "s"} wait behind it: roll${count === 1 ? "" : "s"} ${named.join(", ")}${more}.`
        : "No roll waits behind it."));
}

function render(f) {
  const t = f.store.tables.get(tableId) || null;
  overlay(closedReason(f, t));
  banner(t);
  versionLine(f, t);
  const board = t && t.topics.get(TOPIC.CRAPS_BOARD);
  const pending = board ? board.pending_roll : null;

  const p = $("pending-body");
  if (pending) {
    p.replaceChildren(
      h("div.line", {}, `Roll ${pending.roll_id}: ${pending.dice.map((d) => d || "?").join(" + ")}`),
      h("div.line.warn#pending-reason", {}, pending.reason),
      // The daemon says which clause the reader's CHECK reason stands for (docs/reference/mqtt.md).
      CLAUSES[pending.clause] ? h("div.line#pending-clause", {},
        `4-4(c)(${pending.clause}): ${CLAUSES[pending.clause]}`) : null,
      queueLine(t, board),
      h("div.actions", {},
        h("button.go#valid", { onclick: () => act("roll_decision", { roll_id: pending.roll_id, decision: "valid" },
          `Declare roll ${pending.roll_id} VALID? It counts with its dice.`, `roll ${pending.roll_id} declared valid`) }, "Valid"),
        h("button.stop#invalid", { onclick: () => act("roll_decision", { roll_id: pending.roll_id, decision: "invalid" },
          `Declare roll ${pending.roll_id} INVALID? It does not count.`, `roll ${pending.roll_id} declared invalid`) }, "Invalid")));
  } else {
    p.replaceChildren(h("div.line.muted#no-pending", {}, board ? "No roll is waiting for a decision." : "Waiting for the board."));
  }
  const current = pending ? pending.clause : null;
  for (const li of $("clauses").children) li.classList.toggle("current", Number(li.dataset.clause) === current);

  const roll = t ? latest(t, TOPIC.CRAPS_ROLL) : null;
  $("latest-body").replaceChildren(rollLine(roll, staffWords));
  const voidable = roll && (roll.status === "counted" || roll.status === "reinstated") ? roll : null;
  const overturnable = roll && roll.status === "declared_invalid" ? roll : null;
  $("void").disabled = !voidable;
  $("void").textContent = voidable ? `Void roll ${voidable.roll_id}` : "Void last roll";
  $("void").dataset.roll = voidable ? String(voidable.roll_id) : "";
  $("overturn").disabled = !overturnable;
  $("overturn").textContent = overturnable ? `Overturn roll ${overturnable.roll_id}` : "Overturn";
  $("overturn").dataset.roll = overturnable ? String(overturnable.roll_id) : "";
}

function build() {
  $("clauses").replaceChildren(...Object.entries(CLAUSES).map(([n, text]) =>
    h("li", { value: n, dataset: { clause: n } }, `(${n}) ${text}`)));
  // The select names the clause, its words beside it (a select shows its choice on one
  // line: the words would be cut on a narrow terminal).
  $("clause").replaceChildren(...VOID_CLAUSES.map((n) => h("option", { value: n }, `(c)(${n})`)));
  const words = () => { $("clause-words").textContent = CLAUSES[$("clause").value] || ""; };
  $("clause").onchange = words;
  words();
  $("void").onclick = () => {
    const roll = Number($("void").dataset.roll);
    const clause = $("clause").value;
    act("void_roll", { roll_id: roll, clause },
      `Void roll ${roll} under 68 IAC 10-4-4(c)(${clause}): ${CLAUSES[clause]}? Its effect on every side bet is undone.`,
      `roll ${roll} declared invalid under (c)(${clause})`);
  };
  $("overturn").onclick = () => {
    const roll = Number($("overturn").dataset.roll);
    act("overturn", { roll_id: roll }, `Overturn the declaration: roll ${roll} counts with its dice?`,
      `roll ${roll} reinstated`);
  };
  $("logout").onclick = async () => {
    await fetch("/api/logout", { method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": session ? session.csrf : "" }, body: "{}" });
    location.reload();
  };
}

async function showLogin(message = "") {
  $("terminal").hidden = true;
  $("login").hidden = false;
  $("who").textContent = "";
  $("logout").hidden = true;
  const info = await (await fetch("/api/session", { credentials: "same-origin" })).json();
  $("login-message").textContent = info.users_configured === false
    ? "No users file is configured on this server: nobody can log in (lammer web --users FILE)." : message;
  $("login").onsubmit = async (event) => {
    event.preventDefault();
    const response = await fetch("/api/login", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": info.login_token },
      body: JSON.stringify({ user: $("user").value, password: $("password").value }),
    });
    const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (response.ok) {
      $("password").value = "";
      start(data);
    } else if (response.status === 403) {
      showLogin(data.error);
    } else {
      $("login-message").textContent = data.error;
    }
  };
}

function start(info) {
  session = info;
  $("login").hidden = true;
  $("terminal").hidden = false;
  $("who").textContent = `stickperson: ${info.user}`;
  $("logout").hidden = false;
  if (!feed) {
    feed = new Feed(tableId, render);
    window.lammerFeed = feed;
  } else {
    render(feed);
  }
}

// The CHECK's age goes on between messages: its line alone is redrawn (the buttons stay).
setInterval(() => {
  const line = $("pending-since");
  if (line && line.dataset.since) line.textContent = waitedText(line.dataset.roll, line.dataset.since);
}, 5000);

build();
$("table-name").textContent = `Table ${tableId}`;
fetch("/api/session", { credentials: "same-origin" }).then((r) => r.json()).then((info) => {
  if (info.user) start(info);
  else showLogin();
});
