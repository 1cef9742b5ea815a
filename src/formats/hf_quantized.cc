#include "formats/hf_quantized.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "formats/block_pack.h"
#include "formats/fp8.h"

namespace duet {
namespace {

// Nibble k of an AWQ word holds output 8c + kAwqOrder[k]; this is the
// inverse: output 8c + j sits in nibble kAwqNibble[j].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

int32_t load_i32(const SafetensorsTensor& t, int64_t index) {
  int32_t v;
  std::memcpy(&v, t.data + static_cast<size_t>(index) * 4, 4);
  return v;
}

float load_float(const SafetensorsTensor& t, int64_t index) {
  const uint8_t* p = t.data + static_cast<size_t>(index) * static_cast<size_t>(traits(t.dtype).block_bytes);
  if (t.dtype == DType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

std::string dtype_text(const SafetensorsTensor& t) {
  return t.fp8_e4m3 ? "F8_E4M3" : std::string(dtype_name(t.dtype));
}

bool is_float(const SafetensorsTensor& t) {
  return !t.fp8_e4m3 && (t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16);
}

// `name` must exist with the given dtype check and shape; `layout` says
// where the expected shape comes from.
Result<const SafetensorsTensor*> expect(const SafetensorsCheckpoint& w, const std::string& dir,
                                        const std::string& name, bool float_type, DType int_type,
                                        const std::vector<int64_t>& shape, const std::string& layout) {
  const SafetensorsTensor* t = w.find(name);
  if (!t) return err(dir, ": missing tensor ", name);
  const bool type_ok = float_type ? is_float(*t) : (!t->fp8_e4m3 && t->dtype == int_type);
  if (!type_ok)
    return err(dir, ": tensor ", name, " is ", dtype_text(*t), "; ", layout, " stores it as ",
               float_type ? "F16, BF16 or F32" : std::string(dtype_name(int_type)));
  if (t->shape != shape)
    return err(dir, ": tensor ", name, " has shape ", shape_text(t->shape), " but config.json implies ",
               shape_text(shape), " (", layout, ")");
  return t;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Result<std::optional<QuantizedLinear>> QuantizedLinear::find(const SafetensorsCheckpoint& weights,
                                                             const HfQuantization& quant, const std::string& dir,
                                                             const std::string& prefix, int64_t out, int64_t in) {
  const SafetensorsTensor* plain = weights.find(prefix + ".weight");
  QuantizedLinear q;
  q.prefix_ = prefix;
  q.out_ = out;
  q.in_ = in;
  if (quant.method == HfQuantMethod::kGptq || quant.method == HfQuantMethod::kAwq) {
    if (!weights.find(prefix + ".qweight")) return std::optional<QuantizedLinear>();
    if (plain) return err(dir, ": ", prefix, " has both .weight and .qweight");
    q.kind_ = quant.method == HfQuantMethod::kGptq ? Kind::kGptq : Kind::kAwq;
    DUET_TRY(q.find_int4(weights, quant, dir));
  } else if (quant.method == HfQuantMethod::kFp8) {
    if (!plain || !plain->fp8_e4m3) return std::optional<QuantizedLinear>();
    q.kind_ = Kind::kFp8;
    DUET_TRY(q.find_fp8(weights, quant, dir));
  } else {
    return std::optional<QuantizedLinear>();
  }
  q.choose_native();
  return std::optional<QuantizedLinear>(std::move(q));
}

Status QuantizedLinear::find_int4(const SafetensorsCheckpoint& w, const HfQuantization& quant,
                                  const std::string& dir) {
  const bool gptq = kind_ == Kind::kGptq;
  const std::string layout = std::string(gptq ? "GPTQ" : "AWQ") + ", 4 bits, group_size " +
                             (quant.group_size ? std::to_string(quant.group_size) : "-1");
  // Packed words hold 8 codes; GPTQ packs inputs, AWQ outputs, both pack zeros by output.
  if (out_ % 8 != 0 || (gptq && in_ % 8 != 0))
    return err(dir, ": ", prefix_, " is [", out_, ", ", in_, "], which ", layout, " cannot pack in words of 8");
  group_size_ = quant.group_size ? quant.group_size : in_;
  const int64_t groups = ceil_div(in_, group_size_);
  const std::vector<int64_t> qshape = gptq ? std::vector<int64_t>{in_ / 8, out_} : std::vector<int64_t>{in_, out_ / 8};
  DUET_ASSIGN(codes_, expect(w, dir, prefix_ + ".qweight", false, DType::I32, qshape, layout));
  DUET_ASSIGN(zeros_, expect(w, dir, prefix_ + ".qzeros", false, DType::I32, {groups, out_ / 8}, layout));
  DUET_ASSIGN(scales_, expect(w, dir, prefix_ + ".scales", true, DType::F32, {groups, out_}, layout));
  sources_ = {codes_->name, zeros_->name, scales_->name};
  zero_offset_ = gptq ? quant.zero_offset : 0;

  group_of_.resize(static_cast<size_t>(in_));
  for (int64_t i = 0; i < in_; ++i) group_of_[static_cast<size_t>(i)] = static_cast<int32_t>(i / group_size_);
  const SafetensorsTensor* g_idx = gptq ? w.find(prefix_ + ".g_idx") : nullptr;
  if (!g_idx) return {};
  DUET_TRY(expect(w, dir, g_idx->name, false, DType::I32, {in_}, layout));
  sources_.push_back(g_idx->name);
  for (int64_t i = 0; i < in_; ++i) {
    const int32_t g = load_i32(*g_idx, i);
    if (g < 0 || g >= groups)
      return err(dir, ": tensor ", g_idx->name, "[", i, "] = ", g, " is not a group (0..", groups - 1, ")");
    contiguous_ = contiguous_ && g == group_of_[static_cast<size_t>(i)];
    group_of_[static_cast<size_t>(i)] = g;
  }
  return {};
}

Status QuantizedLinear::find_fp8(const SafetensorsCheckpoint& w, const HfQuantization& quant,
                                 const std::string& dir) {
  codes_ = w.find(prefix_ + ".weight");
  if (codes_->shape != std::vector<int64_t>{out_, in_})
    return err(dir, ": tensor ", codes_->name, " has shape ", shape_text(codes_->shape),
               " but config.json implies ", shape_text({out_, in_}));
  scales_ = w.find(prefix_ + ".weight_scale_inv");  // despite the name, a multiplier
  if (!scales_) scales_ = w.find(prefix_ + ".weight_scale");
  if (!scales_) return err(dir, ": missing tensor ", prefix_, ".weight_scale_inv (or .weight_scale) for FP8 ", codes_->name);
  if (!is_float(*scales_)) return err(dir, ": tensor ", scales_->name, " is ", dtype_text(*scales_), ", not a float type");
  sources_ = {codes_->name, scales_->name};
  // A static activation scale: duet keeps activations in float (or its own
  // 8-bit blocks), so it is accounted for and not used.
  if (const SafetensorsTensor* in_scale = w.find(prefix_ + ".input_scale")) sources_.push_back(in_scale->name);

  const std::vector<int64_t>& s = scales_->shape;
  const int64_t n = scales_->elements();
  if (n == 1) {  // per tensor: [] or [1]
    scale_rows_ = out_, scale_cols_ = in_;
  } else if (s == std::vector<int64_t>{out_} || s == std::vector<int64_t>{out_, 1}) {  // per output row
    scale_rows_ = 1, scale_cols_ = in_;
  } else if (quant.block_rows > 0 &&
             s == std::vector<int64_t>{ceil_div(out_, quant.block_rows), ceil_div(in_, quant.block_cols)}) {
    scale_rows_ = quant.block_rows, scale_cols_ = quant.block_cols;
  } else {
    return err(dir, ": tensor ", scales_->name, " has shape ", shape_text(s), ", which is neither one scale, ",
               shape_text({out_, 1}), " per row, nor ",
               quant.block_rows > 0 ? shape_text({ceil_div(out_, quant.block_rows), ceil_div(in_, quant.block_cols)})
                                    : std::string("a block grid (config.json gives no block size)"),
               " for ", codes_->name, " ", shape_text({out_, in_}));
  }
  // NaN is the one E4M3 code that is no number; refuse it here rather than
  // let it poison every logit.
  for (size_t k = 0; k < codes_->nbytes; ++k)
    if ((codes_->data[k] & 0x7F) == 0x7F)
      return err(dir, ": tensor ", codes_->name, " holds NaN at element ", k);
  return {};
}

void QuantizedLinear::choose_native() {
  if (in_ % kQK32 != 0) {
    native_ = DType::F32;
    return;
  }
  if (kind_ == Kind::kFp8 || !contiguous_ || group_size_ % kQK32 != 0) {
    native_ = DType::Q8_0;
    return;
  }
  native_ = DType::Q4_0;
  const int64_t groups = zeros_->shape[0];
  for (int64_t g = 0; g < groups && native_ == DType::Q4_0; ++g)
    for (int64_t o = 0; o < out_; ++o)
      if (zero(g, o) != 8) {
        native_ = DType::Q4_1;
        break;
      }
}

int QuantizedLinear::code(int64_t i, int64_t o) const {
  if (kind_ == Kind::kGptq) return (load_i32(*codes_, (i / 8) * out_ + o) >> (4 * (i % 8))) & 0xF;
  return (load_i32(*codes_, i * (out_ / 8) + o / 8) >> (4 * kAwqNibble[o % 8])) & 0xF;
}

int QuantizedLinear::zero(int64_t g, int64_t o) const {
  const int shift = 4 * (kind_ == Kind::kGptq ? static_cast<int>(o % 8) : kAwqNibble[o % 8]);
  return ((load_i32(*zeros_, g * (out_ / 8) + o / 8) >> shift) & 0xF) + zero_offset_;
}

float QuantizedLinear::scale(int64_t g, int64_t o) const { return load_float(*scales_, g * out_ + o); }

// The f16 bits of a scale: copied when the checkpoint stores f16 (the usual
// case, and then Q4_0/Q4_1's d is exact), rounded otherwise.
uint16_t QuantizedLinear::scale_f16(int64_t g, int64_t o) const {
  if (scales_->dtype != DType::F16) return f32_to_f16(scale(g, o));
  uint16_t h;
  std::memcpy(&h, scales_->data + static_cast<size_t>(g * out_ + o) * 2, 2);
  return h;
}

void QuantizedLinear::dequantize_row(int64_t o, float* x) const {
  if (kind_ == Kind::kFp8) {
    const int64_t cols = ceil_div(in_, scale_cols_);
    const uint8_t* row = codes_->data + static_cast<size_t>(o * in_);
    for (int64_t i = 0; i < in_; ++i)
      x[i] = e4m3_to_f32(row[i]) * load_float(*scales_, (o / scale_rows_) * cols + i / scale_cols_);
    return;
  }
  for (int64_t i = 0; i < in_; ++i) {
    const int64_t g = group_of_[static_cast<size_t>(i)];
    // scale is an f16 or bf16 value and q - zero a 5-bit integer: the float product is exact.
    x[i] = scale(g, o) * static_cast<float>(code(i, o) - zero(g, o));
  }
}

void QuantizedLinear::write_q4_row(int64_t o, DType type, uint8_t* dst) const {
  uint8_t q[kQK32];
  for (int64_t b = 0; b < in_ / kQK32; ++b) {
    for (int j = 0; j < kQK32; ++j) q[j] = static_cast<uint8_t>(code(b * kQK32 + j, o));
    const int64_t g = b * kQK32 / group_size_;
    if (type == DType::Q4_0) {
      const BlockQ4_0 blk = pack_q4_0(q, scale_f16(g, o));
      std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
    } else {
      const uint16_t d = scale_f16(g, o);
      const float m = -f16_to_f32(d) * static_cast<float>(zero(g, o));  // exact in f32; rounded once to f16
      const BlockQ4_1 blk = pack_q4_1(q, d, f32_to_f16(m));
      std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
    }
  }
}

Status QuantizedLinear::write(DType type, const std::function<int64_t(int64_t)>& row_of, uint8_t* dst) const {
  DUET_ASSIGN(const size_t row, row_bytes(type, in_));
  const bool q4 = type == DType::Q4_0 || type == DType::Q4_1;
  if (q4 && type != native_)
    return err(prefix_, ": cannot write ", dtype_name(type), " (its codes go to ", dtype_name(native_), ")");
  if (!q4 && type != DType::Q8_0 && type != DType::F32 && type != DType::F16 && type != DType::BF16)
    return err(prefix_, ": cannot write ", dtype_name(type));
  std::vector<float> x(static_cast<size_t>(in_));
  for (int64_t r = 0; r < out_; ++r) {
    uint8_t* out = dst + static_cast<size_t>(r) * row;
    const int64_t o = row_of(r);
    if (q4) {
      write_q4_row(o, type, out);
      continue;
    }
    dequantize_row(o, x.data());
    if (type == DType::Q8_0) {
      for (int64_t b = 0; b < in_ / kQK32; ++b) {
        const BlockQ8_0 blk = quantize_q8_0(x.data() + b * kQK32);
        std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
      }
    } else if (type == DType::F32) {
      std::memcpy(out, x.data(), row);
    } else {
      auto* h = reinterpret_cast<uint16_t*>(out);
      for (int64_t i = 0; i < in_; ++i) h[i] = type == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
    }
  }
  return {};
}

}  // namespace duet
