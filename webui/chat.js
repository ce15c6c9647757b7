// The chat: conversations (kept in the browser), streamed replies with
// stop and regenerate, in one of two modes: "text" continues the
// conversation's text with /completion (for story models such as the
// embedded stories260K), "chat" sends its messages to /v1/chat/completions.
import { stream } from './api.js';
import { renderMarkdown } from './markdown.js';
import {
  settings, conversations, saveConversations, newConversation, deleteConversation,
} from './store.js';

const $ = (id) => document.getElementById(id);
let current = null;      // the open conversation
let controller = null;   // the running request's AbortController
let onSpeed = () => {};  // called with {tps, ttft_ms} after each reply

function samplingFields() {
  return {
    temperature: Number(settings.temperature), top_k: Number(settings.top_k),
    top_p: Number(settings.top_p), min_p: Number(settings.min_p),
    seed: Number(settings.seed),
  };
}

function messageElement(m) {
  const el = document.createElement('article');
  el.className = 'msg ' + (m.role === 'user' ? 'user' : 'assistant');
  const who = document.createElement('div');
  who.className = 'who';
  who.textContent = m.role === 'user' ? 'You' : 'Model';
  const body = document.createElement('div');
  body.className = 'body';
  el.append(who, body);
  fillMessage(el, m);
  return el;
}

function fillMessage(el, m) {
  const body = el.querySelector('.body');
  if (m.role === 'user') {
    body.textContent = m.content;
  } else {
    body.innerHTML = renderMarkdown(m.content);
  }
  let stats = el.querySelector('.stats');
  if (m.stats || m.error) {
    if (!stats) {
      stats = document.createElement('div');
      stats.className = 'stats';
      el.append(stats);
    }
    stats.textContent = m.error ? '' : m.stats;
    if (m.error) {
      const e = document.createElement('span');
      e.className = 'error';
      e.textContent = 'Error: ' + m.error;
      stats.append(e);
    }
  }
}

function renderMessages() {
  const box = $('messages');
  box.replaceChildren(...current.messages.map(messageElement));
  box.scrollTop = box.scrollHeight;
}

function renderConversations() {
  const list = $('conversations');
  list.replaceChildren(...conversations.map((c) => {
    const li = document.createElement('li');
    if (c === current) li.className = 'current';
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'open';
    open.textContent = c.title;
    open.setAttribute('aria-label', 'Open conversation: ' + c.title);
    if (c === current) open.setAttribute('aria-current', 'true');
    open.onclick = () => select(c);
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'del';
    del.textContent = '×';
    del.setAttribute('aria-label', 'Delete conversation: ' + c.title);
    del.onclick = () => {
      deleteConversation(c.id);
      select(conversations[0] || newConversation($('mode').value));
    };
    li.append(open, del);
    return li;
  }));
}

function select(c) {
  if (controller) controller.abort();
  current = c;
  $('mode').value = c.mode;
  renderConversations();
  renderMessages();
}

function setBusy(busy) {
  $('send').disabled = busy;
  $('regenerate').disabled = busy;
  $('stop').disabled = !busy;
}

// Text mode's prompt: the messages run together, with a space where a
// message typed after a reply would otherwise glue onto its last word.
function joinText(messages) {
  let text = '';
  for (const m of messages) {
    if (text && !/\s$/.test(text) && /^[\w"']/.test(m.content) && m.role === 'user') text += ' ';
    text += m.content;
  }
  return text;
}

function requestFor(conv) {
  const n = Number(settings.n_predict);
  if (conv.mode === 'text') {
    return ['/completion', { prompt: joinText(conv.messages), n_predict: n, ...samplingFields() }];
  }
  const messages = conv.messages.map((m) => ({ role: m.role, content: m.content }));
  if (settings.system) messages.unshift({ role: 'system', content: settings.system });
  return ['/v1/chat/completions', { messages, max_tokens: n, ...samplingFields() }];
}

// Streams a reply to the open conversation into a new assistant message.
async function generate() {
  const conv = current;
  const reply = { role: 'assistant', content: '' };
  conv.messages.push(reply);
  const el = messageElement(reply);
  el.classList.add('streaming');
  el.setAttribute('aria-busy', 'true');  // read out once, when complete
  $('messages').append(el);
  setBusy(true);
  controller = new AbortController();
  const started = performance.now();
  let first = 0;
  let tokens = 0;
  let timings = null;
  const [path, body] = requestFor(conv);
  try {
    await stream(path, body, (ev) => {
      const piece = ev.choices ? (ev.choices[0] && ev.choices[0].delta &&
        ev.choices[0].delta.content) || '' : ev.content || '';
      if (ev.timings) timings = ev.timings;
      if (!piece) return;
      if (!first) first = performance.now();
      tokens += 1;
      reply.content += piece;
      if (conv === current) {
        fillMessage(el, reply);
        $('messages').scrollTop = $('messages').scrollHeight;
      }
    }, controller.signal);
  } catch (e) {
    if (e.name !== 'AbortError') reply.error = e.message;
  }
  const end = performance.now();
  const n = timings ? timings.predicted_n : tokens;
  const tps = timings && timings.predicted_per_second ? timings.predicted_per_second
    : first && end > first ? (tokens - 1) * 1000 / (end - first) : 0;
  const ttft = first ? first - started : 0;
  reply.stats = n + ' tokens · ' + tps.toFixed(1) + ' tok/s · first token ' +
    ttft.toFixed(0) + ' ms' + (controller.signal.aborted ? ' · stopped' : '');
  controller = null;
  el.classList.remove('streaming');
  el.removeAttribute('aria-busy');
  el.dataset.done = 'true';
  fillMessage(el, reply);
  setBusy(false);
  saveConversations();
  if (first) onSpeed({ tps, ttft_ms: ttft });
}

function send() {
  const text = $('prompt').value;
  if (!text.trim() || controller) return;
  current.messages.push({ role: 'user', content: text });
  if (current.title === 'New conversation') {
    current.title = text.trim().slice(0, 40);
    renderConversations();
  }
  $('prompt').value = '';
  $('messages').append(messageElement(current.messages[current.messages.length - 1]));
  saveConversations();
  generate();
}

function regenerate() {
  if (controller) return;
  const msgs = current.messages;
  if (msgs.length && msgs[msgs.length - 1].role === 'assistant') msgs.pop();
  if (!msgs.length) return;
  renderMessages();
  generate();
}

export function initChat(defaultMode, speedCallback) {
  onSpeed = speedCallback;
  $('mode').value = defaultMode;
  select(conversations[0] || newConversation(defaultMode));
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('stop').onclick = () => controller && controller.abort();
  $('regenerate').onclick = regenerate;
  $('new-chat').onclick = () => { select(newConversation($('mode').value)); $('prompt').focus(); };
  $('mode').onchange = () => { current.mode = $('mode').value; saveConversations(); };
  $('messages').addEventListener('click', (e) => {
    if (!e.target.classList.contains('copy')) return;
    const code = e.target.parentElement.querySelector('code');
    if (navigator.clipboard) navigator.clipboard.writeText(code.textContent);
  });
}
