// Starts `kvault serve` for a client test file and stops it afterwards.
//
// KVAULT_BIN names the binary (default: build/apps/kvault of this checkout)
// and KVAULT_SHARED the ../shared directory (default: beside the checkout).
// The server listens on a free 127.0.0.1 port; start() resolves once its
// log says "ready:", reading the port from its "listening on" line.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const checkout = path.resolve(here, '..', '..');

export const kvaultBin =
  process.env.KVAULT_BIN || path.join(checkout, 'build', 'apps', 'kvault');
export const sharedDir =
  process.env.KVAULT_SHARED || path.resolve(checkout, '..', 'shared');
export const llama31Template = path.join(
  sharedDir, 'conformance', 'chat-templates', 'meta-llama-Llama-3.1-8B-Instruct.jinja');

// How long the server may take to load the embedded model.
const kStartMs = 60000;

export class KvaultServer {
  constructor(child) {
    this.child = child;
    this.log = [];
    this.port = 0;
  }

  get baseURL() { return `http://127.0.0.1:${this.port}`; }

  // Starts `kvault serve ARGS...` (embedded stories260K unless -m is given).
  static start(args) {
    const child = spawn(kvaultBin, ['serve', '--port', '0', '-t', '1', ...args],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    const server = new KvaultServer(child);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error('kvault did not get ready in time:\n' + server.log.join('')));
      }, kStartMs);
      let pending = '';
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk) => {
        pending += chunk;
        const lines = pending.split('\n');
        pending = lines.pop();
        for (const line of lines) {
          server.log.push(line + '\n');
          const listening = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(line);
          if (listening) server.port = Number(listening[1]);
          if (/ready: /.test(line) && server.port > 0) {
            clearTimeout(timer);
            resolve(server);
          }
        }
      });
      child.on('error', (e) => { clearTimeout(timer); reject(e); });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`kvault exited (${code ?? signal}) before it was ready:\n` +
          server.log.join('')));
      });
    });
  }

  // Stops the server with SIGTERM; resolves with its exit code.
  stop() {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null) return resolve(this.child.exitCode);
      this.child.once('exit', (code) => resolve(code));
      this.child.kill('SIGTERM');
    });
  }

  // GETs `route` (JSON) with the API key, if any.
  async get(route, apiKey) {
    const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
    const r = await fetch(this.baseURL + route, { headers });
    return r.json();
  }
}

// The key the suite's servers want.
export const kSuiteApiKey = 'client-suite-key';

// Starts the server every suite file talks to: two slots, the API key and
// the Llama 3.1 chat template.
export function startSuiteServer() {
  return KvaultServer.start(['-np', '2', '-c', '2048', '--api-key', kSuiteApiKey,
    '--chat-template-file', llama31Template]);
}

// Polls GET /slots until no slot is processing; each poll is a request, so
// the wait is bounded by round trips, not a timer. Returns the slots.
export async function waitSlotsIdle(server, apiKey, maxPolls = 2000) {
  let slots = [];
  for (let i = 0; i < maxPolls; ++i) {
    slots = await server.get('/slots', apiKey);
    if (slots.every((s) => !s.is_processing)) return slots;
  }
  return slots;
}
