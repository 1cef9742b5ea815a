// llama.cpp on a GGUF file, through the npm package node-llama-cpp and its
// prebuilt CPU libraries: pp (one batch of N prompt tokens) and tg (N tokens
// decoded one at a time, greedy), repeated, as tokens per second in JSON.
// scripts/peer_bench.sh runs it beside `duet bench` on the same files and
// thread count. The JS wrapper adds a few ms per generated token, so its tg
// figures understate llama.cpp's own; pp is one native call.
//
// Usage: node llama_cpp_bench.mjs MODEL.gguf THREADS PP TG REPS
import { getLlama } from "node-llama-cpp";

const [modelPath, threadsArg, ppArg, tgArg, repsArg] = process.argv.slice(2);
const threads = Number(threadsArg ?? 2), pp = Number(ppArg ?? 512), tg = Number(tgArg ?? 64);
const reps = Number(repsArg ?? 3);
if (!modelPath) {
  console.error("usage: node llama_cpp_bench.mjs MODEL.gguf THREADS PP TG REPS");
  process.exit(2);
}

const llama = await getLlama({
  gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
  maxThreads: threads, logLevel: "error",
});
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({
  contextSize: pp + tg + 16, batchSize: pp, sequences: 1, threads: { ideal: threads, min: threads },
});
const seq = context.getSequence();
// Ordinary vocabulary ids, the same every run (the weights are random anyway).
const prompt = Array.from({ length: pp }, (_, i) => 100 + ((i * 7919) % 20000));

const stats = (xs) => {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, xs.length - 1));
  return { mean, sd };
};

const ppRates = [], tgRates = [];
for (let r = 0; r < reps + 1; ++r) {  // the first repetition warms up
  await seq.clearHistory();
  let t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(prompt);
  const ppS = (performance.now() - t0) / 1000;
  await seq.clearHistory();
  t0 = performance.now();
  let n = 0;
  for await (const _ of seq.evaluate([prompt[0]], { temperature: 0 })) {
    if (++n >= tg) break;
  }
  const tgS = (performance.now() - t0) / 1000;
  if (r > 0) {
    ppRates.push(pp / ppS);
    tgRates.push(n / tgS);
  }
}
const p = stats(ppRates), g = stats(tgRates);
console.log(JSON.stringify({
  engine: "llama.cpp (node-llama-cpp prebuilt)", model: modelPath, threads,
  pp, pp_tok_s: p.mean, pp_tok_s_stdev: p.sd, tg, tg_tok_s: g.mean, tg_tok_s_stdev: g.sd,
}));
await context.dispose();
await model.dispose();
