// The official OpenAI client calls tools through `duet serve` (a random-weight
// model under the Qwen3 template, tests/reference/test_openai_tools.py):
// named, required and auto tool choices, parallel calls, the client's own
// stream accumulation against the whole response (auto calls streamed in
// pieces as OpenAI's are), a tool result sent back,
// reasoning, and the 400s. Usage: node tools_test.mjs BASE_URL API_KEY
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });
const model = 'tiny';

async function check(name, fn) {
  await fn();
  console.log(`ok ${name}`);
}

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather forecast for a city',
    parameters: {
      type: 'object',
      properties: { city: { enum: ['Paris', 'Oslo', 'Lima'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
const time = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: {
      type: 'object',
      properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } },
      required: ['zone'],
      additionalProperties: false,
    },
  },
};
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

// The call follows its tool's schema, checked here rather than by duet's grammar.
function assertValidCall(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^[A-Za-z0-9]{9}$/);
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') {
    assert.deepEqual(Object.keys(args).sort(), ['city', 'days']);
    assert.ok(['Paris', 'Oslo', 'Lima'].includes(args.city), call.function.arguments);
    assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, call.function.arguments);
  } else {
    assert.equal(call.function.name, 'get_time');
    assert.deepEqual(Object.keys(args), ['zone']);
    assert.ok(['UTC', 'CET'].includes(args.zone), call.function.arguments);
  }
}

// The client's own accumulation of the stream equals the whole message (ids
// aside: each request draws its own).
async function assertStreamsTheSame(body, whole) {
  const stream = client.chat.completions.stream(body);
  const final = await stream.finalChatCompletion();
  const m = final.choices[0].message;
  assert.equal(final.choices[0].finish_reason, whole.choices[0].finish_reason);
  // The role chunk opens content as '' before it is known there is none.
  assert.equal(m.content || null, whole.choices[0].message.content || null);
  const strip = (calls) => (calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
  assert.deepEqual(strip(m.tool_calls), strip(whole.choices[0].message.tool_calls));
  for (const c of m.tool_calls ?? []) assertValidCall(c);
}

let named;
await check('named tool choice', async () => {
  for (const seed of [1, 2, 3]) {
    const body = {
      model, messages, tools: [time, weather], seed, temperature: 1, max_tokens: 300,
      tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false,
    };
    const r = await client.chat.completions.create(body);
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(m.content, null);
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.tool_calls[0].function.name, 'get_weather');
    assertValidCall(m.tool_calls[0]);
    await assertStreamsTheSame(body, r);
    named ??= r;
  }
});

await check('required tool choice, parallel calls', async () => {
  let most = 0;
  for (let seed = 1; seed <= 8; ++seed) {
    // Hot sampling: a flatter choice between ending and a further call.
    const body = { model, messages, tools: [weather, time], seed, temperature: 2, max_tokens: 1000, tool_choice: 'required' };
    const r = await client.chat.completions.create(body);
    const calls = r.choices[0].message.tool_calls;
    assert.ok(calls.length >= 1);
    for (const c of calls) assertValidCall(c);
    assert.equal(new Set(calls.map((c) => c.id)).size, calls.length);
    if (calls.length > 1) await assertStreamsTheSame(body, r);
    most = Math.max(most, calls.length);
  }
  assert.ok(most >= 2, 'no seed made parallel calls');
});

await check('auto tool choice', async () => {
  // A grammar stands in for a model that decides to call.
  const body = {
    model, messages, tools: [weather, time], tool_choice: 'auto', max_tokens: 300,
    grammar: 'root ::= "<tool_call>\\n{\\"name\\": \\"get_time\\", \\"arguments\\": {\\"zone\\": \\"UTC\\"}}\\n</tool_call>"',
  };
  const r = await client.chat.completions.create(body);
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.deepEqual(JSON.parse(r.choices[0].message.tool_calls[0].function.arguments), { zone: 'UTC' });
  await assertStreamsTheSame(body, r);
  // Left to the random model: whatever it writes, the response is well formed.
  const free = await client.chat.completions.create({ model, messages, tools: [weather], max_tokens: 20, seed: 4 });
  const m = free.choices[0].message;
  assert.ok(typeof m.content === 'string' || m.tool_calls.length > 0);
  for (const c of m.tool_calls ?? []) assertValidCall(c);
});

