#include "server/chat_page.h"

#include <string>

namespace duet::server {

namespace {

// Every piece of text from the model, the user or the server reaches the
// document as a text node (textContent, createTextNode), never as markup.
constexpr std::string_view kPage = R"duetpage(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>duet chat</title>
<style>
:root { --bg: #fafafa; --fg: #1d1d1f; --muted: #6b6b70; --line: #dcdce0; --user: #e8eefc; --bot: #fff;
        --code: #f1f1f4; --accent: #2f5bd3; --err: #b3261e; --errbg: #fdecea; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #17171a; --fg: #e6e6e9; --muted: #9a9aa2; --line: #33333a; --user: #1f2a44; --bot: #202024;
          --code: #111114; --accent: #7fa2ff; --err: #ff8a80; --errbg: #3a1d1b; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.5 system-ui, sans-serif;
       display: flex; flex-direction: column; height: 100vh; }
header { display: flex; gap: 12px; align-items: baseline; padding: 8px 16px; border-bottom: 1px solid var(--line); }
header h1 { font-size: 17px; margin: 0; }
#model-name { color: var(--muted); font-family: ui-monospace, monospace; font-size: 13px; }
header .spacer { flex: 1; }
button { font: inherit; padding: 4px 12px; border: 1px solid var(--line); border-radius: 6px;
         background: var(--bot); color: var(--fg); cursor: pointer; }
button:disabled { opacity: .45; cursor: default; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
#settings { padding: 8px 16px; border-bottom: 1px solid var(--line); display: grid; gap: 8px 16px;
            grid-template-columns: repeat(auto-fit, minmax(180px, 1fr)); }
#settings[hidden] { display: none; }
#settings label { display: flex; flex-direction: column; font-size: 13px; color: var(--muted); }
#settings .wide { grid-column: 1 / -1; }
input, textarea { font: inherit; color: var(--fg); background: var(--bot); border: 1px solid var(--line);
                  border-radius: 6px; padding: 4px 8px; }
#log { flex: 1; overflow-y: auto; padding: 16px; }
.msg { max-width: 860px; margin: 0 auto 14px; padding: 8px 12px; border-radius: 8px; border: 1px solid var(--line); }
.msg.user { background: var(--user); }
.msg.assistant { background: var(--bot); }
.who { font-size: 12px; color: var(--muted); }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
pre { background: var(--code); border: 1px solid var(--line); border-radius: 6px; padding: 8px; overflow-x: auto;
      margin: 6px 0; font: 13px/1.4 ui-monospace, monospace; }
pre .lang { display: block; color: var(--muted); font-size: 11px; }
.tool { border-left: 3px solid var(--accent); padding-left: 8px; margin: 6px 0; }
.tool .name { font-family: ui-monospace, monospace; font-weight: 600; }
details.reasoning { color: var(--muted); margin: 4px 0; }
.stats { font-size: 12px; color: var(--muted); margin-top: 6px; font-variant-numeric: tabular-nums; }
.stats .verdict { color: var(--fg); font-weight: 600; }
.note { font-size: 12px; color: var(--muted); }
.error { color: var(--err); background: var(--errbg); border-radius: 6px; padding: 6px 10px; margin-top: 6px; }
form { display: flex; gap: 8px; padding: 10px 16px; border-top: 1px solid var(--line); max-width: 892px;
       width: 100%; margin: 0 auto; }
#prompt { flex: 1; resize: vertical; min-height: 44px; }
</style>
</head>
<body>
<header>
  <h1>duet</h1>
  <span id="model-name">…</span>
  <span class="spacer"></span>
  <button id="toggle-settings" type="button">Settings</button>
  <button id="clear" type="button">Clear</button>
</header>
<section id="settings" hidden>
  <label class="wide">System prompt <textarea id="system" rows="2" placeholder="(none)"></textarea></label>
  <label>Temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.8"></label>
  <label>Max tokens <input id="max-tokens" type="number" min="1" step="1" value="512"></label>
  <label>API key <input id="api-key" type="password" autocomplete="off" placeholder="when the server has one"></label>
</section>
<main id="log" aria-live="polite"></main>
<form id="input">
  <textarea id="prompt" rows="2" placeholder="Message (Enter sends, Shift+Enter breaks the line)"></textarea>
  <button id="send" class="primary" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const log = $("log");
const turns = [];         // {role, content} of finished turns, sent with each request
let running = null;       // the AbortController of the answer being streamed

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function keyHeaders() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

// The server's error JSON ({"error": {"message"}}) as one line.
async function errorText(res) {
  let msg = res.status + " " + res.statusText;
  try {
    const j = await res.json();
    if (j && j.error && j.error.message) msg = res.status + ": " + j.error.message;
  } catch (_) { /* not JSON: the status says it */ }
  return msg;
}

// A server with --api-key marks the page (body data-api-key): without a
// key the page asks for one instead of sending a request bound to fail.
async function loadModel() {
  const out = $("model-name");
  if (document.body.dataset.apiKey === "required" && !$("api-key").value.trim()) {
    out.textContent = "(API key needed: Settings)";
    $("settings").hidden = false;
    return;
  }
  try {
    const res = await fetch("/v1/models", { headers: keyHeaders() });
    if (!res.ok) { out.textContent = res.status === 401 ? "(API key needed: Settings)" : await errorText(res); return; }
    const m = (await res.json()).data[0];
    out.textContent = m.id + (m.max_model_len ? " · context " + m.max_model_len : "");
    out.dataset.model = m.id;
  } catch (e) {
    out.textContent = "(server unreachable)";
  }
}

// The log follows the answer unless the reader has scrolled up from the end.
let follow = true;
log.addEventListener("scroll", () => { follow = log.scrollHeight - log.scrollTop - log.clientHeight < 40; });
function scrollDown(force) {
  if (force) follow = true;
  if (follow) log.scrollTop = log.scrollHeight;
}

// Text with ``` fences: prose as pre-wrapped text, fenced parts as code
// blocks (an unclosed fence, mid-stream, is code up to the end so far).
function renderText(parent, text) {
  const parts = text.split("```");
  parts.forEach((part, i) => {
    if (i % 2 === 0) {
      if (i > 0) part = part.replace(/^\n/, "");  // the closing fence's line break
      if (part) parent.appendChild(el("div", "text", part));
      return;
    }
    const nl = part.indexOf("\n");
    const lang = nl > 0 ? part.slice(0, nl).trim() : "";
    const pre = el("pre");
    if (lang && !/\s/.test(lang)) pre.appendChild(el("span", "lang", lang));
    pre.appendChild(el("code", "", lang && !/\s/.test(lang) ? part.slice(nl + 1) : part.replace(/^\n/, "")));
    parent.appendChild(pre);
  });
}

// A reply that is one JSON value (structured output) is shown indented.
function structured(text) {
  const t = text.trim();
  if (!/^[{\[]/.test(t)) return null;
  try { return JSON.stringify(JSON.parse(t), null, 2); } catch (_) { return null; }
}

function prettyArgs(args) {
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch (_) { return args; }
}

function renderAnswer(a) {
  const body = a.body;
  const nodes = [];
  if (a.reasoning) {
    const d = el("details", "reasoning");
    d.open = a.reasoningOpen;
    d.addEventListener("toggle", () => { a.reasoningOpen = d.open; });
    d.appendChild(el("summary", "", "reasoning"));
    d.appendChild(el("div", "text", a.reasoning));
    nodes.push(d);
  }
  const json = a.done ? structured(a.content) : null;
  const content = el("div", "content");
  if (json) {
    const pre = el("pre");
    pre.appendChild(el("span", "lang", "json"));
    pre.appendChild(el("code", "", json));
    content.appendChild(pre);
  } else {
    renderText(content, a.content);
  }
  nodes.push(content);
  for (const call of a.calls) {
    if (!call) continue;
    const t = el("div", "tool");
    t.appendChild(el("div", "note", "tool call" + (call.id ? " " + call.id : "")));
    t.appendChild(el("span", "name", call.name));
    const pre = el("pre");
    pre.appendChild(el("code", "", prettyArgs(call.arguments)));
    t.appendChild(pre);
    nodes.push(t);
  }
  body.replaceChildren(...nodes);
}

function fmt(v, digits, unit) { return v === null || v === undefined ? "–" : v.toFixed(digits) + unit; }

// TTFT, ITL, rates and where the time went, from the response's "timings".
function renderStats(a, t, usage) {
  const s = el("div", "stats");
  const pct = t.bound === "prefill" ? t.prefill_pct_of_ceiling : t.decode_pct_of_ceiling;
  const ceiling = t.bound === "prefill" ? "of compute peak" : "of memory bandwidth";
  s.appendChild(document.createTextNode(
    "TTFT " + fmt(t.ttft_ms, 1, " ms") + " · ITL " + fmt(t.itl_ms, 1, " ms") + " · " +
    fmt(t.predicted_per_second, 1, " tok/s") + " · prompt " + t.prompt_n + " tok" +
    (t.cached_n ? " (" + t.cached_n + " cached)" : "") + ", " + fmt(t.prompt_per_second, 0, " tok/s") +
    " · " + (usage ? usage.completion_tokens : t.predicted_n) + " generated · "));
  s.appendChild(el("span", "verdict", t.verdict));
  s.appendChild(document.createTextNode(" (" + t.bound + "-bound" +
    (pct === null || pct === undefined ? "" : ", " + pct.toFixed(pct < 10 ? 1 : 0) + "% " + ceiling) + ")"));
  a.box.appendChild(s);
}

function addMessage(role, label) {
  const box = el("div", "msg " + role);
  box.appendChild(el("div", "who", label));
  const body = el("div", "body");
  box.appendChild(body);
  log.appendChild(box);
  scrollDown(true);
  return { box, body };
}

function showError(box, text) {
  box.appendChild(el("div", "error", text));
  scrollDown(false);
}

// One SSE event's JSON into the answer being built.
function apply(a, j) {
  if (j.error) throw new Error(j.error.message || "server error");
  if (j.timings) a.timings = j.timings;
  if (j.usage) a.usage = j.usage;
  const c = j.choices && j.choices[0];
  if (!c) return;
  const d = c.delta || {};
  if (d.content) a.content += d.content;
  if (d.reasoning_content) a.reasoning += d.reasoning_content;
  for (const tc of d.tool_calls || []) {
    const call = a.calls[tc.index] || (a.calls[tc.index] = { id: "", name: "", arguments: "" });
    if (tc.id) call.id = tc.id;
    if (tc.function && tc.function.name) call.name += tc.function.name;
    if (tc.function && tc.function.arguments) call.arguments += tc.function.arguments;
  }
  if (c.finish_reason) a.finish = c.finish_reason;
}

async function stream(res, a) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        apply(a, JSON.parse(data));
      }
    }
    renderAnswer(a);  // once per read: what arrived is painted at the next frame
    scrollDown(false);
  }
}

