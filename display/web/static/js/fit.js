// The player display's fit step (it is read from three metres). Every region of a
// player page sizes its content in em of the region's own font-size; this finds, for each
// region, the largest font-size at which nothing overflows it (the region's scroll size is
// its client size), by bisection. Each try lays out the region alone: a region is a size
// container (app.css), so its content cannot move anything outside it.
//
// The floors are the readable sizes at three metres, as a share of the viewport's shorter side: a pay or a
// hand name a player can win at least 48 px on a 1080-pixel side (4.45 %), 36 px at the
// least; a history row, a chance, a badge at least 32 px there (2.97 %), 24 px at the
// least; the largest pays figure 8 % of the side. An element says which floor
// it keeps with data-min="pays", "small" or "big"; a region's floor is the font-size at
// which each of its marked elements reaches its own.
//
// What comes first: the pay table at its floor (it takes up to GROW of the page if it
// must); then the round at its floor and the history's KEEP newest rows at theirs (the pay
// table gives up size above its floor for them; the round's share against the history's
// moves, --round-fr); then the pay table grows as far as the layout's share allows. The
// layout (app.css) gives the pay table a share of the page (--pays-h or --pays-w) and says
// which way it is shrunk to the table's size (--pays-wrap), so what it does not use goes to
// the round and the history. The history shows as many rows as fit at its floor, newest
// first, and its caption says how many. The same page drawn again (the same regions, the
// same viewport) reuses the sizes found, checked by one layout; a page whose content changed
// starts from the sizes of last time (STEADY: two layouts a region when they still hold).

export function floors(width = window.innerWidth, height = window.innerHeight) {
  const side = Math.min(width, height);
  return {
    pays: Math.max(36, 0.0445 * side),
    small: Math.max(24, 0.0297 * side),
    big: 0.08 * side,
  };
}

const STEPS = 9; // bisection: within 0.2 % of the best size
const BALANCE = 5; // steps of the pay table's size against the round's and the history's
const GROW = "90%"; // the share of the page a pay table may take to reach its floor
const MAX = 2.2; // no base larger than this many times its floor
const KEEP = 5; // the history's rows the pay table makes room for
// The round's share against the history's, in steps from a fifth to five times.
const ROUND_SHARES = ["0.2fr", "0.3fr", "0.45fr", "0.7fr", "1fr", "1.5fr", "2.2fr", "3.4fr", "5fr"];
let remembered = null; // {key, sizes: [[selector, size, rows, wrap]], pays: {h, w}}
// Each region's last size (and the history's rows and mode) per layout, the start of the
// next fit of the same layout (its content changed: a roll, a round). `warm` is the layout
// while a first pass may use them; the balancing passes search from scratch.
const hints = new Map();
let warm = null;
const STEADY = 0.03; // a region grows from its last size only if it can take 3 % more

function px(el) {
  return parseFloat(getComputedStyle(el).fontSize);
}

// Whether the element's content fits it: no overflow (the scroll sizes, in whole pixels),
// no child past its edges by a fraction of a pixel either (the boxes are not rounded), and
// no marked block wider than itself (a pays figure that does not wrap, in a panel beside
// another, would overflow into it and not out of the region; a table's cells grow instead,
// and an inline span has no width of its own: BLOCKS leaves them out).
const BLOCKS = "[data-min]:not(td):not(th):not(span):not(tbody):not(caption)";
function fits(el) {
  if (el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight) return false;
  const box = el.getBoundingClientRect();
  for (const child of el.children) {
    const r = child.getBoundingClientRect();
    if (r.bottom > box.bottom || r.right > box.right) return false;
  }
  for (const marked of el.querySelectorAll(BLOCKS)) {
    if (marked.clientWidth && marked.scrollWidth > marked.clientWidth) return false;
  }
  return true;
}

// The font-size the region needs for each of its marked elements to reach its floor (one
// element of each kind asked: the same tag, classes and floor size alike).
function floorOf(region, limits) {
  const base = px(region);
  let floor = limits.small;
  const asked = new Set();
  for (const el of region.querySelectorAll("[data-min]")) {
    const kind = `${el.tagName}.${el.className}|${el.dataset.min}`;
    if (asked.has(kind)) continue;
    asked.add(kind);
    const need = limits[el.dataset.min];
    if (need) floor = Math.max(floor, (need * base) / px(el));
  }
  return floor;
}

function setSize(el, size) {
  el.style.fontSize = `${size.toFixed(2)}px`;
}

// The largest size in [low, high] at which the element fits, or `low` when none does.
function largest(el, low, high) {
  setSize(el, high);
  if (fits(el)) return high;
  let lo = low;
  let hi = high;
  for (let i = 0; i < STEPS; i += 1) {
    const mid = (lo + hi) / 2;
    setSize(el, mid);
    if (fits(el)) lo = mid;
    else hi = mid;
  }
  setSize(el, lo);
  return lo;
}

function historyOf(region) {
  return region.querySelector("table.history");
}

function rowsOf(table) {
  return [...table.tBodies[0].rows].filter((r) => !r.classList.contains("empty"));
}

