// duet's byte-level BPE against independent tokenizers from npm, run with
// node (tests/reference/test_bpe_tokenizer.mjs): gpt-tokenizer's r50k_base for
// GPT-2, and @lenml/tokenizers (the Hugging Face algorithm) on Llama 3's
// tokenizer.json. They need `npm install --prefix tests/reference
// --no-package-lock` once.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace duet {
namespace {

using Ids = std::vector<int32_t>;

// Pieces of text the generated cases are built from. U+0085 (NEL) and U+FEFF
// stay out on purpose: JavaScript's \s differs from the White_Space property
// the real tokenizers (Rust regex, Oniguruma, llama.cpp) use on those two.
const std::vector<std::string> kFragments = {
    // English, contractions (the regexes treat these specially)
    "Hello", "world", "The quick brown fox jumps over the lazy dog.", "I'm", "you're", "we've",
    "she'll", "they'd", "it's", "DON'T", "We'RE", "o'clock", "rock 'n' roll", "'s", "''", "'",
    "Mr. O'Neil's", "e.g.", "U.S.A.",
    // other scripts
    "Äpfel", "Straße", "naïve café", "Ελληνικά", "Привет, мир!", "Україна", "日本語のテキスト",
    "中文分词测试", "한국어 문장", "العربية", "עברית", "हिन्दी", "ภาษาไทย", "Tiếng Việt",
    "ქართული", "Ἀθῆναι", "e\xCC\x81", "ﬁ", "Ⅻ", "½", "²³", "٣٤٥", "१२३", "〇",
    // numbers
    "0", "7", "42", "123", "1234", "12345", "3.14159", "1,000,000", "-17", "+1 (555) 010-9999",
    "2024-01-31", "0x7FFF", "1e-9", "99%", "$5.00", "１２３",
    // code and punctuation
    "int main() { return 0; }", "def f(x):\n    return x**2", "if (a && b) {", "x += 1;",
    "std::vector<int>", "#include <cstdio>", "// comment", "/* block */", "{\"key\": [1, 2]}",
    "<div class=\"a\">", "</div>", "SELECT * FROM t;", "a->b", "i++", "==", "!==", "...", "---",
    "???", "!!!", "@user", "#tag", "https://example.com/path?q=1&r=2", "C:\\Windows\\", "~/.bashrc",
    "`code`", "**bold**", "_under_", "~~~", "|", "\\n",
    // emoji and symbols
    "🦙", "😀", "👍🏽", "👨‍👩‍👧", "🇩🇪", "❤️", "✓", "→", "€", "©", "™", "∑", "√2",
    // special-token text
    "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|reserved_special_token_5|>", "<|eot_id|", "<|endoftext", "|>", "<|",
    // whitespace
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00A0", "\u3000", "\u2009",
    "\u2028", " \t \n", "\v", "\f",
};

const std::vector<std::string> kSeparators = {"", " ", " ", " ", "  ", "\n", "\t", "\n\n", "   ", ", "};

// Hand-written cases: whitespace runs, edges and mixtures.
const std::vector<std::string> kCases = {
    "", " ", "  ", "\n", "\n\n\n", " \n", "\n ", "a ", " a", "a  b", "a   b", "a\n\nb", "a \n b",
    "   leading", "trailing   ", "\t\ttabbed\tline\t", "line1\r\nline2\r\n", "\r\r\n\n",
    "    indented code\n        more", "word\u00A0word", "x \u3000 y", "a\u2028b",
    "11111111111", "1 22 333 4444 55555", "a1b22c333", "３.１４", "x²+y²=z²",
    "''''", "'S'T'RE'VE'M'LL'D", "'sss", "don't DON'T Don'T", "a'b", "'\n'",
    "🦙🦙🦙", " 🦙", "🦙 llama", "ab🦙cd",
    "Hello<|endoftext|>World", "<|endoftext|><|endoftext|>", "a <|endoftext|> b",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "<|reserved_special_token_0|><|reserved_special_token_250|><|reserved_special_token_251|>",
    std::string(300, ' '), std::string(257, 'a'), std::string(100, '\n'), std::string(50, '!'),
};

// Text with ill-formed UTF-8, which every tokenizer here sees as U+FFFD.
const std::vector<std::string> kInvalid = {
    "\x80", "a\x80" "b", "\xFF\xFE", "\xC0\xAF", "\xC1\xBF", "\xE2\x82", "\xE2\x82" "x", "\xE2\x82\xAC\xE2",
    "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF0\x9F\xA6", "\xF0\x9F\xA6 llama", "\xF8\x88\x80\x80\x80",
    "ok \xC3", "\xC3\x28", "\xA0\xA1", "\xE0\x80\x80", "\xF0\x80\x80\x80", "x\xBFy\xBFz", "\xFE",
};

std::vector<std::string> build_corpus() {
  std::vector<std::string> corpus = kCases;
  for (const std::string& f : kFragments) corpus.push_back(f);
  for (const std::string& s : kInvalid) corpus.push_back(s);
  std::mt19937 rng(20240531);
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  while (corpus.size() < 560) {
    std::string s;
    const int parts = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < parts; ++i) {
      if (i > 0) s += pick(kSeparators);
      s += rng() % 12 == 0 ? pick(kInvalid) : pick(kFragments);
    }
    corpus.push_back(s);
  }
  return corpus;
}

