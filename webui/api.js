// The server's HTTP API as the UI uses it: JSON GET/POST with the API key
// from the settings, and streamed generation read as server-sent events.
import { settings } from './store.js';

function headers(json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  if (settings.apiKey) h['Authorization'] = 'Bearer ' + settings.apiKey;
  return h;
}

// An error carrying the server's message ({"error": {"message": ...}}).
async function failure(res) {
  let message = res.status + ' ' + res.statusText;
  try {
    const body = await res.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (e) { /* not JSON: keep the status line */ }
  const err = new Error(message);
  err.status = res.status;
  return err;
}

export async function getJson(path) {
  const res = await fetch(path, { headers: headers(false) });
  if (!res.ok) throw await failure(res);
  return res.json();
}

export async function postJson(path, body) {
  const res = await fetch(path, {
    method: 'POST', headers: headers(true), body: JSON.stringify(body || {}),
  });
  if (!res.ok) throw await failure(res);
  return res.json();
}

// Posts `body` with "stream": true and calls onEvent(obj) for each
// `data:` event until the stream ends or `signal` aborts it.
export async function stream(path, body, onEvent, signal) {
  const res = await fetch(path, {
    method: 'POST', headers: headers(true), signal,
    body: JSON.stringify({ ...body, stream: true }),
  });
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        const obj = JSON.parse(data);
        if (obj.error) throw new Error(obj.error.message || 'stream error');
        onEvent(obj);
      }
    }
  }
}
