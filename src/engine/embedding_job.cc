#include "engine/embedding_job.h"

#include <cmath>
#include <vector>

namespace duet {

namespace {

void normalize(std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum <= 0) return;
  const auto inv = static_cast<float>(1.0 / std::sqrt(sum));
  for (float& x : v) x *= inv;
}

}  // namespace

Status check_pooling(Pooling pooling) {
  if (pooling != Pooling::kMean && pooling != Pooling::kCls && pooling != Pooling::kLast)
    return err("pooling '", pooling_name(pooling), "' gives no single vector per input (mean, cls and last do)");
  return {};
}

EmbeddingJob::EmbeddingJob(std::vector<std::vector<int32_t>> inputs, Pooling pooling, int32_t dim, BlockPool& pool)
    : inputs_(std::move(inputs)),
      pooling_(pooling),
      pool_(pool),
      sums_(inputs_.size(), std::vector<float>(static_cast<size_t>(dim), 0.0f)) {}

EmbeddingJob::~EmbeddingJob() {
  for (Open& in : open_) in.table.release_all(pool_);
}

bool EmbeddingJob::start_next() {
  Open in{next_, {}, 0};
  if (!in.table.reserve(pool_, static_cast<int32_t>(inputs_[next_].size()))) return false;
  open_.push_back(std::move(in));
  ++next_;
  return true;
}

// The rows pooling reads: every one for mean, only the first or the last
// otherwise, so cls and last norm one row per input.
bool EmbeddingJob::wanted(size_t index, int32_t position) const {
  switch (pooling_) {
    case Pooling::kCls: return position == 0;
    case Pooling::kLast: return position == static_cast<int32_t>(inputs_[index].size()) - 1;
    default: return true;
  }
}

void EmbeddingJob::add(size_t index, const float* row) {
  std::vector<float>& v = sums_[index];
  for (size_t j = 0; j < v.size(); ++j) v[j] += row[j];
}

void EmbeddingJob::close_finished() {
  const auto finished = [this](const Open& in) { return in.n_done == static_cast<int32_t>(inputs_[in.index].size()); };
  for (Open& in : open_)
    if (finished(in)) in.table.release_all(pool_);
  std::erase_if(open_, finished);
}

Embeddings EmbeddingJob::take_vectors() {
  for (size_t i = 0; i < sums_.size(); ++i) {
    if (pooling_ == Pooling::kMean)
      for (float& x : sums_[i]) x /= static_cast<float>(inputs_[i].size());
    normalize(sums_[i]);
  }
  return std::move(sums_);
}

}  // namespace duet
