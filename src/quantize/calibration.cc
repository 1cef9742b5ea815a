#include "quantize/calibration.h"

#include <algorithm>
#include <map>

namespace duet {
namespace {

// Sums x^2 per input channel of each weight the forward pass multiplies.
class SquareSums final : public MatmulObserver {
 public:
  void observe(const TensorView& weight, const float* x, int32_t rows) override {
    Sums& s = sums_[weight.name];
    const auto k = static_cast<size_t>(weight.ne[0]);
    s.sq.resize(k);
    for (int32_t r = 0; r < rows; ++r, x += k)
      for (size_t i = 0; i < k; ++i) s.sq[i] += static_cast<double>(x[i]) * x[i];
    s.rows += rows;
  }

  ChannelImportance means() const {
    ChannelImportance out;
    for (const auto& [name, s] : sums_) {
      std::vector<float>& m = out[name];
      m.resize(s.sq.size());
      for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(s.sq[i] / s.rows);
    }
    return out;
  }

 private:
  struct Sums {
    std::vector<double> sq;  // [k]
    int64_t rows = 0;
  };
  std::map<std::string, Sums> sums_;
};

}  // namespace

Result<ChannelImportance> collect_channel_importance(Model& model,
                                                     const std::vector<int32_t>& tokens,
                                                     int32_t ctx, ThreadPool& pool) {
  if (tokens.empty()) return err("calibration text has no tokens");
  if (ctx < 1) return err("calibration context ", ctx, " must be positive");
  SquareSums sums;
  KvCache cache(with_one_table(model.kv_shape()), blocks_for_tokens(ctx));
  std::vector<float> logits;  // [rows][n_vocab]: every row, so the head is observed too
  model.set_matmul_observer(&sums);
  Status status;
  for (size_t begin = 0; begin < tokens.size() && status; begin += static_cast<size_t>(ctx)) {
    const auto n = static_cast<int32_t>(std::min(tokens.size() - begin, static_cast<size_t>(ctx)));
    BlockTable table;
    if (!table.reserve(cache.pool(), n)) {
      status = err("internal: KV cache reservation of ", n, " tokens failed");
      break;
    }
    Batch batch;
    const int32_t s = batch.add_sequence(&table);
    for (int32_t i = 0; i < n; ++i) batch.add(tokens[begin + static_cast<size_t>(i)], i, s, true);
    logits.resize(static_cast<size_t>(n) * static_cast<size_t>(model.config().n_vocab));
    status = model.forward(batch, cache, pool, logits.data());
    table.release_all(cache.pool());
  }
  model.set_matmul_observer(nullptr);
  if (!status) return status.error();
  return sums.means();
}

}  // namespace duet
