// `duet serve`'s API key from a file or the environment (so it is not in
// ps): conflicting or empty sources are refused before the server starts,
// as are malformed --cors-origin and --pooling values.
#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

namespace duet {
namespace {

using testing::duet_binary;
using testing::run_command;

std::string serve(const std::string& args) {
  return duet_binary() + " serve -m " + testing::shared_path("models/stories260K/stories260K.gguf") +
         " --port 0 " + args + " 2>&1";
}

TEST(ServeOptions, TheApiKeyComesFromOneSource) {
  testing::TempDir dir;
  const std::string empty = dir.file("empty"), key = dir.file("key");
  { std::ofstream(empty) << "\n"; }
  { std::ofstream(key) << "sesame\n"; }

  auto r = run_command(serve("--api-key a --api-key-file " + key));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("not both"), std::string::npos) << r.output;

  r = run_command("DUET_API_KEY=a " + serve("--api-key-file " + key));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("not both"), std::string::npos) << r.output;

  r = run_command(serve("--api-key-file " + empty));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("first line is empty"), std::string::npos) << r.output;

  r = run_command(serve("--api-key-file " + dir.file("missing")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing"), std::string::npos) << r.output;
}

TEST(ServeOptions, BadCorsOriginsAndPoolingsAreRefusedAtStart) {
  auto r = run_command(serve("--cors-origin https://a.example,app.example"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'app.example' is not an origin"), std::string::npos) << r.output;
  r = run_command(serve("--pooling none"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--pooling must be mean, cls or last"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace duet
