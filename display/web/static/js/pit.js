// The pit view, /pit: every table on the broker at once, for a supervisor. Two views: a
// dense sortable list (one row per table, 200 on one 1920x1080 screen in three columns)
// and the cards; the view, the sort and the filters are kept in the address.

import { Feed, latest, alarmsOf, historyOf, integrityOf } from "./feed.js";
import { h, odds, age, GAMES, BETS } from "./dom.js";
import { closedReason } from "./chrome.js";
import { timeOf } from "./history.js";
import { RESULTS, TOPIC } from "./contract.js";

function lastResult(t) {
  const m = latest(t, ...RESULTS);
  if (!m) return "none yet";
  if ("bet" in m) return `roll ${m.roll_id}: ${BETS[m.bet]} ${m.outcome}${m.pays ? " " + odds(m.pays) : ""}`;
  if ("dice" in m) return `roll ${m.roll_id}: ${m.dice.join("+")} ${m.status}${m.reason ? " (" + m.reason + ")" : ""}`;
  const what = m.outcome === "win" && m.highest ? `${m.highest.hand} ${odds(m.pays)}`
    : m.outcome === "win" ? `win ${odds(m.pays)}` : m.outcome;
  return `round ${m.round_id}: ${what}${m.reason ? " \u2014 " + m.reason : ""}`;
}