// The history's rows: the newest `count` shown, the others hidden; the caption says so.
function showRows(table, count, wrap) {
  const rows = rowsOf(table);
  const shown = Math.min(count, rows.length);
  rows.forEach((r, i) => { r.hidden = i >= shown; });
  table.classList.toggle("wrap", wrap);
  const caption = table.querySelector("caption");
  if (caption && table.captionFor) caption.textContent = table.captionFor(shown);
  table.dataset.shown = String(shown);
}

// Fit one region: its size and, for the history, how many rows and whether its cells may
// wrap (one line a row first). Returns {size, floor, rows, wrap}.
function fitRegion(region, limits, high = null) {
  const floor = floorOf(region, limits);
  const top = high === null ? MAX * floor : high;
  const low = Math.min(floor, top);
  const hint = warm ? hints.get(`${warm}|${region.dataset.region}`) : null;
  const table = historyOf(region);
  let rows = 0;
  let wrap = false;
  if (table) {
    const total = rowsOf(table).length;
    let best = null;
    // As many rows as last time (one more if it fits), in the same mode, when that holds.
    if (hint && total) {
      const count = Math.min(total, Math.max(hint.rows, 1));
      setSize(region, floor);
      showRows(table, count, hint.wrap);
      if (fits(region)) {
        best = { rows: count, wrap: hint.wrap };
        if (count < total) {
          showRows(table, count + 1, hint.wrap);
          if (fits(region)) best = null; // more fit now: search
        }
      }
    }
    for (const mode of best ? [] : [false, true]) {
      setSize(region, floor);
      let count = total;
      showRows(table, count, mode);
      while (count > 1 && !fits(region)) {
        count -= 1;
        showRows(table, count, mode);
      }
      if (fits(region) && (!best || count > best.rows)) best = { rows: count, wrap: mode };
      if (best && best.rows === total) break;
    }
    ({ rows, wrap } = best || { rows: Math.min(1, total), wrap: true });
    showRows(table, rows, wrap);
  }
  let size = null;
  // The size of last time, if it still fits and the region could not take STEADY more:
  // two layouts instead of a bisection, and text that does not change size every roll.
  if (hint && hint.size >= low && hint.size <= top) {
    setSize(region, hint.size);
    if (fits(region)) {
      const more = Math.min(top, hint.size * (1 + STEADY));
      setSize(region, more);
      size = more > hint.size && fits(region) ? largest(region, more, top) : hint.size;
      setSize(region, size);
    }
  }
  if (size === null) {
    // Between the floor and the top when it fits at its floor, else under it (short).
    setSize(region, low);
    size = fits(region) ? largest(region, low, top) : largest(region, Math.min(6, top), low);
  }
  region.dataset.fit = size + 0.01 >= floor ? "ok" : "short";
  return { size, floor, rows, wrap };
}

// How far the pay table's content reaches in its region (its shrink-wrapped size).
function extent(region, axis) {
  const box = region.getBoundingClientRect();
  let far = 0;
  for (const child of region.children) {
    const r = child.getBoundingClientRect();
    far = Math.max(far, axis === "height" ? r.bottom - box.top : r.right - box.left);
  }
  return Math.ceil(far + 1);
}

// The pay table in its share (`share`: the layout's default when null), at most `high`
// px, then the layout shrunk to it.
function fitPays(main, pays, limits, wrap, share, high) {
  const variable = wrap === "height" ? "--pays-h" : wrap === "width" ? "--pays-w" : null;
  if (variable) {
    if (share === null) main.style.removeProperty(variable);
    else main.style.setProperty(variable, share);
  }
  let done = { share, ...fitRegion(pays, limits, high) };
  // A table short of its floor in the layout's share takes what more of the page it needs
  // for its floor (up to GROW), at the round's and the history's expense.
  if (variable && done.size + 0.01 < done.floor && share === null) {
    main.style.setProperty(variable, GROW);
    done = { share: GROW, ...fitRegion(pays, limits, done.floor) };
  }
  if (variable) main.style.setProperty(variable, `${extent(pays, wrap)}px`);
  return done;
}

function others(main, limits) {
  const found = new Map();
  for (const region of main.querySelectorAll(".region:not(.region-pays)")) {
    found.set(region, fitRegion(region, limits));
  }
  return found;
}

// The round and the history in what the pay table leaves; whether both reach their floors
// and the history shows KEEP rows (or all it has).
function rest(main, limits) {
  others(main, limits);
  balanceRound(main, limits);
  for (const region of main.querySelectorAll(".region:not(.region-pays)")) {
    if (region.dataset.fit !== "ok") return false;
    const table = historyOf(region);
    if (table && Number(table.dataset.shown) < Math.min(KEEP, rowsOf(table).length)) return false;
  }
  return true;
}

