// The chat page of `duet serve` in a real headless Chromium (Debian's
// chromium, driven over the DevTools protocol by puppeteer-core):
//   node chat_page_test.mjs URL API_KEY
// The server at URL runs with --api-key API_KEY. Checks: the page loads with
// no console errors and nothing requested beyond the server; the model name
// shows; an answer streams in several increments and gets its stats line;
// Stop ends the request and /metrics shows the sequence freed; a tool call
// and markup in the text are shown as text; a wrong key is an error in the
// page. Prints the page's size and how long a streamed piece takes to be
// painted. Exits non-zero with the first failed check.
import assert from "node:assert/strict";
import fs from "node:fs";
import puppeteer from "puppeteer-core";

const [url, apiKey] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
assert.ok(url && apiKey, "usage: node chat_page_test.mjs URL API_KEY");
assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium (scripts/setup.sh does)`);

async function metrics(key = apiKey) {
  const res = await fetch(url + "/metrics", { headers: { Authorization: "Bearer " + key } });
  assert.equal(res.status, 200);
  return res.text();
}

function metricValue(text, name) {
  for (const line of text.split("\n"))
    if (line.startsWith(name + " ")) return Number(line.slice(name.length + 1));
  return NaN;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const say = (line) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${line}`);

// Canned SSE for a request whose prompt says "canned-tool-call": a reply
// with markup in its text and a tool call, to see both shown as text.
const CANNED = [
  { choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { content: "<b>not bold</b> " }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "call_1", type: "function",
                                                   function: { name: "get_weather", arguments: "" } }] },
                finish_reason: null }] },
  { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: "{\"city\":\"<Paris>\"}" } }] },
                finish_reason: null }] },
  { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
].map((j) => "data: " + JSON.stringify(j) + "\n\n").join("") + "data: [DONE]\n\n";

