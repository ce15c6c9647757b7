// kvault driven by the official OpenAI Node client, the way applications
// use it. The model is the embedded stories260K (random-ish text), so every
// test asserts structure and invariants, never the text's quality.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import OpenAI from 'openai';

import { kSuiteApiKey, startSuiteServer, waitSlotsIdle } from './kvault_server.mjs';

const kApiKey = kSuiteApiKey;
let server;
let client;

before(async () => {
  server = await startSuiteServer();
  client = new OpenAI({ apiKey: kApiKey, baseURL: server.baseURL + '/v1', maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0, 'kvault exits 0 on SIGTERM');
});

const kUser = [{ role: 'user', content: 'Tell me a story about a cat.' }];

// Returns the text of a streamed chat completion and its chunks.
async function streamChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const chunks = [];
  let text = '';
  for await (const chunk of stream) {
    chunks.push(chunk);
    for (const c of chunk.choices) text += c.delta?.content ?? '';
  }
  return { text, chunks };
}

describe('chat completions', () => {
  test('non-streamed: the OpenAI shape', async () => {
    const r = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 8, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].index, 0);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  });

  test('streamed: role first, then content deltas that add up to the whole reply', async () => {
    const params = { model: 'any', messages: kUser, max_tokens: 12, temperature: 0,
      stream_options: { include_usage: true } };
    const { text, chunks } = await streamChat(params);
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    const withChoices = chunks.filter((c) => c.choices.length > 0);
    assert.ok(withChoices.at(-1).choices[0].finish_reason);
    const usage = chunks.at(-1);
    assert.equal(usage.choices.length, 0, 'usage comes in a chunk of its own');
    assert.ok(usage.usage.completion_tokens > 0);
    const whole = await client.chat.completions.create({ ...params, stream_options: undefined });
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(usage.usage.completion_tokens, whole.usage.completion_tokens);
  });

  test('max_tokens and max_completion_tokens bound the reply, finish_reason length', async () => {
    for (const limit of [{ max_tokens: 5 }, { max_completion_tokens: 5 }]) {
      const r = await client.chat.completions.create({
        model: 'any', messages: kUser, temperature: 0, ...limit,
        logit_bias: { 2: -100 } });  // no EOS: the limit ends it
      assert.equal(r.usage.completion_tokens, 5, JSON.stringify(limit));
      assert.equal(r.choices[0].finish_reason, 'length');
    }
  });

  test('n gives that many choices, each with its index', async () => {
    const r = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 6, n: 3, seed: 5, temperature: 1 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    for (const c of r.choices) assert.equal(typeof c.message.content, 'string');
  });

  test('n streamed: every choice by index, the same choices as whole', async () => {
    const params = { model: 'any', messages: kUser, max_tokens: 8, n: 2, seed: 9,
      temperature: 1, stream_options: { include_usage: true } };
    const { chunks } = await streamChat(params);
    const texts = ['', ''];
    const finishes = [0, 0];
    for (const chunk of chunks) {
      assert.equal(chunk.id, chunks[0].id);
      for (const c of chunk.choices) {
        texts[c.index] += c.delta?.content ?? '';
        if (c.finish_reason) ++finishes[c.index];
      }
    }
    assert.deepEqual(finishes, [1, 1]);
    const whole = await client.chat.completions.create({ ...params, stream_options: undefined });
    assert.deepEqual(texts, whole.choices.map((c) => c.message.content));
    assert.equal(chunks.at(-1).usage.completion_tokens, whole.usage.completion_tokens);
  });

  test('seed: the same seed gives the same text', async () => {
    const params = { model: 'any', messages: kUser, max_tokens: 16, temperature: 1.2, seed: 42 };
    const a = await client.chat.completions.create(params);
    const b = await client.chat.completions.create(params);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  });

  test('stop: the reply ends before the stop string', async () => {
    const free = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 24, temperature: 0 });
    const text = free.choices[0].message.content;
    const words = text.split(' ').filter((w) => w.length > 2);
    assert.ok(words.length >= 2, text);
    const stop = words[1];
    const r = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 24, temperature: 0, stop: [stop] });
    assert.equal(r.choices[0].message.content, text.slice(0, text.indexOf(stop)));
    assert.equal(r.choices[0].finish_reason, 'stop');
  });

  test('logit_bias: a token pushed to +100 is the one generated', async () => {
    const r = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 4, temperature: 0,
      logit_bias: { 300: 100 }, logprobs: true, top_logprobs: 1 });
    const ids = r.choices[0].logprobs.content.map((e) => e.id);
    assert.deepEqual(ids, [300, 300, 300, 300]);
  });

  test('penalties change what greedy decoding repeats', async () => {
    const params = { model: 'any', messages: kUser, max_tokens: 48, temperature: 0 };
    const plain = await client.chat.completions.create(params);
    const penalised = await client.chat.completions.create({
      ...params, frequency_penalty: 2, presence_penalty: 2 });
    assert.equal(penalised.usage.completion_tokens > 0, true);
    assert.notEqual(penalised.choices[0].message.content, plain.choices[0].message.content);
  });

  test('logprobs and top_logprobs, streamed and not, one entry per token', async () => {
    const params = { model: 'any', messages: kUser, max_tokens: 10, temperature: 0,
      logprobs: true, top_logprobs: 3 };
    const whole = await client.chat.completions.create(params);
    const entries = whole.choices[0].logprobs.content;
    assert.equal(entries.length, whole.usage.completion_tokens);
    for (const e of entries) {
      assert.equal(typeof e.token, 'string');
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 3);
      assert.ok(Array.isArray(e.bytes));
    }
    const { chunks } = await streamChat(params);
    const streamed = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.logprobs?.content ?? []));
    assert.deepEqual(streamed.map((e) => e.token), entries.map((e) => e.token));
    // A sampled token outside the top N still has its own logprob.
    const hot = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 24, temperature: 2, seed: 7,
      logprobs: true, top_logprobs: 1 });
    for (const e of hot.choices[0].logprobs.content) assert.equal(typeof e.logprob, 'number');
  });

  test('response_format json_object gives JSON', async () => {
    const r = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 64, temperature: 0,
      response_format: { type: 'json_object' } });
    if (r.choices[0].finish_reason === 'stop') JSON.parse(r.choices[0].message.content);
    else assert.match(r.choices[0].message.content, /^\s*[{[]/);
  });

  test('response_format json_schema output validates', async () => {
    const schema = { type: 'object', properties: {
      name: { type: 'string', maxLength: 8 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
    required: ['name', 'age'], additionalProperties: false };
    const r = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 64, temperature: 0.8, seed: 3,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const v = JSON.parse(r.choices[0].message.content);
    assert.deepEqual(Object.keys(v).sort(), ['age', 'name']);
    assert.equal(typeof v.name, 'string');
    assert.ok(v.name.length <= 8);
    assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 99);
  });

  // Each field, streamed: the same text and finish_reason as the whole
  // reply (so the stream honours it as the whole reply does).
  test('streamed replies honour the same fields as whole ones', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 8 } },
      required: ['name'], additionalProperties: false };
    const variants = [
      { stop: ['the'] },
      { max_tokens: 5, logit_bias: { 2: -100 } },
      { max_completion_tokens: 5, logit_bias: { 2: -100 } },
      { logit_bias: { 300: 100 }, max_tokens: 4 },
      { frequency_penalty: 2, presence_penalty: 2 },
      { temperature: 1.2, seed: 42 },
      { response_format: { type: 'json_object' }, max_tokens: 64 },
      { response_format: { type: 'json_schema', json_schema: { name: 'n', schema } },
        max_tokens: 64 },
      { messages: [{ role: 'developer', content: 'Be brief.' }, ...kUser] },
    ];
    for (const v of variants) {
      const params = { model: 'any', messages: kUser, max_tokens: 24, temperature: 0, ...v };
      const whole = await client.chat.completions.create(params);
      const { text, chunks } = await streamChat(params);
      assert.equal(text, whole.choices[0].message.content ?? '', JSON.stringify(v));
      const last = chunks.filter((c) => c.choices.length).at(-1).choices[0];
      assert.equal(last.finish_reason, whole.choices[0].finish_reason, JSON.stringify(v));
    }
  });

  test('developer and tool roles are accepted; unknown roles are a BadRequestError', async () => {
    const r = await client.chat.completions.create({
      model: 'any', max_tokens: 4, temperature: 0, messages: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'What is the weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
          function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }] });
    assert.equal(r.choices[0].message.role, 'assistant');
    await assert.rejects(
      client.chat.completions.create({ model: 'any', max_tokens: 1,
        messages: [{ role: 'wizard', content: 'hi' }] }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 &&
        /messages\[0\]\.role/.test(e.message));
  });
});