// hh:mm of a Unix time in seconds (the server's clock: when it learned it).
function hhmm(seconds) {
  const d = new Date(seconds * 1000);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

// The floor bridge carrying a table (web.toml's floor_controllers), or null.
function bridgeOf(feed, id) {
  for (const b of feed.store.bridges.values()) {
    if (b.tables.includes(id)) return b;
  }
  return null;
}

// Why a table is unreachable on the floor: its controller's bridge is lost (its will).
function unreachable(feed, t) {
  const b = bridgeOf(feed, t.id);
  return b && !b.connected ? `controller ${b.controller} unreachable since ${hhmm(b.since)}` : null;
}

// An integrity alarm (lammer records): the sentence it came with, and since when.
function integrityText(a) {
  return `INTEGRITY: ${a.message} \u2014 for ${age(a.since)}`;
}

function integrityLine(a) {
  return h("div.alarm.integrity", { dataset: { code: "INTEGRITY", bet: a.bet, row: a.row, window: a.window } },
    `\u26a0 ${integrityText(a)}`);
}

function tableCard(feed, t) {
  const state = t.topics.get(TOPIC.STATE);
  const info = t.topics.get(TOPIC.INFO);
  const alarms = alarmsOf(t);
  const integrity = integrityOf(t);
  const lost = unreachable(feed, t);
  const closed = lost || closedReason(feed, t);
  const cls = closed ? ".offline" : alarms.length || integrity.length ? ".alarmed" : "";
  // An offline or closed table's last device state is stale: not shown.
  const devices = state && !closed ? Object.entries(state.devices).map(([name, d]) =>
    `${name}: ${d.connected ? "connected" : "NOT CONNECTED"}${d.status ? ", " + d.status : ""}${d.mode ? ", mode " + d.mode : ""}`) : [];
  return h(`div.tablecard${cls}`, { dataset: { table: t.id } },
    h("h2", {}, h("span.id", {}, t.id), h("span.muted", {}, GAMES[(state || info || {}).game] || ""),
      h(`span${closed ? ".lose" : ".win"}`, { dataset: { availability: t.availability || "unknown" } },
        lost ? "unreachable" : availabilityText(feed, t))),
    lost ? h("div.alarm.unreachable", { dataset: { unreachable: "1" } }, `\u26a0 ${lost}`) : null,
    h("div.kv", {},
      h("span.muted", {}, "devices"), h("span.devices", {}, closed ? "unknown while closed" : devices.join(" \u00b7 ") || "-"),
      h("span.muted", {}, "last result"), h("span.last", {}, lastResult(t)),
      h("span.muted", {}, "version"), h("span", {}, info ? `lammer ${info.version}` : "-")),
    alarms.map((a) => h("div.alarm", { dataset: { code: a.code, acknowledged: a.acknowledged_by || "" } },
      `\u26a0 ${a.code}${a.stops_payouts ? " (payouts paused)" : ""}: ${a.message} \u2014 for ${age(a.since)}`,
      a.acknowledged_by ? h("span.ack", {}, ` \u2713 acknowledged by ${a.acknowledged_by} at ${timeOf(a.acknowledged_at)}`)
        : canAck() ? h("button.ack-button", { type: "button", dataset: { code: a.code },
          onclick: () => acknowledge(t.id, a.code) }, "Acknowledge") : null)),
    integrity.map(integrityLine),
    // What the server's feed gave up on: messages of the table that will not come.
    t.gaps.map((g) => h("div.warn.gap", { dataset: { from: g.from_seq, to: g.to_seq, reason: g.reason } },
      `messages lost: seq ${g.from_seq}\u2013${g.to_seq} will not come (${g.reason}) at ${hhmm(g.at)}`)),
    h("div", {}, h("a", { href: `/pit/${encodeURIComponent(t.id)}` }, "history"), " \u00b7 ",
      h("a", { href: `/table/${encodeURIComponent(t.id)}` }, "player display"), " \u00b7 ",
      h("a", { href: `/stick/${encodeURIComponent(t.id)}` }, "stickperson")));
}

// "online", "offline since 14:02" (when the server heard it), or "closed" (no link).
function availabilityText(feed, t) {
  const lost = unreachable(feed, t); // its controller's bridge is gone: says so in the list
  if (lost) return lost;
  const closed = closedReason(feed, t);
  if (!closed) return "online";
  if (t.availability === "offline") return t.availabilitySince ? `offline since ${timeOf(t.availabilitySince)}` : "offline";
  return "closed";
}

// The pending CHECK and since when it waits: the daemon's pending_roll.since (added); from a
// table too old to send it, its craps/roll "pending" message, while held.
function checkWait(t) {
  const board = t.topics.get(TOPIC.CRAPS_BOARD);
  const pending = board && board.pending_roll;
  if (!pending) return null;
  const own = pending.since ? null
    : historyOf(t, TOPIC.CRAPS_ROLL).filter((r) => r.roll_id === pending.roll_id && r.status === "pending").pop();
  return { roll: pending.roll_id, since: pending.since || (own ? own.ts : null), waiting: board.waiting_count || 0 };
}

function checkText(check) {
  return `${check.since ? age(check.since) + " \u00b7 " : ""}roll ${check.roll}${check.waiting ? ` +${check.waiting}` : ""}`;
}

function gameOf(t) {
  const m = t.topics.get(TOPIC.STATE) || t.topics.get(TOPIC.INFO);
  return m ? m.game : "";
}

// The oldest alarm of a table (its integrity watch's included), in ms, or null.
function oldestAlarm(t) {
  const a = [...alarmsOf(t), ...integrityOf(t)];
  return a.length ? Math.min(...a.map((x) => Date.parse(x.since) || 0)) : null;
}

// A pending CHECK's arrival, in ms (0 when not known: a table too old to say), or null.
function checkSince(t) {
  const c = checkWait(t);
  return c ? (c.since ? Date.parse(c.since) || 0 : 0) : null;
}

// Sort keys of the list's columns (?sort=<key>&dir=desc): a number, a string or a list of
// them; null (no alarm, no CHECK) always after the rest, whichever the direction; ties by
// table id. The default, "attention", puts first what needs someone: the tables
// with an alarm (the oldest first), then those offline or closed (the longest first), then
// those with a CHECK waiting (the oldest first), then the others by id.
const SORTS = {
  attention: (feed, t) => {
    const alarm = oldestAlarm(t);
    if (alarm !== null) return [0, alarm];
    if (unreachable(feed, t) || closedReason(feed, t)) return [1, t.availabilitySince ? Date.parse(t.availabilitySince) || 0 : 0];
    const check = checkSince(t);
    return check !== null ? [2, check] : [3, 0];
  },
  table: (feed, t) => t.id,
  game: (feed, t) => gameOf(t),
  area: (feed, t) => { const a = areaOf(feed, t.id); return a === OUTSIDE ? "\uffff" : a; },
  availability: (feed, t) => availabilityText(feed, t),
  result: (feed, t) => { const m = latestResult(t); return m ? -Date.parse(m.ts) : 0; },
  alarms: (feed, t) => oldestAlarm(t),
  check: (feed, t) => checkSince(t),
};
const DEFAULT_SORT = "attention";

function compare(a, b) {
  if (Array.isArray(a)) {
    for (let i = 0; i < a.length; i += 1) {
      const c = compare(a[i], b[i]);
      if (c) return c;
    }
    return 0;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}
const COLUMNS = [["table", "Table"], ["game", "Game"], ["area", "Area"], ["availability", "Availability"],
  ["result", "Last result"], ["alarms", "Alarms"], ["check", "CHECK"]];

function latestResult(t) {
  return latest(t, ...RESULTS);
}

// Rows are kept per table and drawn again only when the table changed (its store version),
// the link changed, the clock ticked (ages), or the session did: 200 tables updating every
// 5 s redraw one row a message, not 200.
const rowCache = new Map();
let tick = 0;

function cachedRow(feed, t) {
  const key = `${t.version}|${tick}|${feed.open}|${feed.synced}|${feed.broker}|${session ? session.user : ""}`;
  const hit = rowCache.get(t.id);
  if (hit && hit.key === key) return hit.row;
  const row = listRow(feed, t);
  rowCache.set(t.id, { key, row });
  return row;
}

function listRow(feed, t) {
  const closed = unreachable(feed, t) || closedReason(feed, t);
  const alarms = alarmsOf(t);
  const integrity = integrityOf(t);
  const check = checkWait(t);
  return h(`div.row${closed ? ".offline" : alarms.length || integrity.length ? ".alarmed" : ""}`, { role: "row", dataset: { table: t.id } },
    h("span.c-table", { role: "cell" }, h("a", { href: `/pit/${encodeURIComponent(t.id)}` }, t.id)),
    h("span.c-game", { role: "cell" }, gameOf(t)),
    h("span.c-area", { role: "cell" }, areaOf(feed, t.id) === OUTSIDE ? "" : areaOf(feed, t.id)),
    h(`span.c-availability${closed ? ".lose" : ""}`, { role: "cell", dataset: { availability: t.availability || "unknown" } }, availabilityText(feed, t)),
    h("span.c-result.last", { role: "cell", title: lastResult(t) }, lastResult(t)),
    h("span.c-alarms", { role: "cell", title: [...alarms.map((a) => `${a.code}: ${a.message}`), ...integrity.map(integrityText)].join("\n") },
      [...alarms.map((a) => `${a.code} ${age(a.since)}${a.acknowledged_by ? " \u2713" + a.acknowledged_by : ""}`),
        // The row first: the cell is narrow; the whole sentence follows (and in its title).
        ...integrity.map((a) => `INTEGRITY ${age(a.since)} ${a.row} \u2014 ${a.message}`)].join(", ")),
    // The wait first, so a narrow cell never hides it: "4 min · roll 401 +60".
    h("span.c-check", { role: "cell", title: check ? checkText(check) : "" }, check ? checkText(check) : ""));
}

// The list: sorted, then poured into as many columns as fit (three at 1920 px), each
// with its own header row whose cells sort.
function sortedTables(feed, tables) {
  const key = SORTS[sort.key] ? sort.key : DEFAULT_SORT;
  const keyed = tables.map((t) => [SORTS[key](feed, t), t]);
  const direction = sort.desc ? -1 : 1;
  keyed.sort(([a, ta], [b, tb]) => {
    if ((a === null) !== (b === null)) return a === null ? 1 : -1; // nothing to sort by: last
    return (a === null ? 0 : compare(a, b) * direction) || ta.id.localeCompare(tb.id);
  });
  return keyed.map(([, t]) => t);
}

function listView(feed, sorted, columns) {
  const key = SORTS[sort.key] ? sort.key : DEFAULT_SORT;
  const per = Math.ceil(sorted.length / columns) || 1;
  const header = () => h("div.row.head", { role: "row" }, COLUMNS.map(([k, label]) => h(`span.c-${k}`, {
    role: "columnheader", "aria-sort": k === key ? (sort.desc ? "descending" : "ascending") : "none",
  }, h("button.sort", { type: "button", dataset: { sort: k }, onclick: () => sortBy(k) },
    label + (k === key ? (sort.desc ? " \u25bc" : " \u25b2") : "")))));
  const parts = [];
  for (let i = 0; i < sorted.length; i += per) {
    parts.push(h("div.pit-column", { role: "table", "aria-label": `Tables ${i + 1} to ${Math.min(i + per, sorted.length)}` },
      header(), sorted.slice(i, i + per).map((t) => cachedRow(feed, t))));
  }
  const el = h(`div.pit-list#pit-list${Object.keys(feed.areas).length ? "" : ".no-areas"}`, {}, parts);
  el.style.setProperty("--columns", String(columns));
  return el;
}

// The list as drawn last: its order, columns and sort. When a message changes no order,
// only the rows whose table changed are replaced in place (no new list, no new layout of
// 200 rows): what keeps a floor's 30 results a second cheap to draw.
let drawnList = null;

function drawList(feed, shown) {
  const sorted = sortedTables(feed, shown);
  const columns = Math.max(1, Math.min(3, Math.floor(window.innerWidth / 620)));
  const signature = `${columns}|${sort.key}|${sort.desc}|${Object.keys(feed.areas).length}|${sorted.map((t) => t.id).join(",")}`;
  const list = document.getElementById("pit-list");
  if (list && drawnList && drawnList.signature === signature) {
    for (const t of sorted) {
      const before = drawnList.rows.get(t.id);
      const row = cachedRow(feed, t);
      if (before !== row) {
        before.replaceWith(row);
        drawnList.rows.set(t.id, row);
      }
    }
    return null;
  }
  const el = listView(feed, sorted, columns);
  drawnList = { signature, rows: new Map(sorted.map((t) => [t.id, cachedRow(feed, t)])) };
  return el;
}

// The filters (pit.html): an area of web.toml's [areas] (or the tables in none), and an
// alarm (any, or one code). They are kept in the address (?area=...&alarm=...), so a
// screen can be bookmarked to its pit, and the page is drawn again when they change.
const OUTSIDE = "\u0000outside";
const params = new URLSearchParams(location.search);
const filter = { area: params.get("area") || "", alarm: params.get("alarm") || "", view: params.get("view") || "list" };
const sort = { key: SORTS[params.get("sort")] ? params.get("sort") : DEFAULT_SORT, desc: params.get("dir") === "desc" };

function remember() {
  const query = new URLSearchParams();
  if (filter.area) query.set("area", filter.area);
  if (filter.alarm) query.set("alarm", filter.alarm);
  if (filter.view !== "list") query.set("view", filter.view);
  if (sort.key !== DEFAULT_SORT) query.set("sort", sort.key);
  if (sort.desc) query.set("dir", "desc");
  const text = query.toString();
  history.replaceState(null, "", text ? `?${text}` : location.pathname);
}

function sortBy(key) {
  sort.desc = sort.key === key ? !sort.desc : false;
  sort.key = key;
  remember();
  render(feed);
}

function areaOf(feed, id) {
  for (const [name, ids] of Object.entries(feed.areas)) {
    if (ids.includes(id)) return name;
  }
  return OUTSIDE;
}

function keep(feed, t) {
  if (filter.area && areaOf(feed, t.id) !== filter.area) return false;
  if (!filter.alarm) return true;
  const alarms = [...alarmsOf(t), ...integrityOf(t).map(() => ({ code: "INTEGRITY" }))];
  if (filter.alarm === "*") return alarms.length > 0 || Boolean(unreachable(feed, t) || closedReason(feed, t));
  return alarms.some((a) => a.code === filter.alarm);
}

// Put the options in the selects (only when they change: an open select stays open).
function options(select, wanted, chosen) {
  const have = [...select.options].map((o) => o.value + "=" + o.textContent).join("|");
  const want = wanted.map(([v, label]) => v + "=" + label).join("|");
  if (have !== want) {
    select.replaceChildren(...wanted.map(([v, label]) => h("option", { value: v }, label)));
  }
  select.value = wanted.some(([v]) => v === chosen) ? chosen : "";
}

function drawFilters(feed, tables) {
  const areas = [["", "every area"], ...Object.keys(feed.areas).map((a) => [a, a])];
  if (tables.some((t) => areaOf(feed, t.id) === OUTSIDE) && Object.keys(feed.areas).length) {
    areas.push([OUTSIDE, "in no area"]);
  }
  options(document.getElementById("area"), areas, filter.area);
  const codes = [...new Set(tables.flatMap((t) => [...alarmsOf(t).map((a) => a.code),
    ...(integrityOf(t).length ? ["INTEGRITY"] : [])]))].sort();
  if (filter.alarm && filter.alarm !== "*" && !codes.includes(filter.alarm)) codes.push(filter.alarm);
  options(document.getElementById("alarm"),
    [["", "every table"], ["*", "with an alarm, or closed"], ...codes.map((c) => [c, c])], filter.alarm);
}

// Messages come faster than frames on a busy floor: draw at most once a frame.
let drawing = false;
function render(f) {
  if (drawing) return;
  drawing = true;
  requestAnimationFrame(() => {
    drawing = false;
    draw(f);
  });
}

function draw(feed) {
  const tables = [...feed.store.tables.values()].sort((a, b) => a.id.localeCompare(b.id));
  const link = !feed.open ? "no connection to the server" : feed.broker ? "broker connected" : "broker unreachable";
  const alarmed = tables.filter((t) => alarmsOf(t).length || integrityOf(t).length).length;
  const closed = tables.filter((t) => unreachable(feed, t) || closedReason(feed, t)).length;
  const lostBridges = [...feed.store.bridges.values()].filter((b) => !b.connected);
  document.getElementById("top").replaceChildren(
    h("span.title", {}, "Pit"),
    h("span.sub#seen", { dataset: { tables: tables.length, alarmed, closed } },
      `${tables.length} table${tables.length === 1 ? "" : "s"} seen \u00b7 ${alarmed} with alarms \u00b7 ${closed} closed`),
    h("span.right", {}, h(`span${feed.broker && feed.open ? ".win" : ".lose"}#link`, {}, link),
      feed.dropped ? h("span.warn", {}, ` \u00b7 ${feed.dropped} bad payloads dropped`) : "",
      feed.store.bridges.size ? h(`span${lostBridges.length ? ".lose" : ".win"}#bridges`,
        { dataset: { lost: lostBridges.map((b) => b.controller).join(",") } },
        ` \u00b7 ${feed.store.bridges.size - lostBridges.length} of ${feed.store.bridges.size} controllers connected`
        + lostBridges.map((b) => ` \u00b7 ${b.controller} lost since ${hhmm(b.since)}`).join("")) : ""));
  drawFilters(feed, tables);
  const shown = tables.filter((t) => keep(feed, t));
  document.getElementById("shown").textContent =
    shown.length === tables.length ? "" : `showing ${shown.length} of ${tables.length}`;
  // Grouped by area, in web.toml's order, then the tables in none.
  const groups = [...Object.keys(feed.areas), OUTSIDE]
    .map((name) => [name, shown.filter((t) => areaOf(feed, t.id) === name)])
    .filter(([, list]) => list.length);
  const named = Object.keys(feed.areas).length > 0;
  document.getElementById("view").value = filter.view;
  const attention = document.getElementById("sort-attention");
  attention.setAttribute("aria-pressed", String(sort.key === DEFAULT_SORT));
  attention.hidden = filter.view !== "list";
  document.body.dataset.view = filter.view;
  document.getElementById("version").textContent = feed.server ? `web ${feed.server}` : "";
  if (tables.length && shown.length && filter.view === "list") {
    const list = drawList(feed, shown);
    if (list) document.getElementById("main").replaceChildren(list);
    return;
  }
  drawnList = null;
  document.getElementById("main").replaceChildren(
    !tables.length ? h("div.headline.muted", {}, "No table has published yet")
      : !shown.length ? h("div.headline.muted", {}, "No table matches the filters")
      : h("div", {}, groups.map(([name, list]) => h("section.area", { dataset: { area: name === OUTSIDE ? "" : name } },
        named ? h("h1", {}, name === OUTSIDE ? "In no area" : name) : null,
        h("div.grid", {}, list.map((t) => tableCard(feed, t)))))));
}

// A pit user's session (the users file's role "pit"): logging in shows "Acknowledge" on
// each alarm not yet acknowledged; the server checks the session, the CSRF token and the
// role, and publishes alarm_ack with the user as operator. The table's own answer is shown.
let session = null; // {user, csrf, roles}

function canAck() {
  return Boolean(session && session.roles && session.roles.includes("pit"));
}

function showSession() {
  document.getElementById("who").textContent = session ? `${session.user} (${(session.roles || []).join(", ")})` : "";
  document.getElementById("login-open").textContent = session ? "Log out" : "Log in";
}

function say(text, cls = "") {
  const el = document.getElementById("answer");
  el.className = cls;
  el.textContent = text;
}

async function acknowledge(table, code) {
  say(`Acknowledging ${code} at ${table}\u2026`);
  let response;
  try {
    response = await fetch(`/api/table/${encodeURIComponent(table)}/alarm_ack`, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": session.csrf },
      body: JSON.stringify({ alarm: code }),
    });
  } catch {
    say("The server could not be reached; nothing was sent.", "lose");
    return;
  }
  const data = await response.json().catch(() => ({ status: "error", error: `HTTP ${response.status}` }));
  if (response.status === 401) {
    session = null;
    showSession();
    render(feed);
    say("Your session has ended: log in again.", "lose");
  } else if (data.status === "ok") {
    say(`The table accepted: ${code} at ${table} acknowledged by ${data.operator}.`, "win");
  } else {
    say(`Refused: ${data.error}`, "lose");
  }
}

async function loginFlow() {
  const dialog = document.getElementById("login-dialog");
  if (session) {
    await fetch("/api/logout", { method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": session.csrf }, body: "{}" });
    session = null;
    showSession();
    render(feed);
    return;
  }
  const info = await (await fetch("/api/session", { credentials: "same-origin" })).json();
  document.getElementById("login-message").textContent = info.users_configured === false
    ? "No users file is configured on this server: nobody can log in." : "";
  document.getElementById("login-cancel").onclick = () => dialog.close();
  document.getElementById("login").onsubmit = async (event) => {
    event.preventDefault();
    const response = await fetch("/api/login", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": info.login_token },
      body: JSON.stringify({ user: document.getElementById("user").value, password: document.getElementById("password").value }),
    });
    const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (response.ok) {
      document.getElementById("password").value = "";
      session = data;
      dialog.close();
      showSession();
      render(feed);
    } else {
      document.getElementById("login-message").textContent = data.error;
    }
  };
  dialog.showModal();
}

document.getElementById("login-open").addEventListener("click", () => loginFlow());
document.getElementById("sort-attention").addEventListener("click", () => {
  sort.key = DEFAULT_SORT;
  sort.desc = false;
  remember();
  render(feed);
});
fetch("/api/session", { credentials: "same-origin" }).then((r) => r.json()).then((info) => {
  if (info.user) {
    session = info;
    showSession();
    render(feed);
  }
});

const feed = new Feed(null, render);
window.lammerFeed = feed;
for (const key of ["area", "alarm", "view"]) {
  document.getElementById(key).addEventListener("change", (event) => {
    filter[key] = event.target.value;
    remember();
    render(feed);
  });
}
window.addEventListener("resize", () => render(feed));
setInterval(() => {
  tick += 1; // alarm ages, CHECK waits
  render(feed);
}, 5000);
