// The official OpenAI client against a running `duet serve` (stories260K):
// completions and chat, whole and streamed, stop sequences, max_tokens,
// logprobs, usage, n choices, embeddings and error statuses. Usage: node client_test.mjs BASE_URL API_KEY
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });
const model = 'stories260K';

async function check(name, fn) {
  await fn();
  console.log(`ok ${name}`);
}

await check('models', async () => {
  const models = await client.models.list();
  assert.equal(models.data[0].id, model);
});

let full;
await check('completion', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0 });
  full = r.choices[0].text;
  // llama2.c's greedy continuation for stories260K.
  assert.ok(full.startsWith(', there was a little girl named Lily.'), full);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 30);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 30);
});

await check('completion stream with usage', async () => {
  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
    ++chunks;
  }
  assert.equal(text, full);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 30);
  assert.ok(chunks > 10, `only ${chunks} chunks`);
});

await check('stop sequences', async () => {
  const r = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop: ['girl', 'unicorn'],
  });
  assert.equal(r.choices[0].text, full.slice(0, full.indexOf('girl')));
  assert.equal(r.choices[0].finish_reason, 'stop');
  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop: 'girl', stream: true,
  });
  let text = '';
  for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
  assert.equal(text, r.choices[0].text);
});

await check('max_tokens', async () => {
  const r = await client.completions.create({ model, prompt: 'The cat', max_tokens: 3, temperature: 0 });
  assert.equal(r.usage.completion_tokens, 3);
  assert.equal(r.choices[0].finish_reason, 'length');
});

await check('completion logprobs', async () => {
  const r = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 3,
  });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 8);
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  for (let i = 0; i < 8; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = Object.entries(lp.top_logprobs[i]).sort((a, b) => b[1] - a[1]);
    assert.equal(top[0][0], lp.tokens[i]);  // greedy takes the most likely
  }
});

let chatText;
await check('chat', async () => {
  const r = await client.chat.completions.create({
    model, temperature: 0, max_tokens: 16, logprobs: true, top_logprobs: 2,
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'A dog' }],
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  chatText = r.choices[0].message.content;
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  assert.equal(content[0].top_logprobs.length, 2);
});

await check('chat stream with usage', async () => {
  const stream = await client.chat.completions.create({
    model, temperature: 0, max_tokens: 16, stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'A dog' }],
  });
  let text = '', usage = null, role = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      text += c.delta.content ?? '';
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, chatText);
  assert.ok(usage.completion_tokens > 0);
});

await check('n greedy choices', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0, n: 3 });
  assert.equal(r.choices.length, 3);
  r.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.text, r.choices[0].text);
    assert.ok(full.startsWith(c.text), c.text);
  });
  assert.equal(r.usage.completion_tokens, 3 * 12);  // the prompt is counted once
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 3 * 12);
});

await check('n seeded choices streamed', async () => {
  const body = { model, prompt: 'Once upon a time', max_tokens: 30, temperature: 1, seed: 3, n: 3 };
  const whole = await client.completions.create(body);
  assert.equal(new Set(whole.choices.map((c) => c.text)).size, 3);
  const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  const texts = ['', '', ''], finish = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts[c.index] += c.text;
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(texts, whole.choices.map((c) => c.text));
  assert.deepEqual(finish, whole.choices.map((c) => c.finish_reason));
  assert.deepEqual(usage, whole.usage);
});

await check('chat n choices', async () => {
  const body = {
    model, temperature: 1, seed: 4, max_tokens: 10, n: 2,
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'A dog' }],
  };
  const whole = await client.chat.completions.create(body);
  assert.equal(whole.choices.length, 2);
  // The client's own accumulation of the stream, choice by choice.
  const final = await client.chat.completions.stream(body).finalChatCompletion();
  assert.equal(final.choices.length, 2);
  for (const i of [0, 1]) {
    assert.equal(final.choices[i].index, i);
    assert.equal(final.choices[i].message.role, 'assistant');
    assert.equal(final.choices[i].message.content, whole.choices[i].message.content);
    assert.equal(final.choices[i].finish_reason, whole.choices[i].finish_reason);
  }
});

await check('logit_bias and echo', async () => {
  const plain = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  const echoed = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0, echo: true,
  });
  assert.equal(echoed.choices[0].text, 'Once upon a time' + plain.choices[0].text);
  // 100 forces token 300 at every step; -100 keeps it out.
  const forced = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 3, temperature: 0, logprobs: 0, logit_bias: { 300: 100 },
  });
  const tokens = forced.choices[0].logprobs.tokens;
  assert.equal(tokens.length, 3);
  assert.ok(tokens.every((t) => t === tokens[0]), tokens.join('|'));
  const banned = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, logprobs: 0, logit_bias: { 300: -100 },
  });
  assert.ok(!banned.choices[0].logprobs.tokens.includes(tokens[0]));
});

await check('embeddings', async () => {
  // The client asks for base64 unless told otherwise and decodes it itself.
  const input = ['Once upon a time', 'The cat sat on the mat.'];
  const b64 = await client.embeddings.create({ model, input });
  const floats = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assert.equal(b64.data.length, 2);
  assert.equal(b64.usage.prompt_tokens, floats.usage.prompt_tokens);
  for (let i = 0; i < 2; ++i) {
    assert.equal(b64.data[i].index, i);
    const v = b64.data[i].embedding;
    assert.deepEqual(Array.from(v, Math.fround), floats.data[i].embedding.map(Math.fround));
    const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
  }
  await assert.rejects(
    client.embeddings.create({ model, input: '' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'input');
});

await check('errors', async () => {
  await assert.rejects(
    client.completions.create({ model, prompt: 'x', n: 17 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n');
  const wrong = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

console.log('all ok');
