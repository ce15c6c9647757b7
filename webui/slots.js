// The slots panel: each slot's state, cached tokens and where its KV is
// (the page pool, or spilled to a tier), with save / restore / erase
// through POST /slots/{id}?action=... (the server needs --slot-save-path).
import { postJson } from './api.js';
import { slotFiles, rememberSlotFile } from './store.js';
import { slotColor } from './kvmap.js';

const $ = (id) => document.getElementById(id);
let refresh = () => {};
const cards = new Map();  // slot id -> its card, kept so inputs keep focus
// Whether the server takes slot actions (/props' slot_save_enabled): without
// --slot-save-path they can only fail, so their controls are disabled.
let actionsEnabled = true;
const kNoSlotSavePath = 'Start the server with --slot-save-path to save, restore and erase slots';

function applyActionsEnabled(card) {
  for (const control of card.querySelectorAll('.row input, .row button')) {
    control.disabled = !actionsEnabled;
    control.title = actionsEnabled ? '' : kNoSlotSavePath;
  }
}

// Where a slot's KV lives, as far as /slots and /kv tell: a spilled slot is
// in whichever spill tiers hold entries.
function tierOf(slot, kv) {
  if (!slot.n_cached) return '–';
  if (!slot.spilled) return 'pool';
  const held = ((kv && kv.tiers) || []).filter((t) => t.kind === 'spill' && t.num_entries > 0);
  return held.length ? held.map((t) => t.name).join('/') : 'spilled';
}

function button(label, text, action) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  b.setAttribute('aria-label', label);
  b.onclick = action;
  return b;
}

async function act(id, action, filename) {
  const msg = $('slot-msg');
  msg.textContent = action + ' slot ' + id + '…';
  try {
    const body = action === 'erase' ? {} : { filename };
    const r = await postJson('/slots/' + id + '?action=' + action, body);
    if (action === 'save') rememberSlotFile(filename);
    const n = r.n_saved ?? r.n_restored ?? r.n_erased ?? 0;
    const ms = r.timings ? Object.values(r.timings)[0] : null;
    msg.textContent = action + ' slot ' + id + ': ' + n + ' tokens' +
      (filename && action !== 'erase' ? ' (' + filename + ')' : '') +
      (ms !== null ? ' in ' + Number(ms).toFixed(1) + ' ms' : '');
    msg.dataset.last = action + ':' + id + ':ok';
  } catch (e) {
    msg.textContent = action + ' slot ' + id + ' failed: ' + e.message;
    msg.dataset.last = action + ':' + id + ':error';
  }
  refresh();
}

function makeCard(id) {
  const card = document.createElement('div');
  card.className = 'slot';
  card.dataset.slot = String(id);
  card.style.setProperty('--slot-color', slotColor(id));
  card.innerHTML = '<div class="head"><span class="swatch"></span><b></b>' +
    '<span class="cached"></span><span class="tier muted"></span><span class="state"></span></div>';
  card.querySelector('b').textContent = 'slot ' + id;
  const file = document.createElement('input');
  file.type = 'text';
  file.value = 'slot' + id + '.bin';
  file.setAttribute('list', 'slot-files');
  file.setAttribute('aria-label', 'File name for slot ' + id);
  file.className = 'file';
  const row = document.createElement('div');
  row.className = 'row';
  row.append(file,
    button('Save slot ' + id, 'Save', () => act(id, 'save', file.value.trim())),
    button('Restore slot ' + id, 'Restore', () => act(id, 'restore', file.value.trim())),
    button('Erase slot ' + id, 'Erase', () => act(id, 'erase')));
  row.lastChild.className = 'danger';
  card.append(row);
  applyActionsEnabled(card);
  return card;
}

// Draws /slots (and the tiers of the latest /kv).
export function drawSlots(slots, kv) {
  const box = $('slots');
  for (const s of slots) {
    if (!cards.has(s.id)) {
      cards.set(s.id, makeCard(s.id));
      box.append(cards.get(s.id));
    }
    const card = cards.get(s.id);
    card.dataset.cached = String(s.n_cached);
    card.dataset.state = s.state;
    card.querySelector('.cached').textContent = s.n_cached + ' tokens';
    card.querySelector('.tier').textContent = tierOf(s, kv);
    card.querySelector('.state').textContent = s.state;
  }
  const list = $('slot-files');
  if (list.children.length !== slotFiles.length ||
      [...list.children].some((o, i) => o.value !== slotFiles[i])) {
    list.replaceChildren(...slotFiles.map((f) => {
      const o = document.createElement('option');
      o.value = f;
      return o;
    }));
  }
}

export function initSlots(refreshNow) { refresh = refreshNow; }

// Enables or disables the slot actions (from /props' slot_save_enabled).
export function setSlotActionsEnabled(enabled) {
  actionsEnabled = enabled;
  for (const card of cards.values()) applyActionsEnabled(card);
  const msg = $('slot-msg');
  if (!enabled && !msg.dataset.last) msg.textContent = kNoSlotSavePath + '.';
}
