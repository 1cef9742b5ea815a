#include "quantize/quantize_gguf.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include "formats/file_type.h"
#include "formats/llama_names.h"
#include "quantize/rows.h"

namespace duet {
namespace {

namespace n = gguf_names;

// The tensor's rows converted to `to`, in parallel; its bytes as they are
// when it already has that type.
Result<std::vector<uint8_t>> convert_tensor(const TensorView& t, DType to, const float* importance,
                                            ThreadPool& pool) {
  const int64_t k = t.ne[0], rows = t.rows();
  DUET_ASSIGN(const size_t out_row, row_bytes(to, k));
  std::vector<uint8_t> out(out_row * static_cast<size_t>(rows));  // [rows][out_row]
  if (to == t.dtype) {
    std::memcpy(out.data(), t.data, t.nbytes);
    return out;
  }
  std::mutex mu;
  Error first;
  std::atomic<bool> failed{false};
  pool.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(k));  // [k]
    for (int64_t r = begin; r < end && !failed.load(std::memory_order_relaxed); ++r) {
      Status st = row_to_float(t.dtype, t.row(r), row.data(), k);
      if (st) st = row_from_float(to, row.data(), out.data() + out_row * static_cast<size_t>(r), k,
                                  importance);
      if (!st) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) first = err("tensor ", t.name, " row ", r, ": ", st.error().message);
      }
    }
  });
  if (failed) return first;
  return out;
}

// The importance of t's input channels, or null when none was measured.
Result<const float*> importance_of(const TensorView& t, const ChannelImportance* all) {
  if (!all) return nullptr;
  const auto it = all->find(t.name);
  if (it == all->end()) return nullptr;
  if (static_cast<int64_t>(it->second.size()) != t.ne[0])
    return err("importance of ", t.name, " has ", it->second.size(), " channels, the tensor's rows ",
               t.ne[0]);
  return it->second.data();
}

}  // namespace

Result<QuantizeSummary> quantize_gguf(const GgufFile& in, const std::string& out_path,
                                      const QuantizeOptions& o, ThreadPool& pool,
                                      const QuantizeProgressFn& progress) {
  if (!is_quantize_target(o.target)) return err("cannot quantize to ", dtype_name(o.target));
  GgufWriter w;
  for (const std::string& key : in.keys()) w.set(key, *in.find(key));
  DUET_ASSIGN(const uint32_t ftype, llama_file_type(o.target));
  w.set(n::kFileType, GgufValue::of_u32(ftype));

  QuantizeSummary sum;
  const auto& tensors = in.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& t = tensors[i];
    const TensorChoice choice = choose_tensor_type(t, o);
    const float* importance = nullptr;
    if (choice.type != t.dtype) {
      DUET_ASSIGN(importance, importance_of(t, o.importance));
    }
    DUET_ASSIGN(std::vector<uint8_t> data, convert_tensor(t, choice.type, importance, pool));
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    DUET_TRY(w.add_tensor(t.name, choice.type, ne, data.data(), data.size()));
    sum.bytes_in += t.nbytes;
    sum.bytes_out += data.size();
    sum.elements += t.elements();
    ++sum.tensors_by_type[choice.type];
    if (progress) progress({i, tensors.size(), &t, choice, sum.bytes_in, sum.bytes_out});
  }
  DUET_TRY(w.write(out_path));
  return sum;
}

}  // namespace duet
