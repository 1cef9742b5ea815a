#include "formats/hf_quant_config.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace duet {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The first of `keys` present and not null (AutoAWQ's own files say w_bit and
// q_group_size where transformers says bits and group_size).
const json* first_field(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    const auto it = j.find(k);
    if (it != j.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

Result<std::string> string_field(const json& j, const char* key, const std::string& where,
                                 const std::string& fallback) {
  const json* v = first_field(j, {key});
  if (!v) return fallback;
  if (!v->is_string()) return err(where, ": \"", key, "\" must be a string, not ", v->dump());
  return v->get<std::string>();
}

// bits (must be 4: duet's int4 layouts hold exactly these) and group_size
// (-1: one group per row, else a positive multiple of 8 so packed words
// never straddle groups).
Status read_int4(const json& q, const std::string& where, HfQuantization* out) {
  const json* bits = first_field(q, {"bits", "w_bit"});
  if (!bits || !bits->is_number_integer()) return err(where, ": needs an integer \"bits\"");
  // Compared as read: narrowed to int32 first, 2^32 + 4 would pass as 4.
  if (bits->get<int64_t>() != 4)
    return err(where, ": ", out->name, " with bits ", bits->dump(), " is not supported (4 only)");
  out->bits = 4;
  const json* group = first_field(q, {"group_size", "q_group_size"});
  if (!group || !group->is_number_integer()) return err(where, ": needs an integer \"group_size\"");
  const int64_t g = group->get<int64_t>();
  if (g != -1 && (g <= 0 || g % 8 != 0 || g > (1 << 20)))
    return err(where, ": group_size ", g, " is not supported (-1 or a positive multiple of 8)");
  out->group_size = g == -1 ? 0 : static_cast<int32_t>(g);
  return {};
}

Status read_gptq(const json& q, const std::string& where, HfQuantization* out) {
  DUET_TRY(read_int4(q, where, out));
  if (const json* d = first_field(q, {"desc_act"})) {
    if (!d->is_boolean()) return err(where, ": \"desc_act\" must be true or false");
    out->desc_act = d->get<bool>();
  }
  // AutoGPTQ's format ("gptq", the default) subtracts 1 from each zero
  // before packing; GPTQModel's "gptq_v2" stores the zero itself.
  DUET_ASSIGN(const std::string format, string_field(q, "checkpoint_format", where, "gptq"));
  if (format == "gptq") out->zero_offset = 1;
  else if (format == "gptq_v2") out->zero_offset = 0;
  else return err(where, ": GPTQ checkpoint_format '", format, "' is not supported (gptq, gptq_v2)");
  return {};
}

Status read_awq(const json& q, const std::string& where, HfQuantization* out) {
  DUET_TRY(read_int4(q, where, out));
  DUET_ASSIGN(const std::string version, string_field(q, "version", where, "gemm"));
  if (lower(version) != "gemm")
    return err(where, ": AWQ version '", version, "' is not supported (GEMM only)");
  if (const json* z = first_field(q, {"zero_point"}); z && *z == false)
    return err(where, ": AWQ without zero points is not supported");
  return {};
}

Status read_block(const json& v, const std::string& where, HfQuantization* out) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
      v[0].get<int64_t>() <= 0 || v[1].get<int64_t>() <= 0)
    return err(where, ": an FP8 block size must be two positive integers, not ", v.dump());
  out->block_rows = v[0].get<int64_t>();
  out->block_cols = v[1].get<int64_t>();
  return {};
}

// transformers' FineGrainedFP8Config and the DeepSeek/Qwen FP8 releases.
Status read_fp8(const json& q, const std::string& where, HfQuantization* out) {
  DUET_ASSIGN(const std::string fmt, string_field(q, "fmt", where, "e4m3"));
  if (fmt != "e4m3") return err(where, ": FP8 format '", fmt, "' is not supported (e4m3)");
  if (const json* b = first_field(q, {"weight_block_size"})) DUET_TRY(read_block(*b, where, out));
  return {};
}

// compressed-tensors: only its float-quantized format with 8-bit float
// weights is FP8; every config group must say so.
Status read_compressed_tensors(const json& q, const std::string& where, HfQuantization* out) {
  DUET_ASSIGN(const std::string format, string_field(q, "format", where, ""));
  if (format != "float-quantized")
    return err(where, ": compressed-tensors format '", format, "' is not supported (float-quantized FP8 only)");
  const json* groups = first_field(q, {"config_groups"});
  if (!groups || !groups->is_object() || groups->empty())
    return err(where, ": compressed-tensors needs a config_groups object");
  for (const auto& [name, group] : groups->items()) {
    const json* w = group.is_object() ? first_field(group, {"weights"}) : nullptr;
    const json* bits = w && w->is_object() ? first_field(*w, {"num_bits"}) : nullptr;
    if (!bits || !bits->is_number_integer() || bits->get<int64_t>() != 8)
      return err(where, ": config group '", name, "' does not quantize weights to 8-bit floats");
    DUET_ASSIGN(const std::string type, string_field(*w, "type", where, ""));
    if (type != "float")
      return err(where, ": config group '", name, "' does not quantize weights to 8-bit floats");
    DUET_ASSIGN(const std::string strategy, string_field(*w, "strategy", where, ""));
    if (strategy == "block") {
      const json* b = first_field(*w, {"block_structure"});
      if (!b) return err(where, ": config group '", name, "' has strategy block but no block_structure");
      DUET_TRY(read_block(*b, where, out));
    } else if (strategy != "tensor" && strategy != "channel") {
      return err(where, ": config group '", name, "' has weight strategy '", strategy,
                 "' (supported: tensor, channel, block)");
    }
  }
  return {};
}

}  // namespace

Result<HfQuantization> parse_hf_quantization(const json& q, const std::string& src) {
  const std::string where = src + ": quantization_config";
  if (!q.is_object()) return err(where, " must be an object");
  HfQuantization out;
  DUET_ASSIGN(out.name, string_field(q, "quant_method", where, ""));
  if (out.name == "gptq") {
    out.method = HfQuantMethod::kGptq;
    DUET_TRY(read_gptq(q, where, &out));
  } else if (out.name == "awq") {
    out.method = HfQuantMethod::kAwq;
    DUET_TRY(read_awq(q, where, &out));
  } else if (out.name == "fp8") {
    out.method = HfQuantMethod::kFp8;
    DUET_TRY(read_fp8(q, where, &out));
  } else if (out.name == "compressed-tensors") {
    out.method = HfQuantMethod::kFp8;
    DUET_TRY(read_compressed_tensors(q, where, &out));
  } else {
    return err(where, ": quant_method '", out.name,
               "' is not supported (gptq, awq, fp8, compressed-tensors with FP8 weights)");
  }
  return out;
}

}  // namespace duet