const kWeather = [{ type: 'function', function: {
  name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } },
    required: ['city'] } } }];

describe('tools', () => {
  for (const [label, choice] of [['required', 'required'],
    ['named', { type: 'function', function: { name: 'get_weather' } }]]) {
    test(`tool_choice ${label}: a call whose arguments parse`, async () => {
      const r = await client.chat.completions.create({
        model: 'any', messages: [{ role: 'user', content: 'Weather in Paris?' }],
        tools: kWeather, tool_choice: choice, max_tokens: 256, temperature: 0 });
      const calls = r.choices[0].message.tool_calls;
      assert.ok(calls && calls.length >= 1, JSON.stringify(r.choices[0]));
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      assert.equal(calls[0].type, 'function');
      assert.equal(calls[0].function.name, 'get_weather');
      assert.match(calls[0].id, /\S/);
      assert.equal(typeof JSON.parse(calls[0].function.arguments).city, 'string');
    });
  }

  test('tool_choice auto: content or calls, well formed', async () => {
    const r = await client.chat.completions.create({
      model: 'any', messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: kWeather, tool_choice: 'auto', max_tokens: 16, temperature: 0 });
    const m = r.choices[0].message;
    for (const c of m.tool_calls ?? []) JSON.parse(c.function.arguments);
    assert.ok(typeof m.content === 'string' || (m.tool_calls ?? []).length > 0);
  });

  test('streamed tool call: deltas assemble into the non-streamed call', async () => {
    const params = { model: 'any', messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: kWeather, tool_choice: 'required', max_tokens: 256, temperature: 0 };
    const whole = await client.chat.completions.create(params);
    const { chunks } = await streamChat(params);
    const calls = [];
    for (const c of chunks) {
      for (const d of c.choices[0]?.delta?.tool_calls ?? []) {
        calls[d.index] ??= { id: '', name: '', arguments: '' };
        if (d.id) calls[d.index].id = d.id;
        if (d.function?.name) calls[d.index].name += d.function.name;
        calls[d.index].arguments += d.function?.arguments ?? '';
      }
    }
    assert.equal(chunks.filter((c) => c.choices.length).at(-1).choices[0].finish_reason,
      'tool_calls');
    const want = whole.choices[0].message.tool_calls;
    assert.equal(calls.length, want.length);
    assert.equal(calls[0].name, want[0].function.name);
    assert.equal(calls[0].arguments, want[0].function.arguments);
    // The arguments arrive as they are generated, not in one piece.
    const pieces = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? [])
      .filter((d) => d.function?.arguments);
    assert.ok(pieces.length > 3, `arguments came in ${pieces.length} deltas`);
  });

  test('a call cut by max_tokens: finish_reason length, the call as far as it got', async () => {
    const params = { model: 'any', messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: kWeather, tool_choice: 'required', temperature: 0 };
    const full = await client.chat.completions.create({ ...params, max_tokens: 256 });
    const fullArgs = full.choices[0].message.tool_calls[0].function.arguments;
    // The last few tokens may close the call around whole arguments: cut
    // a little earlier each time until the arguments themselves are cut.
    let cut;
    let limit = full.usage.completion_tokens;
    do {
      limit -= 1;
      cut = await client.chat.completions.create({ ...params, max_tokens: limit });
      assert.equal(cut.choices[0].finish_reason, 'length');
    } while (limit > 1 &&
      cut.choices[0].message.tool_calls?.[0]?.function.arguments === fullArgs);
    const calls = cut.choices[0].message.tool_calls;
    assert.ok(calls?.length === 1, JSON.stringify(cut.choices[0].message));
    assert.equal(calls[0].function.name, 'get_weather');
    const args = calls[0].function.arguments;
    assert.ok(args.length < fullArgs.length && fullArgs.startsWith(args), `${args} / ${fullArgs}`);
    const { chunks } = await streamChat({ ...params, max_tokens: limit });
    let streamed = '';
    for (const c of chunks) {
      for (const d of c.choices[0]?.delta?.tool_calls ?? []) streamed += d.function?.arguments ?? '';
    }
    assert.equal(streamed, args);
    assert.equal(chunks.filter((c) => c.choices.length).at(-1).choices[0].finish_reason, 'length');
  });
});

