#include "engine/stop_text.h"

#include <gtest/gtest.h>

#include "engine/logprobs.h"
#include "model/model.h"
#include "test_util.h"

namespace duet {
namespace {

class StopTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::load(testing::shared_path("models/stories260K/stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(*m);
  }
  // Pushes the ids of `text` one by one; returns what was released, in order.
  std::vector<StopText::Piece> feed(StopText& st, const std::string& text) {
    std::vector<StopText::Piece> out;
    for (int32_t id : model_->tokenizer().encode(text, false)) out.push_back(st.push(id));
    return out;
  }
  std::unique_ptr<Model> model_;
};

TEST_F(StopTextTest, WithoutStopsReleasesEverythingAtOnce) {
  StopText st(model_->tokenizer(), {});
  std::string all;
  for (const auto& p : feed(st, "Once upon a time")) {
    EXPECT_FALSE(p.stopped);
    all += p.text;
  }
  all += st.finish().text;
  EXPECT_EQ(all, " Once upon a time");
}

TEST_F(StopTextTest, StopsBeforeTheStopStringAndNeverReleasesPartOfIt) {
  StopText st(model_->tokenizer(), {"a tim", "zzz"});
  std::string all;
  bool stopped = false;
  for (const auto& p : feed(st, "Once upon a time there")) {
    EXPECT_EQ(all.find(" a"), std::string::npos) << "released the start of a stop string early";
    all += p.text;
    if (p.stopped) {
      stopped = true;
      break;
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(all, " Once upon ");
}

TEST_F(StopTextTest, HeldTextThatDoesNotMatchIsReleasedAtTheEnd) {
  StopText st(model_->tokenizer(), {"time!"});
  std::string all;
  for (const auto& p : feed(st, "Once upon a time")) all += p.text;
  EXPECT_EQ(all, " Once upon a ");  // "time" could still become "time!"
  all += st.finish().text;
  EXPECT_EQ(all, " Once upon a time");
}

TEST(Logprobs, TopTokensAreTheLogSoftmaxInOrder) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f};
  const float lse = log_sum_exp(l.data(), 4);
  EXPECT_NEAR(lse, std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0)), 1e-5);
  const auto top = top_logprobs(l.data(), 4, 3, lse);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);  // ties: lower id first
  EXPECT_EQ(top[1].token, 3);
  EXPECT_EQ(top[2].token, 2);
  EXPECT_NEAR(top[2].logprob, 2.0f - lse, 1e-6);
}

}  // namespace
}  // namespace duet
