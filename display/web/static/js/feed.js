// The live feed of one page: a WebSocket to the server, and the store it fills.
//
// A page is a view of the retained MQTT state (docs/reference/mqtt.md): the store keeps, per table,
// the latest message of each topic, plus the last few messages of the topics that are not
// retained. The server sends each seq once, in order (its contract.feed orders, drops what
// was seen and fills gaps), so the page keeps only guards: a retained topic never goes back
// to an older seq, and a bounded memory of seqs drops the copy of a result a reconnect
// sends again (as the latest and in the history).
// The server also sends the gaps that will not be filled and, on the floor, each
// controller's bridge status (the pit draws both). Nothing is computed from the rules: the
// daemon publishes what the screen shows.
//
// Liveness: the server sends a tick every keepalive/3 s. The page is "live" while the
// socket is open, the picture has arrived, the server's broker link is up, and a frame
// arrived within the keepalive. Otherwise it reconnects (jittered, capped backoff) and the
// page shows "table closed".

import { HISTORY, HISTORY_TOPICS, TOPIC } from "./contract.js";

const RECENT = 12;
const SEEN = 4096;
// Results a page keeps for its history (the server sends its last HISTORY on connect, as
// the messages they were: contract.js HISTORY_TOPICS, declared in contract/topics.py).
export { HISTORY };
// A page of every table (the pit's list) keeps fewer: it draws the latest of each, and a
// floor of 200 tables would otherwise hold 10,000 results.
export const HISTORY_ALL_TABLES = 12;
// Seqs remembered per table to drop a copy (a message seen again arrives within the last
// few; retained topics also never go back to an older seq): fewer on a page of every table.
const SEEN_ALL_TABLES = 256;
const HISTORY_SET = new Set(HISTORY_TOPICS);
const GAPS = 20;

export class Store {
  constructor(history = HISTORY, seen = SEEN) {
    this.tables = new Map();
    this.historyBound = history;
    this.seenBound = seen;
    this.bridges = new Map(); // controller -> {connected, since, tables}
  }

  table(id) {
    let t = this.tables.get(id);
    if (!t) {
      t = { id, availability: null, topics: new Map(), recent: new Map(), history: new Map(), seen: new Set(), order: [], version: 0, gaps: [], integrity: [] };
      this.tables.set(id, t);
    }
    return t;
  }

  // Take one message {table, topic, retained, payload}; true when the picture changed.
  apply(m) {
    const t = this.table(m.table);
    if (m.topic === TOPIC.AVAILABILITY) {
      t.availability = m.payload;
      t.availabilitySince = m.since || null;
      t.version += 1;
      return true;
    }
    if (m.payload === null) {
      t.version += 1;
      return t.topics.delete(m.topic);
    }
    const seq = m.payload.seq;
    if (t.seen.has(seq)) return false;
    if (HISTORY_SET.has(m.topic)) keep(t.history, m.topic, m.payload, this.historyBound);
    if (m.retained) {
      const current = t.topics.get(m.topic);
      if (current && current.seq >= seq) return false;
      t.topics.set(m.topic, m.payload);
    } else {
      keep(t.recent, m.topic, m.payload, RECENT);
    }
    t.seen.add(seq);
    t.order.push(seq);
    if (t.order.length > this.seenBound) t.seen.delete(t.order.shift());
    t.version += 1; // a page may redraw only the tables whose version changed
    return true;
  }

  // A table's integrity alarms as lammer records retains them {table, ts, alarms}: an
  // empty list clears them.
  integrity(m) {
    const t = this.table(m.table);
    t.integrity = m.alarms || [];
    t.version += 1;
  }

  // A table's software status as lammer authenticate retains it {table, ts, status,
  // version, manifest, differs, message}; status null: none known.
  software(m) {
    const t = this.table(m.table);
    t.software = m.status ? m : null;
    t.version += 1;
  }

  // A gap the server's feed gave up on {table, from_seq, to_seq, reason, at}.
  gap(m) {
    const t = this.table(m.table);
    t.gaps.push(m);
    if (t.gaps.length > GAPS) t.gaps.shift();
  }
}

// Add a message to a topic's list in seq order, keeping the last `bound`.
function keep(lists, topic, payload, bound) {
  const list = lists.get(topic) || [];
  if (list.some((m) => m.seq === payload.seq)) return;
  list.push(payload);
  list.sort((a, b) => a.seq - b.seq);
  if (list.length > bound) list.shift();
  lists.set(topic, list);
}

// A table's earlier messages of `topic`, newest first (at most `count`).
export function historyOf(table, topic, count = HISTORY) {
  return (table.history.get(topic) || []).slice(-count).reverse();
}