describe('text completions', () => {
  test('non-streamed and streamed agree', async () => {
    const params = { model: 'any', prompt: 'Once upon a time', max_tokens: 12, temperature: 0 };
    const whole = await client.completions.create(params);
    assert.equal(whole.object, 'text_completion');
    assert.equal(typeof whole.choices[0].text, 'string');
    const stream = await client.completions.create({ ...params, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assert.equal(text, whole.choices[0].text);
  });

  test('logprobs: one entry per token, streamed and not', async () => {
    const params = { model: 'any', prompt: 'Once upon a time', max_tokens: 8,
      temperature: 0, logprobs: 2 };
    const whole = await client.completions.create(params);
    const entries = whole.choices[0].logprobs.content;
    assert.equal(entries.length, whole.usage.completion_tokens);
    const stream = await client.completions.create({ ...params, stream: true });
    const streamed = [];
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    assert.deepEqual(streamed.map((e) => e.id), entries.map((e) => e.id));
  });
});

describe('abort', () => {
  test('aborting a stream frees its slot', async () => {
    const controller = new AbortController();
    const stream = await client.chat.completions.create({
      model: 'any', messages: kUser, max_tokens: 100000, temperature: 1,
      logit_bias: { 2: -100 }, stream: true }, { signal: controller.signal });
    let n = 0;
    try {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content && ++n === 3) {
          controller.abort();
          break;
        }
      }
    } catch (e) {
      assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
    }
    assert.equal(n, 3);
    const slots = await waitSlotsIdle(server, kApiKey);
    assert.ok(slots.every((s) => !s.is_processing), JSON.stringify(slots));
  });
});