function requestBody() {
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...turns);
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  const model = $("model-name").dataset.model;
  if (model) body.model = model;
  const temperature = parseFloat($("temperature").value);
  if (!Number.isNaN(temperature)) body.temperature = temperature;
  const maxTokens = parseInt($("max-tokens").value, 10);
  if (maxTokens > 0) body.max_tokens = maxTokens;
  return body;
}

function setRunning(controller) {
  running = controller;
  $("send").disabled = !!controller;
  $("stop").disabled = !controller;
}

async function send(text) {
  addMessage("user", "you").body.appendChild(el("div", "text", text));
  turns.push({ role: "user", content: text });
  const msg = addMessage("assistant", "assistant");
  const a = { box: msg.box, body: msg.body, content: "", reasoning: "", reasoningOpen: false, calls: [],
              done: false, finish: null, timings: null, usage: null };
  const controller = new AbortController();
  setRunning(controller);
  try {
    const res = await fetch("/v1/chat/completions", { method: "POST", headers: keyHeaders(),
                                                      body: JSON.stringify(requestBody()), signal: controller.signal });
    if (!res.ok) throw new Error(await errorText(res));
    await stream(res, a);
    a.done = true;
    renderAnswer(a);
    if (a.timings) renderStats(a, a.timings, a.usage);
    if (a.finish === "length") msg.box.appendChild(el("div", "note", "(stopped at max tokens)"));
  } catch (e) {
    renderAnswer(a);
    if (e.name === "AbortError") msg.box.appendChild(el("div", "note stopped", "(stopped)"));
    else showError(msg.box, "error " + e.message);
  } finally {
    setRunning(null);
  }
  // The turn is remembered as far as it got; a failed one is not sent again.
  if (a.content || a.calls.length) turns.push({ role: "assistant", content: a.content });
  else turns.pop();
  scrollDown(false);
}

