// `duet run --grammar / --grammar-file / --json-schema`: the generated text
// follows the grammar, and bad grammars/schemas fail before the model loads
// with the problem named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace duet {
namespace {

using testing::run_command;

std::string base() {
  return testing::duet_binary() + " run -m " + testing::shared_path("models/stories260K/stories260K.gguf") +
         " -p 'Once' -n 200 --temp 1 --seed 4 -t 1 ";
}

// stdout without the echoed prompt.
std::string generated(const std::string& extra) {
  testing::TempDir dir;
  const testing::CommandResult r = run_command("(" + base() + extra + " 2>/dev/null >" + dir.file("out") + ")");
  EXPECT_EQ(r.exit_code, 0) << extra << "\n" << r.output;
  const std::string out = testing::read_file(dir.file("out"));
  return out.rfind("Once", 0) == 0 ? out.substr(4) : out;
}

TEST(RunGrammar, GbnfFromTheCommandLineAndAFile) {
  EXPECT_EQ(generated("--grammar 'root ::= \" upon a time\"'"), " upon a time");
  testing::TempDir dir;
  testing::write_file(dir.file("g.gbnf"), "root ::= \" \" digit{3}\ndigit ::= [0-9]\n");
  const std::string out = generated("--grammar-file " + dir.file("g.gbnf"));
  ASSERT_EQ(out.size(), 4u) << out;
  for (size_t i = 1; i < 4; ++i) EXPECT_TRUE(out[i] >= '0' && out[i] <= '9') << out;
}

TEST(RunGrammar, JsonSchemaFile) {
  testing::TempDir dir;
  testing::write_file(dir.file("s.json"),
                      R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},)"
                      R"("ok":{"type":"boolean"}},"required":["n","ok"],"additionalProperties":false})");
  const nlohmann::json j = nlohmann::json::parse(generated("--json-schema " + dir.file("s.json")), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_TRUE(j["n"].is_number_integer() && j["n"] >= 1 && j["n"] <= 9) << j.dump();
  EXPECT_TRUE(j["ok"].is_boolean()) << j.dump();
  EXPECT_EQ(j.size(), 2u) << j.dump();
}

TEST(RunGrammar, BadGrammarsAreClearErrors) {
  auto r = run_command(base() + "--grammar 'root ::= (\"a\"'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--grammar"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1:"), std::string::npos) << r.output;
  testing::TempDir dir;
  testing::write_file(dir.file("s.json"), R"({"type":"string","format":"email"})");
  r = run_command(base() + "--json-schema " + dir.file("s.json"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("format 'email'"), std::string::npos) << r.output;
  r = run_command(base() + "--grammar 'root ::= \"a\"' --json-schema " + dir.file("s.json"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("only one"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace duet
