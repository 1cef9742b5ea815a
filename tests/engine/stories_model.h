// The models the engine tests run on: the real stories260K weights, or any
// model file they make.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/model.h"
#include "test_util.h"

namespace duet::testing {

inline std::string stories_path() { return shared_path("models/stories260K/stories260K.gguf"); }

// The model at `path`, or null after a test failure naming why.
inline std::unique_ptr<Model> load(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? std::move(*m) : nullptr;
}

inline std::unique_ptr<Model> load_stories() { return load(stories_path()); }

}  // namespace duet::testing
