// The live feed of one page: a WebSocket to the server, and the store it fills.
//
// A page is a view of the retained MQTT state (docs/mqtt.md): the store keeps, per table,
// the latest message of each topic, plus the last few messages of the topics that are not
// retained. The server sends each seq once, in order (its contract.feed orders, drops what
// was seen and fills gaps), so the page keeps only trivial guards: a retained topic never
// goes back to an older seq, a non-retained message at or below the last one is ignored.
// The server also sends the gaps that will not be filled and, on the floor, each
// controller's bridge status (the pit draws both). Nothing is computed from the rules: the
// daemon publishes what the screen shows.
//
// Liveness: the server sends a tick every keepalive/3 s. The page is "live" while the
// socket is open, the picture has arrived, the server's broker link is up, and a frame
// arrived within the keepalive. Otherwise it reconnects (jittered, capped backoff) and the
// page shows "table closed".

const RECENT = 12;
const GAPS = 20;

export class Store {
  constructor() {
    this.tables = new Map();
    this.bridges = new Map(); // controller -> {connected, since, tables}
  }

  table(id) {
    let t = this.tables.get(id);
    if (!t) {
      t = { id, availability: null, topics: new Map(), recent: new Map(), last: 0, gaps: [] };
      this.tables.set(id, t);
    }
    return t;
  }

  // Take one message {table, topic, retained, payload}; true when the picture changed.
  apply(m) {
    const t = this.table(m.table);
    if (m.topic === "availability") {
      t.availability = m.payload;
      return true;
    }
    if (m.payload === null) {
      return t.topics.delete(m.topic);
    }
    const seq = m.payload.seq;
    if (m.retained) {
      const current = t.topics.get(m.topic);
      if (current && current.seq >= seq) return false;
      t.topics.set(m.topic, m.payload);
    } else {
      if (seq <= t.last) return false;
      t.last = seq;
      const list = t.recent.get(m.topic) || [];
      list.push(m.payload);
      list.sort((a, b) => a.seq - b.seq);
      if (list.length > RECENT) list.shift();
      t.recent.set(m.topic, list);
    }
    return true;
  }

  // A gap the server's feed gave up on {table, from_seq, to_seq, reason, at}.
  gap(m) {
    const t = this.table(m.table);
    t.gaps.push(m);
    if (t.gaps.length > GAPS) t.gaps.shift();
  }
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

// The active alarms: from `alarms` or `state`, whichever is newer.
export function alarmsOf(table) {
  const m = latest(table, "alarms", "state");
  return m ? m.alarms : [];
}

export class Feed {
  // table: a table id, or null for every table (the pit). render(feed) draws the page.
  constructor(table, render) {
    this.tableId = table;
    this.render = render;
    this.store = new Store();
    this.pending = null;
    this.ws = null;
    this.open = false;
    this.synced = false;
    this.broker = false;
    this.server = null;
    this.dropped = 0;
    this.areas = {};
    this.keepalive = 30;
    this.lastFrame = 0;
    this.delay = 250;
    this.connect();
    setInterval(() => this.watch(), 1000);
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
        this.pending = new Store();
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