// The newest of the messages on `topics` of a table (by seq), or null.
export function latest(table, ...topics) {
  let best = null;
  for (const topic of topics) {
    const m = table.topics.get(topic);
    if (m && (!best || m.seq > best.seq)) best = m;
    for (const r of table.recent.get(topic) || []) {
      if (!best || r.seq > best.seq) best = r;
    }
  }
  return best;
}

// The integrity alarms lammer records publishes for a table (lammer-floor/integrity/<id>).
export function integrityOf(table) {
  return table.integrity || [];
}

// The active alarms: from `alarms` or `state`, whichever is newer, and a SOFTWARE alarm
// when the floor's authenticator finds the table's software not approved.
export function alarmsOf(table) {
  const m = latest(table, TOPIC.ALARMS, TOPIC.STATE);
  const own = m ? m.alarms : [];
  const sw = table.software;
  if (!sw || sw.status === "approved" || own.some((a) => a.code === "SOFTWARE")) return own;
  const differs = sw.differs ? `${sw.differs}: ` : "";
  return [...own, { code: "SOFTWARE", device: null, message: `${differs}${sw.message}`, since: sw.ts, stops_payouts: true, floor: true }];
}

export class Feed {
  // table: a table id, or null for every table (the pit). render(feed) draws the page.
  constructor(table, render) {
    this.tableId = table;
    this.render = render;
    this.store = this.newStore();
    this.pending = null;
    this.ws = null;
    this.open = false;
    this.synced = false;
    this.broker = false;
    this.server = null;
    this.dropped = 0;
    this.areas = {};
    this.keepalive = 30;
    this.attract = 300;
    this.lastFrame = 0;
    this.delay = 250;
    this.connect();
    setInterval(() => this.watch(), 1000);
  }

  // A page of one table keeps 50 earlier results per topic; a page of every table fewer.
  newStore() {
    return this.tableId ? new Store() : new Store(HISTORY_ALL_TABLES, SEEN_ALL_TABLES);
  }

  get live() {
    return this.open && this.synced && this.broker && Date.now() - this.lastFrame <= this.keepalive * 1000;
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = this.tableId ? `?table=${encodeURIComponent(this.tableId)}` : "";
    return `${scheme}//${location.host}/ws${query}`;
  }

  connect() {
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.onopen = () => {
      this.open = true;
      this.delay = 250;
      this.lastFrame = Date.now();
    };
    ws.onmessage = (event) => this.receive(event.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.open = false;
      this.synced = false;
      this.render(this);
      const wait = this.delay / 2 + Math.random() * (this.delay / 2);
      this.delay = Math.min(this.delay * 2, 5000);
      setTimeout(() => this.connect(), wait);
    };
  }

  receive(text) {
    this.lastFrame = Date.now();
    let m;
    try {
      m = JSON.parse(text);
    } catch {
      return;
    }
    switch (m.t) {
      case "hello":
        this.server = m.server;
        this.keepalive = m.keepalive;
        this.broker = m.broker;
        this.dropped = m.dropped;
        this.areas = m.areas || {};
        this.attract = m.attract || 300;
        this.pending = this.newStore();
        this.synced = false;
        break;
      case "synced":
        if (this.pending) this.store = this.pending;
        this.pending = null;
        this.synced = true;
        this.render(this);
        break;
      case "msg":
        if (this.pending) {
          this.pending.apply(m);
        } else if (this.store.apply(m)) {
          this.render(this);
        }
        break;
      case "gap":
        (this.pending || this.store).gap(m);
        if (!this.pending) this.render(this);
        break;
      case "integrity":
        (this.pending || this.store).integrity(m);
        if (!this.pending) this.render(this);
        break;
      case "software":
        (this.pending || this.store).software(m);
        if (!this.pending) this.render(this);
        break;
      case "bridge":
        (this.pending || this.store).bridges.set(m.controller, m);
        if (!this.pending) this.render(this);
        break;
      case "link":
        this.broker = m.broker;
        this.render(this);
        break;
      case "tick": {
        const changed = this.broker !== m.broker || this.dropped !== m.dropped;
        this.broker = m.broker;
        this.dropped = m.dropped;
        if (changed) this.render(this);
        break;
      }
      default:
        break;
    }
  }

  // Silence for longer than the keepalive: show it, and start over.
  watch() {
    if (this.open && Date.now() - this.lastFrame > this.keepalive * 1000) {
      this.render(this);
      const ws = this.ws;
      this.ws = null;
      this.open = false;
      this.synced = false;
      ws.onclose = null;
      ws.close();
      this.connect();
    }
  }
}
