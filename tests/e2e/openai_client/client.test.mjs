// The official `openai` npm client, unmodified, against a running `polykv serve`
// (POLYKV_BASE_URL = http://HOST:PORT/v1, POLYKV_API_KEY = its --api-key). Run by
// tests/e2e/run_openai_client.sh with node's built-in test runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.POLYKV_BASE_URL,
  apiKey: process.env.POLYKV_API_KEY,
  maxRetries: 0,
  timeout: 120_000,
});
const messages = [{ role: 'user', content: 'Write a Python function that reverses a string.' }];

async function modelId() {
  const models = await client.models.list();
  assert.ok(models.data.length >= 1);
  return models.data[0].id;
}

test('lists the model', async () => {
  assert.equal(typeof (await modelId()), 'string');
});

test('chat completion', async () => {
  const r = await client.chat.completions.create({ model: await modelId(), messages, max_tokens: 16, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 16);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('streamed chat completion equals the non-streamed one', async () => {
  const model = await modelId();
  const whole = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 2);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});

test('text completion with logprobs', async () => {
  const r = await client.completions.create({
    model: await modelId(), prompt: 'def fibonacci(n):', max_tokens: 12, temperature: 0, logprobs: 2,
  });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.choices[0].text.length > 0);
  assert.equal(r.choices[0].logprobs.tokens.length, r.usage.completion_tokens);
});

test('errors arrive as the client error classes', async () => {
  const model = await modelId();
  await assert.rejects(
    client.chat.completions.create({ model, messages, temperature: 'hot' }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /temperature/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model, messages, pool: 'no-such-pool' }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  const anonymous = new OpenAI({ baseURL: process.env.POLYKV_BASE_URL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(anonymous.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
});

test('a chat on a named pool continues it', async () => {
  const model = await modelId();
  const system = { role: 'system', content: 'You write short Python functions. Style: type hints, docstrings.' };
  const made = await client.post('/pools', { body: { name: 'e2e-style', messages: [system] } });
  assert.equal(made.name, 'e2e-style');
  const onPool = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, pool: 'e2e-style' });
  const alone = await client.chat.completions.create({ model, messages: [system, ...messages], max_tokens: 12, temperature: 0 });
  assert.equal(onPool.choices[0].message.content, alone.choices[0].message.content);
  assert.equal(onPool.usage.prompt_tokens_details.cached_tokens, made.tokens);
  await client.delete('/pools/e2e-style');
});