say("launching chromium");
const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-default-apps", "--disable-sync"],
});
let failed = false;
try {
  const page = await browser.newPage();
  const consoleErrors = [];
  const pageErrors = [];
  const external = [];
  let allowedErrors = null;  // a pattern of console errors the current step expects
  page.on("console", (m) => {
    if (m.type() === "error" && !(allowedErrors && allowedErrors.test(m.text()))) consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  await page.setRequestInterception(true);
  const origin = new URL(url);
  page.on("request", (req) => {
    const u = new URL(req.url());
    if (u.protocol === "data:") return req.continue();
    if (u.host !== origin.host) {
      external.push(req.url());
      return req.abort();
    }
    const body = req.postData();
    if (u.pathname === "/v1/chat/completions" && body) {
      const j = JSON.parse(body);
      if (j.messages.at(-1).content === "canned-tool-call")
        return req.respond({ status: 200, contentType: "text/event-stream", body: CANNED });
      // stories260K ends its stories soon: ignore_eos (a duet extension)
      // makes the answer run to the page's max tokens.
      return req.continue({ postData: JSON.stringify({ ...j, ignore_eos: true }) });
    }
    return req.continue();
  });
  // Each streamed read's arrival and the next frame after the page changed:
  // how long a piece from the server takes to be painted.
  await page.evaluateOnNewDocument(() => {
    window.__reads = [];
    window.__paints = [];
    const read = ReadableStreamDefaultReader.prototype.read;
    ReadableStreamDefaultReader.prototype.read = function () {
      return read.call(this).then((r) => {
        if (!r.done) window.__reads.push(performance.now());
        return r;
      });
    };
  });

  const pageRes = await fetch(url + "/");
  const html = await pageRes.text();
  assert.equal(pageRes.status, 200);
  assert.match(pageRes.headers.get("content-type"), /^text\/html/);
  const pageBytes = Buffer.byteLength(html);
  say(`page: ${pageBytes} bytes (${(pageBytes / 1024).toFixed(1)} KiB)`);
  assert.ok(pageBytes < 100 * 1024, "the page is over 100 KB");

  await page.goto(url + "/", { waitUntil: "load" });
  // The server has a key: the page asks for it before talking to the API.
  await page.waitForFunction(() => document.getElementById("model-name").textContent.includes("API key"));
  await page.type("#api-key", apiKey);
  await page.$eval("#api-key", (e) => e.dispatchEvent(new Event("change")));
  await page.waitForFunction(() => document.getElementById("model-name").dataset.model);
  const modelName = await page.$eval("#model-name", (e) => e.textContent);
  assert.match(modelName, /stories260K/);
  say(`model shown: ${modelName}`);

  // Counts the distinct lengths the last answer's text is seen at.
  const watchAnswer = () => page.evaluate(() => {
    window.__lengths = [];
    window.__paints = [];
    window.__reads = [];
    const log = document.getElementById("log");
    if (window.__observer) window.__observer.disconnect();
    window.__observer = new MutationObserver(() => {
      const answers = log.querySelectorAll(".msg.assistant .content");
      const last = answers[answers.length - 1];
      const n = last ? last.textContent.length : 0;
      if (n > 0 && n !== window.__lengths[window.__lengths.length - 1]) {
        window.__lengths.push(n);
        const changed = performance.now();
        requestAnimationFrame(() => window.__paints.push({ changed, painted: performance.now() }));
      }
    });
    window.__observer.observe(log, { childList: true, subtree: true, characterData: true });
  });
  const send = async (text) => {
    await page.$eval("#prompt", (e) => { e.value = ""; });
    await page.type("#prompt", text);
    await page.click("#send");
  };
  const lastMessage = (sel) => page.evaluate((sel) => {
    const msgs = document.querySelectorAll(".msg.assistant");
    const m = msgs[msgs.length - 1];
    const e = m && m.querySelector(sel);
    return e ? e.textContent : null;
  }, sel);

  // From a piece's arrival (the read that brought it: on loopback within
  // ~0.1 ms of the server's write) to the frame that shows it.
  const printPaintDelays = async (what) => {
    const { reads, paints } = await page.evaluate(() => ({ reads: window.__reads, paints: window.__paints }));
    const delays = paints.map((p) => p.painted - Math.max(...reads.filter((r) => r <= p.changed)))
                         .filter(Number.isFinite);
    if (!delays.length) return;
    const sorted = [...delays].sort((a, b) => a - b);
    say(`${what}: read -> painted: first piece ${delays[0].toFixed(1)} ms, median ` +
        `${sorted[sorted.length >> 1].toFixed(1)} ms, max ${sorted.at(-1).toFixed(1)} ms over ${delays.length} paints`);
  };

  // A whole answer. The network is slowed to 32 KB/s so that it arrives
  // over a few seconds however fast the model: a page that waited for the
  // end would still paint it once. (That the server streams is seen below:
  // the stopped answer shows in pieces while it still runs.)
  await page.$eval("#max-tokens", (e) => { e.value = "300"; });
  await page.emulateNetworkConditions({ download: 32 * 1024, upload: 1 << 20, latency: 0 });
  await watchAnswer();
  await send("Once upon a time");
  await page.waitForFunction(() => {
    const m = document.querySelectorAll(".msg.assistant");
    return m.length && m[m.length - 1].querySelector(".stats");
  }, { timeout: 60000 });
  await page.emulateNetworkConditions(null);
  const lengths = await page.evaluate(() => window.__lengths);
  say(`answer painted at ${lengths.length} lengths: ${lengths.slice(0, 12).join(", ")}${lengths.length > 12 ? ", ..." : ""}`);
  assert.ok(lengths.length >= 3, `the answer appeared in ${lengths.length} increments, not streamed`);
  const stats = await lastMessage(".stats");
  say(`stats line: ${stats}`);
  assert.match(stats, /TTFT [\d.]+ ms/);
  assert.match(stats, /ITL [\d.]+ ms/);
  assert.match(stats, /[\d.]+ tok\/s/);
  assert.match(stats, /slow to (start|stream) \((prefill|decode)-bound/);
  printPaintDelays("the throttled answer");

  // Stop mid-answer: the request ends and the server frees the sequence.
  const before = await metrics();
  const cancelledBefore = metricValue(before, 'duet_requests_finished_total{reason="cancelled"}');
  await page.$eval("#max-tokens", (e) => { e.value = "16000"; });
  await watchAnswer();
  await send("Tell me a long story");
  await page.waitForFunction(() => window.__lengths.length >= 3, { timeout: 60000 });
  const running = metricValue(await metrics(), "duet_requests_running");
  assert.equal(running, 1, "the answer painted in pieces is not running on the server: not streamed");
  const stoppedAt = Date.now();
  await page.click("#stop");
  await page.waitForFunction(() => {
    const m = document.querySelectorAll(".msg.assistant");
    return m[m.length - 1].querySelector(".stopped");
  });
  let m = "";
  for (let i = 0; i < 200; ++i) {
    m = await metrics();
    if (metricValue(m, "duet_requests_running") === 0 && metricValue(m, "duet_requests_in_flight") === 0 &&
        metricValue(m, "duet_kv_blocks_used") === 0) break;
    await sleep(25);
  }
  const freedMs = Date.now() - stoppedAt;
  assert.equal(metricValue(m, "duet_requests_running"), 0, m);
  assert.equal(metricValue(m, "duet_requests_in_flight"), 0, m);
  assert.equal(metricValue(m, 'duet_requests_finished_total{reason="cancelled"}'), cancelledBefore + 1, m);
  assert.equal(metricValue(m, "duet_kv_blocks_used"), 0, "the stopped answer's KV blocks are still held");
  const stoppedLen = (await page.evaluate(() => window.__lengths)).at(-1);
  say(`stop: freed on the server within ${freedMs} ms of the click (answer stopped at ${stoppedLen} chars)`);
  await printPaintDelays("the stopped answer, at full speed");
  assert.equal(await page.$eval("#send", (e) => e.disabled), false);

  // A tool call and markup in the reply are shown as text.
  await send("canned-tool-call");
  await page.waitForFunction(() => {
    const m = document.querySelectorAll(".msg.assistant");
    return m[m.length - 1].querySelector(".tool .name");
  });
  const tool = await page.evaluate(() => {
    const m = document.querySelectorAll(".msg.assistant");
    const last = m[m.length - 1];
    return { name: last.querySelector(".tool .name").textContent, args: last.querySelector(".tool code").textContent,
             text: last.querySelector(".content").textContent, bold: last.querySelectorAll("b").length };
  });
  assert.equal(tool.name, "get_weather");
  assert.match(tool.args, /"city": "<Paris>"/);
  assert.match(tool.text, /<b>not bold<\/b>/);
  assert.equal(tool.bold, 0, "markup from the reply became elements");

  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, [], "console errors: " + consoleErrors.join(" | "));

  // A wrong key: the error shows in the page (the browser logs the 401).
  allowedErrors = /status of 401/;
  await page.$eval("#api-key", (e) => { e.value = "wrong-key"; e.dispatchEvent(new Event("change")); });
  await send("Once upon a time");
  await page.waitForFunction(() => {
    const m = document.querySelectorAll(".msg.assistant");
    return m[m.length - 1].querySelector(".error");
  }, { timeout: 30000 });
  const error = await lastMessage(".error");
  say(`wrong key: ${error}`);
  assert.match(error, /401/);
  assert.match(error, /incorrect API key/);

  assert.deepEqual(external, [], "requests left the server: " + external.join(" "));
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, [], "console errors: " + consoleErrors.join(" | "));
  say("checks done");
  console.log("all ok");
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
