#include "core/kv_format.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/half.h"

namespace duet {
namespace {

constexpr float kMaxF16 = 65504.0f;

// The fp16 scale for values up to amax mapped onto codes up to max_code, and
// the reciprocal of what it decodes to, so codes are chosen against the scale
// actually stored (an fp16-rounded scale may be slightly smaller than amax
// needs; the caller clamps).
struct Scale {
  uint16_t bits;
  float inverse;
};

Scale make_scale(float amax, int32_t max_code) {
  const float d = std::min(amax / static_cast<float>(max_code), kMaxF16);
  const uint16_t bits = f32_to_f16(d);
  const float stored = f16_to_f32(bits);
  return {bits, stored > 0.0f ? 1.0f / stored : 0.0f};
}

float abs_max(const float* x, int32_t n) {
  float m = 0.0f;
  for (int32_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

int32_t to_code(float x, float inverse, int32_t max_code) {
  const auto q = static_cast<int32_t>(std::lrintf(x * inverse));
  return std::clamp(q, -max_code, max_code);
}

void quantize_q8(const float* x, int32_t hd, int8_t* row, uint16_t* scale) {
  const Scale s = make_scale(abs_max(x, hd), 127);
  *scale = s.bits;
  for (int32_t i = 0; i < hd; ++i) row[i] = static_cast<int8_t>(to_code(x[i], s.inverse, 127));
}

void quantize_q4(const float* x, int32_t hd, uint8_t* row, uint16_t* scales) {
  std::memset(row, 0, static_cast<size_t>(hd) / 2);
  for (int32_t g = 0; g * kKvQ4Group < hd; ++g) {
    const int32_t start = g * kKvQ4Group, len = std::min(kKvQ4Group, hd - start);
    const Scale s = make_scale(abs_max(x + start, len), 7);
    scales[g] = s.bits;
    for (int32_t i = start; i < start + len; ++i) {
      const auto code = static_cast<uint8_t>(to_code(x[i], s.inverse, 7) + 8);
      row[i >> 1] |= static_cast<uint8_t>(code << ((i & 1) * 4));
    }
  }
}

}  // namespace

std::string_view kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::Q8: return "q8";
    case KvType::Q4: return "q4";
  }
  return "?";
}

Result<KvType> parse_kv_type(std::string_view name) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8, KvType::Q4})
    if (name == kv_type_name(t)) return t;
  return err("unknown KV cache type '", name, "' (expected f32, f16, q8 or q4)");
}

Status check_kv_type(KvType t, int32_t head_dim) {
  if (t == KvType::Q4 && head_dim % 2 != 0)
    return err("q4 KV packs two elements a byte and needs an even head_dim (this model's is ",
               head_dim, ")");
  return {};
}

size_t kv_row_bytes(KvType t, int32_t head_dim) {
  const auto hd = static_cast<size_t>(head_dim);
  switch (t) {
    case KvType::F32: return hd * 4;
    case KvType::F16: return hd * 2;
    case KvType::Q8: return hd;
    case KvType::Q4: return hd / 2;
  }
  return 0;
}

int32_t kv_row_scales(KvType t, int32_t head_dim) {
  switch (t) {
    case KvType::Q8: return 1;
    case KvType::Q4: return (head_dim + kKvQ4Group - 1) / kKvQ4Group;
    default: return 0;
  }
}

void kv_quantize_row(KvType t, const float* x, int32_t hd, uint8_t* row, uint16_t* scales) {
  switch (t) {
    case KvType::F32:
      std::memcpy(row, x, static_cast<size_t>(hd) * sizeof(float));
      return;
    case KvType::F16: {
      auto* h = reinterpret_cast<uint16_t*>(row);
      for (int32_t i = 0; i < hd; ++i) h[i] = f32_to_f16(x[i]);
      return;
    }
    case KvType::Q8: quantize_q8(x, hd, reinterpret_cast<int8_t*>(row), scales); return;
    case KvType::Q4:
      assert(hd % 2 == 0);
      quantize_q4(x, hd, row, scales);
      return;
  }
}

void kv_dequantize_row(KvType t, const uint8_t* row, const uint16_t* scales, int32_t hd,
                       float* out) {
  switch (t) {
    case KvType::F32:
      std::memcpy(out, row, static_cast<size_t>(hd) * sizeof(float));
      return;
    case KvType::F16: {
      const auto* h = reinterpret_cast<const uint16_t*>(row);
      for (int32_t i = 0; i < hd; ++i) out[i] = f16_to_f32(h[i]);
      return;
    }
    case KvType::Q8: {
      const float d = f16_to_f32(scales[0]);
      const auto* q = reinterpret_cast<const int8_t*>(row);
      for (int32_t i = 0; i < hd; ++i) out[i] = d * static_cast<float>(q[i]);
      return;
    }
    case KvType::Q4:
      for (int32_t i = 0; i < hd; ++i)
        out[i] = f16_to_f32(scales[i / kKvQ4Group]) * static_cast<float>(kv_q4_code(row, i) - 8);
      return;
  }
}

}  // namespace duet
