// kvault's /v1/messages driven by the official Anthropic TypeScript SDK.
// The model is the embedded stories260K: the tests assert structure and
// invariants, never the text's quality.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import Anthropic from '@anthropic-ai/sdk';

import { kSuiteApiKey, startSuiteServer } from './kvault_server.mjs';

const kApiKey = kSuiteApiKey;
let server;
let client;

before(async () => {
  server = await startSuiteServer();
  client = new Anthropic({ apiKey: kApiKey, baseURL: server.baseURL, maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0, 'kvault exits 0 on SIGTERM');
});

const kUser = [{ role: 'user', content: 'Tell me a story about a cat.' }];

function text(message) {
  return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

describe('messages', () => {
  test('non-streamed: the Anthropic shape', async () => {
    const m = await client.messages.create({
      model: 'any', max_tokens: 8, messages: kUser, temperature: 0 });
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.match(m.id, /^msg_/);
    assert.equal(m.content[0].type, 'text');
    assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
    assert.ok(m.usage.input_tokens > 0);
    assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 8);
  });

  test('streamed: events in order, the same text as the whole reply', async () => {
    const params = { model: 'any', max_tokens: 12, messages: kUser, temperature: 0 };
    const whole = await client.messages.create(params);
    const stream = client.messages.stream(params);
    const types = [];
    stream.on('streamEvent', (ev) => types.push(ev.type));
    const final = await stream.finalMessage();
    assert.equal(types[0], 'message_start');
    assert.equal(types.at(-1), 'message_stop');
    assert.ok(types.includes('content_block_delta'));
    assert.equal(text(final), text(whole));
    assert.equal(final.stop_reason, whole.stop_reason);
    assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  });

  test('max_tokens ends the reply with stop_reason max_tokens', async () => {
    const m = await client.messages.create({
      model: 'any', max_tokens: 3, messages: kUser, temperature: 0 });
    assert.equal(m.stop_reason, 'max_tokens');
    assert.equal(m.usage.output_tokens, 3);
  });

  test('stop_sequences: stop_reason stop_sequence naming it', async () => {
    const free = await client.messages.create({
      model: 'any', max_tokens: 24, messages: kUser, temperature: 0 });
    const words = text(free).split(' ').filter((w) => w.length > 2);
    assert.ok(words.length >= 2, text(free));
    const m = await client.messages.create({
      model: 'any', max_tokens: 24, messages: kUser, temperature: 0,
      stop_sequences: [words[1]] });
    assert.equal(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, words[1]);
    assert.equal(text(m), text(free).slice(0, text(free).indexOf(words[1])));
  });

  test('system prompt as a string and as blocks', async () => {
    for (const system of ['Be brief.', [{ type: 'text', text: 'Be brief.' }]]) {
      const m = await client.messages.create({
        model: 'any', max_tokens: 4, system, messages: kUser, temperature: 0 });
      assert.equal(m.type, 'message');
    }
  });

  test('count_tokens counts what create runs', async () => {
    const params = { model: 'any', system: 'Be brief.', messages: kUser };
    const counted = await client.messages.countTokens(params);
    const m = await client.messages.create({ ...params, max_tokens: 2, temperature: 0 });
    // Anthropic's input_tokens leaves out the tokens read from the cache.
    assert.equal(counted.input_tokens,
      m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0));
  });

  test('a tool_use / tool_result round trip is accepted', async () => {
    const m = await client.messages.create({
      model: 'any', max_tokens: 4, temperature: 0,
      tools: [{ name: 'get_weather', description: 'The weather in a city',
        input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1',
          name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1',
          content: 'sunny' }] }] });
    assert.equal(m.role, 'assistant');
  });
});

describe('errors', () => {
  // The body is llama-server's error object (kvault answers as it does).
  test('a bad request is a BadRequestError with llama-server\'s code and message', async () => {
    await assert.rejects(
      client.messages.create({ model: 'any', max_tokens: 4,
        messages: [{ role: 'system', content: 'x' }] }),
      (e) => e instanceof Anthropic.BadRequestError && e.status === 400 &&
        e.error?.error?.type === 'invalid_request_error' && e.error?.error?.code === 400 &&
        /messages\[0\]\.role/.test(e.message));
  });

  test('a wrong key is an AuthenticationError', async () => {
    const wrong = new Anthropic({ apiKey: 'nope', baseURL: server.baseURL, maxRetries: 0 });
    await assert.rejects(
      wrong.messages.create({ model: 'any', max_tokens: 1, messages: kUser }),
      (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
  });

  test('a forced tool choice is refused by name', async () => {
    await assert.rejects(
      client.messages.create({ model: 'any', max_tokens: 4, messages: kUser,
        tools: [{ name: 't', input_schema: { type: 'object' } }],
        tool_choice: { type: 'tool', name: 't' } }),
      (e) => e instanceof Anthropic.BadRequestError && /tool_choice/.test(e.message));
  });
});
