#include "formats/quantize.h"

#include <fnmatch.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <regex>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "formats/llama_names.h"
#include "formats/weighted_quant.h"
#include "kernels/quant.h"

namespace duet {
namespace {

namespace n = gguf_names;

bool is_k_quant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }

// Targets below 8 bits per weight, for which the embedding and head keep Q8_0.
bool is_low_bit(DType t) { return t == DType::Q4_0 || t == DType::Q4_1 || is_k_quant(t); }

// The nearest type at least as precise as `want` whose blocks fit rows of k.
DType row_fallback(DType want, int64_t k) {
  if (k % kQK32 == 0) return want == DType::Q4_K ? DType::Q4_1 : DType::Q8_0;
  return DType::F16;
}

bool is_quantized_block_type(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q4_1: case DType::Q4_K: case DType::Q5_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool is_quantize_target(DType t) {
  return is_quantized_block_type(t) || t == DType::F16 || t == DType::BF16 || t == DType::F32;
}

Result<uint32_t> llama_file_type(DType target) {
  switch (target) {
    case DType::F32: return 0u;   // LLAMA_FTYPE_ALL_F32
    case DType::F16: return 1u;   // MOSTLY_F16
    case DType::Q4_0: return 2u;  // MOSTLY_Q4_0
    case DType::Q4_1: return 3u;  // MOSTLY_Q4_1
    case DType::Q8_0: return 7u;  // MOSTLY_Q8_0
    case DType::Q4_K: return 14u; // MOSTLY_Q4_K_S: every matrix Q4_K
    case DType::Q5_K: return 16u; // MOSTLY_Q5_K_S
    case DType::Q6_K: return 18u; // MOSTLY_Q6_K
    case DType::BF16: return 32u; // MOSTLY_BF16
    default: return err("cannot quantize to ", dtype_name(target));
  }
}

bool name_matches(const std::string& pattern, const std::string& name) {
  if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  try {
    return std::regex_search(name, std::regex(pattern));
  } catch (const std::regex_error&) {
    return false;  // a glob that is not a valid regular expression
  }
}

TensorChoice choose_tensor_type(const TensorView& t, const QuantizeOptions& o) {
  if (t.n_dims < 2) return {t.dtype, "1-D"};
  for (const std::string& p : o.keep)
    if (name_matches(p, t.name)) return {t.dtype, "kept"};
  TensorChoice c{o.target, "target"};
  if ((t.name == n::kTokenEmbd || t.name == n::kOutput) && is_low_bit(o.target))
    c = {DType::Q8_0, "embedding/head"};
  if (t.ne[0] % traits(c.type).block_elems != 0) c = {row_fallback(c.type, t.ne[0]), "row fallback"};
  return c;
}

Status row_to_float(DType from, const void* src, float* dst, int64_t k) {
  switch (from) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      return {};
    case DType::F16:
      for (int64_t i = 0; i < k; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return {};
    case DType::BF16:
      for (int64_t i = 0; i < k; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return {};
    default:
      return dequantize_row(from, src, dst, k);
  }
}

Status row_from_float(DType to, const float* src, void* dst, int64_t k, const float* importance) {
  switch (to) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      return {};
    case DType::F16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return {};
    case DType::BF16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return {};
    case DType::Q4_0:
    case DType::Q4_1:
      if (!importance) break;
      if (k % kQK32 != 0) return err(k, " elements do not fill ", dtype_name(to), " blocks");
      for (int64_t i = 0; i < k; ++i)
        if (!std::isfinite(src[i])) return err("element ", i, " is not finite (", src[i], ")");
      (to == DType::Q4_0 ? quantize_row_q4_0_weighted : quantize_row_q4_1_weighted)(src, dst, k,
                                                                                  importance);
      return {};
    default:
      break;
  }
  return quantize_row(to, src, dst, k, importance);
}

namespace {

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
  Error first{""};
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
    if (o.importance && choice.type != t.dtype) {
      if (auto it = o.importance->find(t.name); it != o.importance->end()) {
        if (static_cast<int64_t>(it->second.size()) != t.ne[0])
          return err("importance of ", t.name, " has ", it->second.size(),
                     " channels, the tensor's rows ", t.ne[0]);
        importance = it->second.data();
      }
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