function remember(key, main) {
  const sizes = [...main.querySelectorAll(".region")].map((region) => {
    const table = historyOf(region);
    return [region.dataset.region, region.style.fontSize, region.dataset.fit,
      table ? Number(table.dataset.shown) : 0, table ? table.classList.contains("wrap") : false];
  });
  remembered = { key, sizes, h: main.style.getPropertyValue("--pays-h"), w: main.style.getPropertyValue("--pays-w"),
    round: main.style.getPropertyValue("--round-fr") };
}

// The sizes found for the same page before, if they still fit.
function reuse(key, main) {
  if (!remembered || remembered.key !== key) return false;
  main.style.setProperty("--pays-h", remembered.h);
  main.style.setProperty("--pays-w", remembered.w);
  main.style.setProperty("--round-fr", remembered.round);
  for (const [name, size, status, rows, wrap] of remembered.sizes) {
    const region = main.querySelector(`.region[data-region="${name}"]`);
    if (!region) return false;
    region.style.fontSize = size;
    region.dataset.fit = status;
    const table = historyOf(region);
    if (table) showRows(table, rows, wrap);
    if (!fits(region)) return false;
  }
  return true;
}

// The round and the history share what the pay table leaves (app.css: --round-fr, the
// round's share against the history's): the round short of its floor (a long hand name in
// a strip) takes more, step by step, as long as the history keeps a row at its floor; a
// history short of KEEP rows takes more from a round above its floor, as long as the round
// keeps it.
function balanceRound(main, limits) {
  const round = main.querySelector(".region-round");
  const history = main.querySelector(".region-history");
  if (!round || !history || !historyOf(history)) return;
  const state = () => ({
    round: round.dataset.fit === "ok",
    history: history.dataset.fit === "ok",
    rows: Number(historyOf(history).dataset.shown),
  });
  const want = Math.min(KEEP, rowsOf(historyOf(history)).length);
  const start = ROUND_SHARES.indexOf("1fr");
  if (main.style.getPropertyValue("--round-fr")) {
    main.style.removeProperty("--round-fr");
    others(main, limits);
  }
  let now = state();
  const step = !now.round ? 1 : now.rows < want ? -1 : 0;
  if (!step) return;
  let best = start;
  for (let i = start + step; i >= 0 && i < ROUND_SHARES.length; i += step) {
    main.style.setProperty("--round-fr", ROUND_SHARES[i]);
    others(main, limits);
    now = state();
    if (step > 0) {
      if (!now.history) break; // the round may not take the history's last row
      best = i;
      if (now.round) break;
    } else {
      if (!now.round) break; // nor the history the round's floor
      best = i;
      if (now.rows >= want) break;
    }
  }
  if (ROUND_SHARES[best] !== main.style.getPropertyValue("--round-fr")) {
    main.style.setProperty("--round-fr", ROUND_SHARES[best]);
    others(main, limits);
  }
}

// Fit one line of text (the page's top line: the table and its game) between `low` and
// `high` px; a line too long for `low` wraps there (a 64-character table id), never cut.
export function fitLine(el, low, high) {
  el.classList.remove("wrap");
  const size = largest(el, low, high);
  el.classList.toggle("wrap", !fits(el));
  return size;
}

// Fit every region of `main` (a player page's), in the order above.
export function fitPage(main) {
  const limits = floors();
  const view = `${window.innerWidth}x${window.innerHeight}`;
  const layout = `${view}|${document.body.className}|${main.dataset.game || ""}|`
    + `${document.getElementById("top").offsetHeight}|${document.getElementById("banner").offsetHeight}`;
  const key = `${layout}|${main.innerHTML}`;
  if (!reuse(key, main)) {
    main.style.removeProperty("--pays-h");
    main.style.removeProperty("--pays-w");
    main.style.removeProperty("--round-fr");
    const pays = main.querySelector(".region-pays");
    const wrap = getComputedStyle(main).getPropertyValue("--pays-wrap").trim();
    main.dataset.wrap = wrap; // a table shrunk to its width is not stretched to the region's
    warm = layout;
    if (!pays) {
      rest(main, limits);
    } else {
      const first = fitPays(main, pays, limits, wrap, null, null);
      // The round or the history short of its floor, or of KEEP rows: the pay table gives
      // up size above its floor (bisection), never more than that.
      if ((wrap === "height" || wrap === "width") && !rest(main, limits) && first.size > first.floor + 0.5) {
        warm = null;
        let lo = first.floor;
        let hi = first.size;
        for (let i = 0; i < BALANCE; i += 1) {
          const mid = (lo + hi) / 2;
          fitPays(main, pays, limits, wrap, first.share, mid);
          if (rest(main, limits)) lo = mid;
          else hi = mid;
        }
        fitPays(main, pays, limits, wrap, first.share, lo);
        rest(main, limits);
      }
    }
    warm = null;
    for (const region of main.querySelectorAll(".region")) {
      const table = historyOf(region);
      hints.set(`${layout}|${region.dataset.region}`, {
        size: parseFloat(region.style.fontSize),
        rows: table ? Number(table.dataset.shown) : 0,
        wrap: table ? table.classList.contains("wrap") : false,
      });
    }
    remember(key, main);
  }
  document.body.dataset.fitted = view;
}