describe('responses API', () => {
  test('non-streamed and streamed', async () => {
    const r = await client.responses.create({
      model: 'any', input: 'Tell me a story.', max_output_tokens: 8, temperature: 0 });
    assert.equal(r.object, 'response');
    assert.equal(typeof r.output_text, 'string');
    const stream = await client.responses.create({
      model: 'any', input: 'Tell me a story.', max_output_tokens: 8, temperature: 0, stream: true });
    let text = '';
    const types = [];
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
    assert.equal(types[0], 'response.created');
    assert.equal(text, r.output_text);
  });

  test('cut by max_output_tokens: status incomplete', async () => {
    const r = await client.responses.create({
      model: 'any', input: 'Tell me a story.', max_output_tokens: 3, temperature: 0 });
    assert.equal(r.status, 'incomplete');
    assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  });
});

describe('errors', () => {
  test('a bad request is a BadRequestError with llama-server\'s code and message', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'any', messages: [] }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 &&
        e.error?.type === 'invalid_request_error' && /messages/.test(e.message));
  });

  test('a wrong key is an AuthenticationError', async () => {
    const wrong = new OpenAI({ apiKey: 'nope', baseURL: server.baseURL + '/v1', maxRetries: 0 });
    await assert.rejects(wrong.models.list(),
      (e) => e instanceof OpenAI.AuthenticationError && e.status === 401 &&
        e.error?.type === 'authentication_error');
  });

  test('what kvault cannot do is a typed error naming it', async () => {
    await assert.rejects(
      client.embeddings.create({ model: 'any', input: 'hello' }),
      (e) => e instanceof OpenAI.APIError && e.status === 501 && /embedding/i.test(e.message));

  });

  test('models.list names the served model', async () => {
    const page = await client.models.list();
    assert.ok(page.data.length >= 1);
    assert.equal(page.data[0].object, 'model');
  });
});
