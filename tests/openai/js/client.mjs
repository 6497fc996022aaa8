// The official openai JS SDK against a running homed (run by tests/openai_api.rs).
// Usage: node client.mjs BASE_URL API_KEY — prints one JSON object with what the SDK saw.
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const out = {};

out.models = [];
for await (const m of client.models.list()) out.models.push(m.id);

const r = await client.chat.completions.create({
  model: 'homeagent',
  messages: [
    { role: 'system', content: 'ignored by the agent' },
    { role: 'user', content: 'hello from the js sdk' },
  ],
});
out.plain = {
  object: r.object,
  content: r.choices[0].message.content,
  finish_reason: r.choices[0].finish_reason,
  tool_calls: r.choices[0].message.tool_calls ?? null,
};

const stream = await client.chat.completions.create({
  model: 'homeagent',
  messages: [{ role: 'user', content: 'stream from js' }],
  stream: true,
  stream_options: { include_usage: true },
});
const chunks = [];
let finish = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage.total_tokens;
  for (const c of chunk.choices) {
    if (c.delta?.tool_calls) (out.leaked_tool_calls ??= []).push(JSON.stringify(c.delta.tool_calls));
    if (c.delta?.content) chunks.push(c.delta.content);
    if (c.finish_reason) finish = c.finish_reason;
  }
}
out.stream = { chunks, text: chunks.join(''), finish_reason: finish, total_tokens: usage };

try {
  await new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 }).models.list();
  out.wrong_key = 'accepted';
} catch (e) {
  out.wrong_key = { status: e.status, name: e.constructor.name };
}

console.log(JSON.stringify(out));