await check('auto tool calls stream in pieces', async () => {
  // Text, then two calls the model chose to make (a grammar stands in for it).
  const body = {
    model, messages, tools: [weather, time], tool_choice: 'auto', max_tokens: 300,
    grammar: 'root ::= "Let me see.\\n<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"Lima\\", \\"days\\": 4}}\\n</tool_call>\\n'
      + '<tool_call>\\n{\\"name\\": \\"get_time\\", \\"arguments\\": {\\"zone\\": \\"CET\\"}}\\n</tool_call>"',
  };
  const r = await client.chat.completions.create(body);
  const whole = r.choices[0].message;
  assert.equal(whole.content, 'Let me see.');
  assert.equal(whole.tool_calls.length, 2);
  // The chunks as OpenAI sends them: per call a head (id, type, name, empty
  // arguments), then only arguments pieces, more than one each here.
  const pieces = [];
  let content = '', finish = null;
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
      for (const tc of c.delta.tool_calls ?? []) {
        assert.ok(!c.delta.content, 'content beside a call');
        if (tc.index === pieces.length) {
          assert.match(tc.id, /^[A-Za-z0-9]{9}$/);
          assert.equal(tc.type, 'function');
          assert.equal(tc.function.arguments, '');
          pieces.push({ name: tc.function.name, arguments: '', chunks: 0 });
        } else {
          assert.equal(tc.index, pieces.length - 1);
          assert.deepEqual(Object.keys(tc).sort(), ['function', 'index']);
          assert.deepEqual(Object.keys(tc.function), ['arguments']);
          pieces[tc.index].arguments += tc.function.arguments;
          pieces[tc.index].chunks += 1;
        }
      }
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(content, 'Let me see.');
  assert.deepEqual(pieces.map((p) => ({ name: p.name, arguments: p.arguments })),
    whole.tool_calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })));
  for (const p of pieces) assert.ok(p.chunks > 1, `the arguments of ${p.name} came in ${p.chunks} chunk(s)`);
  // And the client's own accumulation gives the same message.
  await assertStreamsTheSame(body, r);
});

await check('tool result round trip', async () => {
  const call = named.choices[0].message;
  const r = await client.chat.completions.create({
    model, tools: [time, weather], max_tokens: 5,
    messages: [...messages, call, { role: 'tool', tool_call_id: call.tool_calls[0].id, content: '{"temp_c": 21}' }],
  });
  assert.ok(r.usage.prompt_tokens > named.usage.prompt_tokens + 10);
});

await check('reasoning', async () => {
  const body = { model, messages, max_tokens: 100, grammar: 'root ::= "<think>\\nhmm\\n</think>\\n\\nFour."' };
  const r = await client.chat.completions.create(body);
  assert.equal(r.choices[0].message.reasoning_content, '\nhmm\n');
  assert.equal(r.choices[0].message.content, 'Four.');
  let reasoning = '', content = '';
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
    for (const c of chunk.choices) {
      reasoning += c.delta.reasoning_content ?? '';
      content += c.delta.content ?? '';
    }
  }
  assert.equal(reasoning, '\nhmm\n');
  assert.equal(content, 'Four.');
});

await check('errors', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model, messages, tools: [weather], tool_choice: { type: 'function', function: { name: 'get_stock' } },
    }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice' && /get_stock/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model, messages, tools: [{ type: 'function', function: {} }] }),
    (e) => e instanceof OpenAI.BadRequestError && /tools\[0\]\.function\.name/.test(e.message));
  const bad = { ...time, function: { ...time.function, parameters: { type: 'object', properties: { zone: { not: {} } } } } };
  await assert.rejects(
    client.chat.completions.create({ model, messages, tools: [weather, bad], tool_choice: 'required' }),
    (e) => e instanceof OpenAI.BadRequestError && /tool 'get_time' \(tools\[1\]\)/.test(e.message));
});

console.log('all ok');
