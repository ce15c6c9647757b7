// The web UI's entry: reads /props once, then polls /kv and /slots twice a
// second while the page is visible (faster than any person reads, slow
// enough to cost the server nothing measurable), and wires the settings.
import { getJson, postJson } from './api.js';
import { initChat } from './chat.js';
import { drawKv } from './kvmap.js';
import { drawSlots, initSlots, setSlotActionsEnabled } from './slots.js';
import { settings, saveSettings, DEFAULT_SETTINGS } from './store.js';

const $ = (id) => document.getElementById(id);
const POLL_MS = 500;
const speed = { tps: [], ttft: [] };
let polling = false;
let polls = 0;
let timer = 0;

function setStatus(text, ok) {
  const s = $('server-status');
  s.textContent = text;
  s.className = 'status ' + (ok ? 'ok' : 'bad');
}

// One bar per request, the newest on the right, scaled to the largest.
function spark(svg, values) {
  const w = 120, h = 28, slots = 30;
  const max = Math.max(...values, 1e-9);
  const bw = w / slots;
  const x0 = w - values.length * bw;
  svg.innerHTML = values.map((v, i) => {
    const bh = Math.max(1, (h - 2) * v / max);
    return '<rect x="' + (x0 + i * bw + 0.5).toFixed(1) + '" y="' + (h - bh).toFixed(1) +
      '" width="' + (bw - 1).toFixed(1) + '" height="' + bh.toFixed(1) + '"/>';
  }).join('');
}

function addSpeed({ tps, ttft_ms }) {
  speed.tps.push(tps);
  speed.ttft.push(ttft_ms);
  for (const k of ['tps', 'ttft']) if (speed[k].length > 30) speed[k].shift();
  $('tps-now').textContent = tps.toFixed(1);
  $('ttft-now').textContent = ttft_ms.toFixed(0) + ' ms';
  spark($('tps-spark'), speed.tps);
  spark($('ttft-spark'), speed.ttft);
}

// A server that sleeps when idle (--sleep-idle-seconds) would be kept
// awake by /kv and /slots (they need the engine), so the page polls them
// only for a while after the person last did something in it, and else
// asks the read-only /props whether the server sleeps.
let sleepIdle = 0;
let activeUntil = 0;
function touch() { activeUntil = performance.now() + 20000; }

async function pollIdle() {
  const p = await getJson('/props');
  setStatus(p.is_sleeping ? 'sleeping (idle)' : 'connected · map paused while idle', true);
}

async function poll() {
  if (polling) return;
  polling = true;
  try {
    if (sleepIdle > 0 && performance.now() > activeUntil) return await pollIdle();
    const [kv, slots] = await Promise.all([getJson('/kv'), getJson('/slots')]);
    drawKv(kv, slots.map((s) => s.id));
    $('kvmap').dataset.polls = String(++polls);  // lets a test wait for fresh data
    drawSlots(slots, kv);
    if (slots.some((s) => s.is_processing)) touch();  // a request runs: keep watching
    setStatus('connected', true);
  } catch (e) {
    setStatus(e.status === 401 ? 'API key needed (Settings)' : 'server: ' + e.message, false);
  } finally {
    polling = false;
  }
}

function schedule() {
  clearTimeout(timer);
  if (document.visibilityState === 'visible') {
    timer = setTimeout(async () => { await poll(); schedule(); }, POLL_MS);
  }
}

function refreshNow() { poll(); }

function describeModel(props) {
  // A long label's gist goes in the header, all of it in the note below.
  const label = (props.model_label || '').split(' (')[0] || props.model_alias;
  $('model-name').textContent = label;
  $('model-name').title = props.model_path;
  const tpl = typeof props.chat_template === 'string' ? props.chat_template : '';
  $('model-template').textContent = 'template: ' +
    (tpl.length > 40 ? 'Jinja (' + tpl.length + ' bytes)' : tpl || 'none') +
    ' · ' + props.total_slots + (props.total_slots === 1 ? ' slot · ' : ' slots · ') +
    props.n_ctx_total + ' KV cells';
  if (props.model_label) {
    const note = $('model-note');
    note.hidden = false;
    note.textContent = 'Serving ' + props.model_label +
      '. Try "Once upon a time" in text mode.';
  }
}

async function loadProps() {
  try {
    const props = await getJson('/props');
    describeModel(props);
    setSlotActionsEnabled(props.slot_save_enabled !== false);
    return props;
  } catch (e) {
    setStatus(e.status === 401 ? 'API key needed (Settings)' : 'server: ' + e.message, false);
    return null;
  }
}

function initSettings() {
  const fields = Object.keys(DEFAULT_SETTINGS);
  const input = (k) => $(k === 'apiKey' ? 'set-api-key' : 'set-' + k);
  const fill = () => fields.forEach((k) => { input(k).value = settings[k]; });
  fields.forEach((k) => input(k).addEventListener('change', () => {
    const el = input(k);
    settings[k] = el.type === 'number' ? Number(el.value) : el.value;
    saveSettings();
    if (k === 'apiKey') { loadProps(); poll(); }
  }));
  $('settings-open').onclick = () => { fill(); $('settings').showModal(); };
  $('settings-reset').onclick = () => {
    Object.assign(settings, DEFAULT_SETTINGS, { apiKey: settings.apiKey });
    saveSettings();
    fill();
  };
}

async function main() {
  initSettings();
  initSlots(refreshNow);
  const props = await loadProps();
  sleepIdle = (props && props.sleep_idle_seconds) || 0;
  touch();
  for (const ev of ['pointerdown', 'keydown']) document.addEventListener(ev, touch, true);
  // A model without a chat template of its own (the embedded stories model)
  // continues text; others chat.
  const storyModel = !props || props.model_label;
  initChat(storyModel ? 'text' : 'chat', addSpeed);
  $('defrag').onclick = async () => {
    try { await postJson('/kv/defrag', {}); } catch (e) { $('kv-event').textContent = 'defrag: ' + e.message; }
    poll();
  };
  document.addEventListener('visibilitychange', schedule);
  await poll();
  schedule();
  $('prompt').focus();
}

main();
