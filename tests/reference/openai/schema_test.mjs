// Structured output through the official OpenAI client, checked by ajv, an
// independent JSON Schema validator (tests/reference/test_openai_schemas.py
// serves a random-weight model: the grammar, not the model, makes the
// output valid). For every schema, each with a seed of its own: the whole
// response's content parses and validates, and the client's accumulation of
// the same request streamed is the same object. Usage: node schema_test.mjs BASE_URL API_KEY
import assert from 'node:assert/strict';
import Ajv2020 from 'ajv/dist/2020.js';
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });

// Formats as RFC 3339 and RFC 9562 write them (ajv leaves formats to the caller).
// strictRequired off: a part of allOf may require what the schema around it declares.
const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true });
ajv.addFormat('date', /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/);
ajv.addFormat('time', /^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)?$/i);
ajv.addFormat('date-time',
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/i);
ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);

const str = (max, min = 0) => ({ type: 'string', minLength: min, maxLength: max });
const obj = (properties, required = Object.keys(properties)) =>
  ({ type: 'object', properties, required, additionalProperties: false });

const schemas = {
  flat: obj({ name: str(12), age: { type: 'integer', minimum: 0, maximum: 120 } }),
  enums_and_const: obj({
    color: { enum: ['red', 'green', 'blue'] }, size: { type: 'string', enum: ['S', 'M', 'L'] }, version: { const: 1 },
  }),
  mixed_enum: obj({ v: { enum: [1, 'two', null, true, 2.5] } }),
  nested: obj({
    user: obj({ name: str(10), address: obj({ city: str(10), zip: { type: 'string', pattern: '^[0-9]{5}$' } }) }),
  }),
  deep: obj({ a: obj({ b: obj({ c: obj({ d: obj({ e: { type: 'integer', minimum: 0, maximum: 9 } }) }) }) }) }),
  array_bounds: obj({ tags: { type: 'array', items: str(8, 1), minItems: 1, maxItems: 3 } }),
  int_array: { type: 'array', items: { type: 'integer', minimum: -5, maximum: 5 }, minItems: 2, maxItems: 4 },
  array_of_objects: obj({
    rows: { type: 'array', maxItems: 3, items: obj({ id: { type: 'integer', minimum: 1, maximum: 99 }, ok: { type: 'boolean' } }) },
  }),
  tuple: {
    type: 'array', prefixItems: [{ enum: ['a', 'b'] }, { type: 'integer', minimum: 0, maximum: 9 }, { type: 'boolean' }],
    minItems: 3, maxItems: 3,
  },
  any_of: obj({ value: { anyOf: [{ type: 'integer', minimum: 0, maximum: 99 }, str(5), { type: 'boolean' }] } }),
  one_of: obj({
    shape: {
      oneOf: [
        obj({ kind: { const: 'circle' }, r: { type: 'integer', minimum: 1, maximum: 9 } }),
        obj({ kind: { const: 'square' }, side: { type: 'number', minimum: 0, maximum: 10 } }),
      ],
    },
  }),
  nullable_type_list: obj({ note: { type: ['string', 'null'], maxLength: 4 }, n: { type: ['integer', 'null'] } }),
  optional_properties: {
    type: 'object', additionalProperties: false, required: ['id'],
    properties: { id: { type: 'integer', minimum: 0, maximum: 1000 }, nickname: str(6), active: { type: 'boolean' } },
  },
  refs: {
    $defs: { point: obj({ x: { type: 'integer', minimum: -9, maximum: 9 }, y: { type: 'integer', minimum: -9, maximum: 9 } }) },
    ...obj({ from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } }),
  },
  linked_list: obj({ value: { type: 'integer', minimum: 0, maximum: 9 }, next: { anyOf: [{ $ref: '#' }, { type: 'null' }] } }),
  comment_thread: {
    $defs: { comment: obj({ text: str(10), replies: { type: 'array', maxItems: 1, items: { $ref: '#/$defs/comment' } } }) },
    $ref: '#/$defs/comment',
  },
  patterns: obj({
    code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' }, hex: { type: 'string', pattern: '^#[0-9a-f]{6}$' },
  }),
  formats: obj({
    day: { type: 'string', format: 'date' }, at: { type: 'string', format: 'time' },
    stamp: { type: 'string', format: 'date-time' }, id: { type: 'string', format: 'uuid' },
  }),
  number_bounds: obj({
    price: { type: 'number', minimum: 0, maximum: 100 },
    count: { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10 },
    temp: { type: 'number' },
  }),
  string_lengths: obj({ short: str(4, 2), exact: str(3, 3) }),
  // Closed at the top, its parts add requirements (a part closed on its
  // own would admit only its own keys).
  all_of: {
    type: 'object', properties: { a: { type: 'boolean' }, b: { enum: ['x', 'y'] } }, additionalProperties: false,
    allOf: [{ required: ['a'] }, { required: ['b'] }],
  },
  top_level_enum_array: { type: 'array', items: { enum: ['up', 'down', 'left', 'right'] }, maxItems: 4 },
  object_of_arrays: obj({
    matrix: { type: 'array', maxItems: 2, items: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'integer', minimum: 0, maximum: 9 } } },
  }),
};

async function check(name, schema, seed) {
  const validate = ajv.compile(schema);
  const body = {
    model: 'tiny', seed, temperature: 1, max_tokens: 1500,
    messages: [{ role: 'user', content: `Give me ${name}.` }],
    response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
  };
  const r = await client.chat.completions.create(body);
  const content = r.choices[0].message.content;
  assert.equal(r.choices[0].finish_reason, 'stop', `${name}: ${content}`);
  const value = JSON.parse(content);
  assert.ok(validate(value), `${name}: ${content}\n${ajv.errorsText(validate.errors)}`);
  const streamed = await client.chat.completions.stream(body).finalChatCompletion();
  assert.equal(streamed.choices[0].finish_reason, 'stop');
  assert.deepEqual(JSON.parse(streamed.choices[0].message.content), value, name);
  console.log(`ok ${name}`);
}

assert.ok(Object.keys(schemas).length >= 20);
let seed = 0;
for (const [name, schema] of Object.entries(schemas)) await check(name, schema, ++seed);
console.log('all ok');
