// Byte-level BPE encode speed on 1 MB of synthetic multilingual text (prose
// in several scripts, code, numbers, emoji, whitespace runs), one thread.
// Reports bytes/second per vocabulary. Vocabularies come from
// $DUET_SHARED_DIR (default: the shared/ folder beside the repository).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace duet {
namespace {

std::string shared_dir() {
  if (const char* e = std::getenv("DUET_SHARED_DIR")) return e;
  return (std::filesystem::path(__FILE__).parent_path() / "../../shared").string();
}

std::string synthetic_text(size_t bytes) {
  static const std::vector<std::string> kPieces = {
      "The quick brown fox jumps over the lazy dog. ", "It's 12:45 and we've got 1,234,567 items; ",
      "Der Bär läuft über die Straße. ", "Привет, как дела? Всё хорошо. ", "日本語の文章を書いています。",
      "中文文本的分词测试。", "한국어 문장입니다. ", "مرحبا بالعالم ", "Ελληνικά κείμενα ",
      "int main() {\n    return 0;\n}\n", "for (size_t i = 0; i < n; ++i) x[i] += y[i];\n",
      "def f(x):\n    return x ** 2\n\n", "    \t  \n\n", "🦙🚀👍🏽 ", "3.14159 2.71828 -42 0x7fff ",
      "\"key\": [1, 2, 3], ", "https://example.com/a/b?c=d ", "\n\n\n",
  };
  std::mt19937 rng(7);
  std::string s;
  while (s.size() < bytes) s += kPieces[rng() % kPieces.size()];
  s.resize(bytes);
  // Cut at a character boundary: drop a trailing partial UTF-8 sequence.
  while (!s.empty() && (static_cast<uint8_t>(s.back()) & 0xC0) == 0x80) s.pop_back();
  if (!s.empty() && static_cast<uint8_t>(s.back()) >= 0xC0) s.pop_back();
  return s;
}

void BM_BpeEncode(benchmark::State& state, const char* vocab) {
  const std::string path = shared_dir() + "/tokenizers/llama.cpp-vocab/ggml-vocab-" + vocab + ".gguf";
  Result<GgufFile> file = GgufFile::open(path);
  if (!file) return state.SkipWithError(file.error().message.c_str());
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*file);
  if (!tok) return state.SkipWithError(tok.error().message.c_str());
  const std::string text = synthetic_text(1 << 20);
  size_t n_tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = (*tok)->encode(text, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_BpeEncode, gpt2, "gpt-2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BpeEncode, llama3, "llama-bpe")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BpeEncode, qwen2, "qwen2")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace duet
