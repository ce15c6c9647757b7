// The live KV map: GET /kv drawn as a grid, one cell per page (or per
// group of pages on a big pool), coloured by the slot that holds it; free
// pages dark, pages several slots share striped; the cells the last restore,
// erase or defrag changed outlined. Each cell carries data-slot ("free" or
// the slot id) and data-shared, which the UI test reads.

const $ = (id) => document.getElementById(id);
const PALETTE = ['#4e9af1', '#f5a524', '#45c486', '#e45d8f', '#a97bf2', '#36c5d6',
  '#d9d04b', '#f07f4f', '#8fa4bf', '#7cd3a0', '#c990e8', '#f2b8a0'];
const MAX_CELLS = 4096;

export function slotColor(slot) { return PALETTE[slot % PALETTE.length]; }

let previous = null;    // the last snapshot's per-cell owners
let lastEventSeq = 0;
let outlined = new Set();  // cells the last event changed

function formatBytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + ' GiB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' B';
}

// Per cell: the owning slot (lowest id) or null, and whether shared.
function cellsOf(kv) {
  const group = Math.max(1, Math.ceil(kv.num_pages / MAX_CELLS));
  const shared = new Set(kv.shared_pages || []);
  const cells = [];
  for (let i = 0; i < kv.num_pages; i += group) {
    let owner = null;
    let isShared = false;
    for (let p = i; p < Math.min(i + group, kv.num_pages); ++p) {
      const s = kv.page_slot[p];
      if (s !== null && (owner === null || s < owner)) owner = s;
      isShared = isShared || shared.has(p);
    }
    cells.push({ owner, shared: isShared });
  }
  return { cells, group };
}

function ensureCells(n) {
  const map = $('kvmap');
  while (map.children.length < n) {
    const d = document.createElement('div');
    d.className = 'cell';
    map.append(d);
  }
  while (map.children.length > n) map.lastChild.remove();
  return map.children;
}

function drawCells(cells, changed) {
  const els = ensureCells(cells.length);
  cells.forEach((c, i) => {
    const el = els[i];
    const cls = 'cell' + (c.owner === null ? '' : ' used') + (c.shared ? ' shared' : '') +
      (changed.has(i) ? ' changed' : '');
    if (el.className !== cls) el.className = cls;
    el.dataset.slot = c.owner === null ? 'free' : String(c.owner);
    el.dataset.shared = c.shared ? '1' : '0';
    if (c.owner !== null) el.style.setProperty('--slot-color', slotColor(c.owner));
    else el.style.removeProperty('--slot-color');
  });
}

function drawStats(kv, group) {
  const p = kv.pool;
  const pct = (x) => (100 * x).toFixed(1) + '%';
  const rows = [
    ['pages', kv.num_pages + ' × ' + kv.page_size + ' cells'],
    ['used cells', p.used_cells + ' / ' + p.num_cells],
    ['allocated', pct(p.allocated_cells / Math.max(1, p.num_cells))],
    ['fragmentation', pct(p.fragmentation)],
    ['free runs', String(p.num_free_runs)],
    ['largest free run', p.largest_free_run_cells + ' cells'],
  ];
  if (group > 1) rows.push(['one square', group + ' pages']);
  $('kv-stats').replaceChildren(...rows.map(([k, v]) => {
    const d = document.createElement('div');
    d.innerHTML = '<span class="muted"></span> <b></b>';
    d.firstChild.textContent = k;
    d.lastChild.textContent = v;
    d.dataset.stat = k;
    return d;
  }));
}