$("input").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("prompt").value;
  if (!text.trim() || running) return;
  $("prompt").value = "";
  send(text);
});
$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); $("input").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (running) running.abort(); });
$("clear").addEventListener("click", () => { if (!running) { turns.length = 0; log.replaceChildren(); } });
$("toggle-settings").addEventListener("click", () => { $("settings").hidden = !$("settings").hidden; });

// Settings last across reloads of this page; the key only for this tab.
for (const id of ["system", "temperature", "max-tokens"]) {
  const saved = localStorage.getItem("duet." + id);
  if (saved !== null) $(id).value = saved;
  $(id).addEventListener("change", () => localStorage.setItem("duet." + id, $(id).value));
}
$("api-key").value = sessionStorage.getItem("duet.api-key") || "";
$("api-key").addEventListener("change", () => { sessionStorage.setItem("duet.api-key", $("api-key").value); loadModel(); });
loadModel();
</script>
</body>
</html>
)duetpage";

}  // namespace

std::string_view chat_page_html() { return kPage; }

void set_chat_page(HttpResponse& res, bool api_key_required) {
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
                 "connect-src 'self'; base-uri 'none'; form-action 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
  std::string page(kPage);
  if (api_key_required) page.replace(page.find("<body>"), 6, R"(<body data-api-key="required">)");
  res.set_content(std::move(page), "text/html; charset=utf-8");
}

}  // namespace duet::server
