// `duet run --draft / --lookup`: the greedy text is the plain text, the
// stats report the acceptance, and bad combinations are clear errors.
// `duet run --kv-window`: generation past the context.
// `duet run`'s warm-up: the output is what it is without one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace duet {
namespace {

using testing::run_command;

std::string stories() { return testing::shared_path("models/stories260K/stories260K.gguf"); }

struct RunOutput {
  std::string text;
  nlohmann::json stats;
};

RunOutput run(const std::string& extra, int n = 60, const std::string& sampling = "--temp 0") {
  testing::TempDir dir;
  // A subshell, so that run_command's own 2>&1 does not undo the redirections.
  const std::string cmd = "(" + testing::duet_binary() + " run -m " + stories() +
                          " -p 'Once upon a time' -n " + std::to_string(n) + " " + sampling + " --ctx 256 -t 1 --json " + extra +
                          " 2>" + dir.file("stats") + " >" + dir.file("text") + ")";
  const testing::CommandResult r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  RunOutput out;
  out.text = run_command("cat " + dir.file("text")).output;
  const std::string stats = run_command("cat " + dir.file("stats")).output;
  out.stats = nlohmann::json::parse(stats, nullptr, false);
  EXPECT_FALSE(out.stats.is_discarded()) << stats;
  return out;
}

TEST(RunWarmup, LeavesTheOutputAsItWas) {
  // The one-token pass before the prompt leaves nothing the prompt's request
  // would see (cache blocks, the sampler's state): greedy, and sampled from
  // a seed.
  for (const std::string sampling : {"--temp 0", "--temp 0.9 --seed 7"}) {
    const RunOutput warm = run("--ignore-eos", 60, sampling), cold = run("--ignore-eos --no-warmup", 60, sampling);
    EXPECT_EQ(warm.text, cold.text) << sampling;
    EXPECT_EQ(warm.stats["generated_ids"], cold.stats["generated_ids"]) << sampling;
    EXPECT_EQ(warm.stats["generated_ids"].size(), 60u) << sampling;
  }
}

TEST(RunSpeculative, DraftAndLookupKeepTheGreedyText) {
  const RunOutput plain = run("");
  ASSERT_FALSE(plain.stats.is_discarded());
  EXPECT_EQ(plain.stats["speculative"]["drafted"], 0);
  for (const std::string& extra : {"--draft " + stories() + " --draft-max 3", std::string("--lookup 2")}) {
    const RunOutput spec = run(extra);
    ASSERT_FALSE(spec.stats.is_discarded());
    EXPECT_EQ(spec.text, plain.text) << extra;
    EXPECT_EQ(spec.stats["generated_ids"], plain.stats["generated_ids"]) << extra;
    EXPECT_GT(spec.stats["speculative"]["drafted"].get<int>(), 0) << extra;
    EXPECT_GE(spec.stats["speculative"]["tokens_per_pass"].get<double>(), 1.0) << extra;
  }
  // The target drafting for itself: every draft is accepted.
  const RunOutput self = run("--draft " + stories());
  EXPECT_EQ(self.stats["speculative"]["acceptance_rate"].get<double>(), 1.0);
  EXPECT_GT(self.stats["speculative"]["tokens_per_pass"].get<double>(), 2.0);
}

TEST(RunSpeculative, BadOptionsAreClearErrors) {
  const std::string base = testing::duet_binary() + " run -m " + stories() + " -p hi -n 4 ";
  auto r = run_command(base + "--draft /nonexistent/draft.gguf");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("draft model"), std::string::npos) << r.output;
  r = run_command(base + "--draft " + stories() + " --lookup 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("not both"), std::string::npos) << r.output;
  r = run_command(base + "--lookup 2 --draft-max 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("at least 1"), std::string::npos) << r.output;
}

TEST(RunKvWindow, GeneratesPastTheContext) {
  const RunOutput plain = run("--ignore-eos", 400);
  EXPECT_EQ(plain.stats["finish_reason"], "context_full");
  const RunOutput windowed = run("--ignore-eos --kv-window 128 --kv-sinks 4", 400);
  EXPECT_EQ(windowed.stats["finish_reason"], "length");
  EXPECT_EQ(windowed.stats["generated_tokens"], 400);
  const std::string base = testing::duet_binary() + " run -m " + stories() + " -p hi -n 4 --ctx 256 ";
  auto r = run_command(base + "--kv-window 250 --kv-sinks 8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("more than the context of 256"), std::string::npos) << r.output;
  r = run_command(base + "--kv-window -3");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace duet
