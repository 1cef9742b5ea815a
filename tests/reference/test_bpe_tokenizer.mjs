// Independent byte-level BPE reference for tests/tokenizer/bpe_reference_test.cc.
//   node test_bpe_tokenizer.mjs gpt2|llama3 CASES.json SHARED_DIR
// CASES.json: [{"b64": base64 of the text's bytes, "special": bool}, ...].
// Prints a JSON array with the ids of each case, no BOS/EOS.
//   gpt2:   gpt-tokenizer's r50k_base (tiktoken's GPT-2 ranks).
//   llama3: @lenml/tokenizers (transformers.js's Hugging Face algorithm) on
//           shared/tokenizers/llama3/tokenizer.json. It always splits added
//           tokens out of the text, so every llama3 case must set special.
// Bytes are decoded as WHATWG's TextDecoder does (each maximal ill-formed
// subpart becomes one U+FFFD; a leading BOM is kept as text).
import { readFileSync } from "node:fs";

const [vocab, casesPath, sharedDir] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const textOf = (c) => decoder.decode(Buffer.from(c.b64, "base64"));

let encode;
if (vocab === "gpt2") {
  const { encode: r50k } = await import("gpt-tokenizer/encoding/r50k_base");
  const plain = (text) => r50k(text, { disallowedSpecial: new Set() });
  // gpt-tokenizer 4.0.0 finds an allowed special token only where a segment
  // starts (its sticky regex never searches ahead), so the one r50k special,
  // <|endoftext|> = 50256, is split out here instead.
  const eot = "<|endoftext|>";
  encode = (text, special) =>
    special ? text.split(eot).flatMap((part, i) => (i > 0 ? [50256] : []).concat(plain(part))) : plain(text);
} else if (vocab === "llama3") {
  const { TokenizerLoader } = await import("@lenml/tokenizers");
  const dir = `${sharedDir}/tokenizers/llama3`;
  const tokenizer = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8")),
    tokenizerConfig: JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8")),
  });
  encode = (text, special) => {
    if (!special) throw new Error("llama3 reference always parses special tokens");
    return tokenizer.encode(text, { add_special_tokens: false });
  };
} else {
  throw new Error(`unknown vocab '${vocab}' (gpt2 or llama3)`);
}

process.stdout.write(JSON.stringify(cases.map((c) => Array.from(encode(textOf(c), c.special)))));
