// `duet chat`: piped turns, the KV cache kept between turns (the second turn
// prefills only what the first left uncached), the same replies as without
// reuse, and template errors.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "test_util.h"

namespace duet {
namespace {

using testing::run_command;

std::string duet_chat(const std::string& args) {
  return testing::duet_binary() + " chat -m " + testing::shared_path("models/stories260K/stories260K.gguf") +
         " --temp 0 " + args;
}

struct Turn {
  int prompt, cached, prefilled, generated;
};

std::vector<Turn> turns_of(const std::string& output) {
  static const std::regex line(
      R"(\[turn \d+\] prompt (\d+) tokens: (\d+) cached, (\d+) prefilled .*; generated (\d+) tokens)");
  std::vector<Turn> turns;
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it)
    turns.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3]), std::stoi((*it)[4])});
  return turns;
}

TEST(ChatCommand, SecondTurnPrefillsOnlyNewTokens) {
  const auto r = run_command("printf 'Hello there\\nTell me more\\n' | " +
                             duet_chat("--chat-template llama2 -n 12 --verbose"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto turns = turns_of(r.output);
  ASSERT_EQ(turns.size(), 2u) << r.output;
  EXPECT_EQ(turns[0].cached, 0);
  EXPECT_EQ(turns[0].prefilled, turns[0].prompt);
  EXPECT_EQ(turns[0].generated, 12);
  // The prefix cache holds whole 16-token blocks: every full block of the
  // first prompt is reused; the rest, the reply (as the template renders
  // it) and the new user message are computed.
  EXPECT_GE(turns[1].cached, turns[0].prompt / 16 * 16);
  EXPECT_GT(turns[1].cached, 0);
  EXPECT_LE(turns[1].cached, turns[0].prompt + turns[0].generated);
  EXPECT_EQ(turns[1].prefilled, turns[1].prompt - turns[1].cached);
  EXPECT_LT(turns[1].prefilled, turns[1].prompt);
}

TEST(ChatCommand, ReuseGivesTheSameReplies) {
  const std::string input = "printf 'Hello there\\nTell me more\\nAnd then?\\n' | ";
  const auto reused = run_command(input + duet_chat("--chat-template llama2 -n 10 2>/dev/null"));
  const auto fresh = run_command(input + duet_chat("--chat-template llama2 -n 10 --no-cache-reuse 2>/dev/null"));
  ASSERT_EQ(reused.exit_code, 0) << reused.output;
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_EQ(std::count(reused.output.begin(), reused.output.end(), '\n'), 3);
  EXPECT_EQ(reused.output, fresh.output);
  const auto turns = turns_of(run_command(input + duet_chat("--chat-template llama2 -n 10 -v --no-cache-reuse")).output);
  ASSERT_EQ(turns.size(), 3u);
  for (const Turn& t : turns) EXPECT_EQ(t.cached, 0);
}

TEST(ChatCommand, TemplateFromFileAndErrors) {
  testing::TempDir dir;
  std::ofstream(dir.file("t.jinja")) << "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:";
  auto r = run_command("printf 'hi\\n' | " + duet_chat("--chat-template " + dir.file("t.jinja") + " -n 4 -v"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(turns_of(r.output).size(), 1u) << r.output;

  r = run_command("printf 'hi\\n' | " + duet_chat("-n 4"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("the model has no tokenizer.chat_template"), std::string::npos) << r.output;

  r = run_command("printf 'hi\\n' | " + duet_chat("--chat-template nope -n 4"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("neither a built-in template"), std::string::npos) << r.output;

  r = run_command("printf 'hi\\n' | " + duet_chat("--chat-template gemma --system 'be brief' -n 4"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("System role not supported"), std::string::npos) << r.output;

  std::ofstream(dir.file("bad.jinja")) << "{{ messages }}\n{% macro x() %}{% endmacro %}";
  r = run_command("printf 'hi\\n' | " + duet_chat("--chat-template " + dir.file("bad.jinja")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unsupported template tag '{% macro %}' at line 2:1"), std::string::npos) << r.output;

  std::ofstream(dir.file("tokenizer_config.json")) << R"({"chat_template": "{{ messages[0].content }}!"})";
  r = run_command("printf 'hi\\n' | " + duet_chat("--chat-template " + dir.file("tokenizer_config.json") + " -n 2 -v"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace duet