std::string base64(const std::string& s) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const uint32_t v = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8) | uint8_t(s[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i + 1 == s.size()) {
    const uint32_t v = uint8_t(s[i]) << 16;
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == s.size()) {
    const uint32_t v = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8);
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

struct Case {
  std::string text;
  bool special;
};

// Runs the npm reference on `cases`; empty on failure (after reporting it).
std::vector<Ids> reference_ids(const std::string& vocab, const std::vector<Case>& cases) {
  const std::string dir = std::string(DUET_SOURCE_DIR) + "/tests/reference";
  if (!std::filesystem::exists(dir + "/node_modules/gpt-tokenizer") ||
      !std::filesystem::exists(dir + "/node_modules/@lenml/tokenizers")) {
    ADD_FAILURE() << "npm reference tokenizers are not installed; run: npm install --prefix " << dir
                  << " --no-package-lock";
    return {};
  }
  testing::TempDir tmp;
  nlohmann::json in = nlohmann::json::array();
  for (const Case& c : cases) in.push_back({{"b64", base64(c.text)}, {"special", c.special}});
  std::ofstream(tmp.file("cases.json")) << in.dump();
  // Ids go to a file; what node prints (stderr included) is only for errors.
  const testing::CommandResult r = testing::run_command(
      "node '" + dir + "/test_bpe_tokenizer.mjs' " + vocab + " '" + tmp.file("cases.json") + "' '" +
      testing::shared_dir() + "' >'" + tmp.file("ids.json") + "'");
  if (r.exit_code != 0) {
    ADD_FAILURE() << "node reference failed (exit " << r.exit_code << "): " << r.output;
    return {};
  }
  std::ifstream ids(tmp.file("ids.json"));
  return nlohmann::json::parse(ids).get<std::vector<Ids>>();
}

void compare(const std::string& vocab_file, const std::string& vocab, const std::vector<Case>& cases) {
  Result<GgufFile> file = GgufFile::open(testing::shared_path("tokenizers/llama.cpp-vocab/" + vocab_file));
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::vector<Ids> want = reference_ids(vocab, cases);
  ASSERT_EQ(want.size(), cases.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids got = (*tok)->encode(cases[i].text, false, cases[i].special);
    if (got == want[i]) continue;
    if (++mismatches <= 20) {
      ADD_FAILURE() << vocab << " case " << i << " (special " << cases[i].special << ") '"
                    << escaped(cases[i].text) << "': duet " << nlohmann::json(got).dump() << " vs reference "
                    << nlohmann::json(want[i]).dump();
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << cases.size() << " cases";
}

TEST(BpeReference, Gpt2MatchesGptTokenizer) {
  std::vector<Case> cases;
  for (const std::string& s : build_corpus()) {
    cases.push_back({s, false});
    if (s.find("<|endoftext|>") != std::string::npos) cases.push_back({s, true});
  }
  ASSERT_GE(cases.size(), 500u);
  compare("ggml-vocab-gpt-2.gguf", "gpt2", cases);
}

// The Hugging Face algorithm always splits added tokens out, so duet runs
// with parse_special here.
TEST(BpeReference, Llama3MatchesHuggingFaceAlgorithm) {
  std::vector<Case> cases;
  for (const std::string& s : build_corpus()) cases.push_back({s, true});
  ASSERT_GE(cases.size(), 500u);
  compare("ggml-vocab-llama-bpe.gguf", "llama3", cases);
}

}  // namespace
}  // namespace duet