function tierBar(name, used, budget, detail) {
  const t = document.createElement('div');
  t.className = 'tier';
  t.dataset.tier = name;
  const label = document.createElement('div');
  label.className = 'label';
  const a = document.createElement('span');
  a.textContent = name;
  const b = document.createElement('span');
  b.className = 'muted';
  b.textContent = detail;
  label.append(a, b);
  const bar = document.createElement('div');
  bar.className = 'bar';
  bar.setAttribute('role', 'meter');
  bar.setAttribute('aria-label', name + ' occupancy');
  bar.setAttribute('aria-valuemin', '0');
  bar.setAttribute('aria-valuemax', String(budget || 1));
  bar.setAttribute('aria-valuenow', String(used));
  const fill = document.createElement('span');
  fill.style.width = (budget ? Math.min(100, 100 * used / budget) : 0) + '%';
  bar.append(fill);
  t.append(label, bar);
  return t;
}

function drawTiers(kv) {
  const p = kv.pool;
  const bars = [tierBar('page pool', p.allocated_cells, p.num_cells,
    p.allocated_cells + ' / ' + p.num_cells + ' cells')];
  for (const t of kv.tiers || []) {
    const name = (t.kind === 'prefix' ? 'prefix store: ' : 'spill: ') + t.name;
    bars.push(tierBar(name, t.used_bytes, t.budget_bytes,
      formatBytes(t.used_bytes) + (t.budget_bytes ? ' / ' + formatBytes(t.budget_bytes) : '') +
      ' · ' + t.num_entries + (t.kind === 'prefix' ? ' pages' : ' entries')));
  }
  $('tiers').replaceChildren(...bars);
}

function drawLegend(slotIds) {
  const items = [['free', 'var(--free)'],
    ['shared', 'repeating-linear-gradient(45deg, #8fa4bf 0 3px, var(--shared) 3px 5px)']]
    .concat(slotIds.map((s) => ['slot ' + s, slotColor(s)]));
  $('kv-legend').replaceChildren(...items.map(([name, color]) => {
    const s = document.createElement('span');
    const i = document.createElement('i');
    i.style.background = color;
    s.append(i, document.createTextNode(name));
    return s;
  }));
}

function describeEvent(e, n) {
  const when = new Date(e.unix_ms).toLocaleTimeString();
  const what = e.action + (e.id_slot === null ? '' : ' · slot ' + e.id_slot);
  return 'Last: ' + what + ' at ' + when + ' (' + n + ' squares changed, outlined)';
}

// The map in words, for screen readers: pages per slot, shared and free.
function mapSummary(kv) {
  const per = new Map();
  let free = 0;
  for (const s of kv.page_slot) {
    if (s === null) free += 1;
    else per.set(s, (per.get(s) || 0) + 1);
  }
  const slots = [...per.entries()].sort((a, b) => a[0] - b[0])
    .map(([s, n]) => 'slot ' + s + ' ' + n);
  return 'KV page map, ' + kv.num_pages + ' pages: ' +
    (slots.length ? slots.join(', ') + ', ' : '') +
    (kv.shared_pages || []).length + ' shared, ' + free + ' free';
}

// Draws a /kv snapshot; `slotIds` are the server's slots (for the legend).
export function drawKv(kv, slotIds) {
  const { cells, group } = cellsOf(kv);
  const owners = cells.map((c) => c.owner);
  const e = kv.last_event;
  if (e && e.seq !== lastEventSeq) {
    // The cells that differ from the snapshot before the event stay
    // outlined until the next one.
    outlined = new Set();
    // A slot action outlines that slot's cells only (the others may have
    // changed too, by generation, since the snapshot before it).
    const mine = (o) => e.id_slot === null || o === e.id_slot;
    if (previous && previous.length === owners.length) {
      owners.forEach((o, i) => {
        if (o !== previous[i] && (mine(o) || mine(previous[i]))) outlined.add(i);
      });
    }
    lastEventSeq = e.seq;
    if (previous) $('kv-event').textContent = describeEvent(e, outlined.size);
    $('kv-event').dataset.seq = String(e.seq);
  }
  previous = owners;
  drawCells(cells, outlined);
  $('kvmap').setAttribute('aria-label', mapSummary(kv));
  drawStats(kv, group);
  drawTiers(kv);
  drawLegend(slotIds);
}
