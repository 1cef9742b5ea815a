// The official OpenAI client against a running `duet serve` under load:
// several concurrent requests (half streamed), a streamed chat, and a
// stream the client aborts midway, after which the server holds no request
// and no KV block and still answers. Prints the texts as one JSON line, so
// tests/mpi/openai_client_test.py can hold an `mpirun -np 2` server to one
// process's answers. Usage: node concurrency_test.mjs BASE_URL API_KEY
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });
const model = 'stories260K';
const prompts = ['Once upon a time', 'The cat sat', 'Lily wanted to', 'One day, a big dog', 'Tom and Sue'];

async function complete(prompt, stream) {
  const body = { model, prompt, max_tokens: 40, temperature: 0 };
  if (!stream) return (await client.completions.create(body)).choices[0].text;
  let text = '';
  for await (const chunk of await client.completions.create({ ...body, stream: true })) {
    for (const c of chunk.choices) text += c.text;
  }
  return text;
}

async function metric(name) {
  const r = await fetch(`${baseURL}/metrics`, { headers: { Authorization: `Bearer ${apiKey}` } });
  const line = (await r.text()).split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line.split(' ')[1]);
}

const texts = await Promise.all(prompts.map((p, i) => complete(p, i % 2 === 0)));
for (const t of texts) assert.ok(t.length > 0);
console.log('ok concurrent');

let chat = '';
const chatStream = await client.chat.completions.create({
  model, temperature: 0, max_tokens: 24, stream: true, messages: [{ role: 'user', content: 'Tell me a story' }],
});
for await (const chunk of chatStream) chat += chunk.choices[0]?.delta?.content ?? '';
assert.ok(chat.length > 0);
console.log('ok chat stream');

// Cancellation: read one chunk of a long stream, then abort it.
const controller = new AbortController();
const long = await client.completions.create(
  { model, prompt: 'Once', max_tokens: 2000, ignore_eos: true, temperature: 0, stream: true },
  { signal: controller.signal });
// The client ends the iteration quietly on its own abort.
let chunks = 0;
for await (const chunk of long) {
  if (++chunks === 1) controller.abort();
}
assert.ok(chunks < 100, `the aborted stream went on for ${chunks} chunks`);
let idle = false;
for (let i = 0; i < 200 && !idle; ++i) {
  idle = (await metric('duet_requests_running')) === 0 && (await metric('duet_kv_blocks_used')) === 0 &&
         (await metric('duet_requests_finished_total{reason="cancelled"}')) === 1;
  if (!idle) await new Promise((r) => setTimeout(r, 50));
}
assert.ok(idle, 'the aborted stream was not cancelled, or still holds a request or KV blocks');
const after = await complete(prompts[0], false);
assert.equal(after, texts[0]);
console.log('ok cancellation');

console.log(JSON.stringify({ texts, chat, after }));
console.log('all ok');
