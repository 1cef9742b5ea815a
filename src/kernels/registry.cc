#include "kernels/registry.h"

#include "kernels/float_kernels.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_mix_kernels.h"

namespace duet {
namespace {

using enum CpuLevel;

// Operation names, by KernelImpl alternative.
constexpr std::string_view kOpNames[] = {"dot",    "packed_gemm", "kv_rows", "attend_rows", "attend_part",
                                         "exp",    "swiglu",      "geglu",   "probes"};
static_assert(std::size(kOpNames) == std::variant_size_v<KernelImpl>);

constexpr size_t kKvRowsOp = 2;

// Every kernel, by operation, then type, then level.
std::vector<KernelEntry> make_table() {
  return {
      {&kFloatScalar.f32, DType::F32, kScalar, "scalar loop"},
      {&kFloatScalar.f16, DType::F16, kScalar, "scalar loop"},
      {&kFloatScalar.bf16, DType::BF16, kScalar, "scalar loop"},
      {&kFloatAvx2.f32, DType::F32, kAvx2, "avx2 fma, 4 rows x 2 tokens"},
      {&kFloatAvx2.f16, DType::F16, kAvx2, "avx2 fma, 4 rows x 2 tokens"},
      {&kFloatAvx2.bf16, DType::BF16, kAvx2, "avx2 fma, 4 rows x 2 tokens"},
      {&kFloatAvx512.f32, DType::F32, kAvx512, "avx512 fma, 4 rows x 4 tokens"},
      {&kFloatAvx512.f16, DType::F16, kAvx512, "avx512 fma, 4 rows x 4 tokens"},
      {&kFloatAvx512.bf16, DType::BF16, kAvx512, "avx512 fma, 4 rows x 4 tokens"},

      {&kQuantScalar.q8_0, DType::Q8_0, kScalar, "scalar, q8_0 activations"},
      {&kQuantScalar.q4_0, DType::Q4_0, kScalar, "scalar, q8_0 activations"},
      {&kQuantScalar.q4_1, DType::Q4_1, kScalar, "scalar, q8_1 activations"},
      {&kQuantScalar.q4_K, DType::Q4_K, kScalar, "scalar, q8_K activations"},
      {&kQuantScalar.q5_K, DType::Q5_K, kScalar, "scalar, q8_K activations"},
      {&kQuantScalar.q6_K, DType::Q6_K, kScalar, "scalar, q8_K activations"},
      {&kQuantAvx2.q8_0, DType::Q8_0, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_0 activations"},
      {&kQuantAvx2.q4_0, DType::Q4_0, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_0 activations"},
      {&kQuantAvx2.q4_1, DType::Q4_1, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_1 activations"},
      {&kQuantAvx2.q4_K, DType::Q4_K, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kQuantAvx2.q5_K, DType::Q5_K, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kQuantAvx2.q6_K, DType::Q6_K, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kQuantAvx512.q8_0, DType::Q8_0, kAvx512, "avx512 vnni, 4 rows x 4 tokens, avx2 q8_0 activations"},
      {&kQuantAvx512.q4_0, DType::Q4_0, kAvx512, "avx512 vnni, 4 rows x 4 tokens, avx2 q8_0 activations"},
      {&kQuantAvx512.q4_1, DType::Q4_1, kAvx512, "avx512 vnni, avx2 q8_1 activations"},
      {&kQuantAvx512.q4_K, DType::Q4_K, kAvx512, "avx512 vnni, avx2 q8_K activations"},
      {&kQuantAvx512.q5_K, DType::Q5_K, kAvx512, "avx512 vnni, avx2 q8_K activations"},
      {&kQuantAvx512.q6_K, DType::Q6_K, kAvx512, "avx512 vnni, avx2 q8_K activations"},

      {&kMixScalar.q5_0, DType::Q5_0, kScalar, "scalar, q8_0 activations"},
      {&kMixScalar.q5_1, DType::Q5_1, kScalar, "scalar, q8_1 activations"},
      {&kMixScalar.iq4_nl, DType::IQ4_NL, kScalar, "scalar, q8_0 activations"},
      {&kMixScalar.q2_K, DType::Q2_K, kScalar, "scalar, q8_K activations"},
      {&kMixScalar.q3_K, DType::Q3_K, kScalar, "scalar, q8_K activations"},
      {&kMixScalar.iq4_xs, DType::IQ4_XS, kScalar, "scalar, q8_K activations"},
      {&kMixScalar.tq1_0, DType::TQ1_0, kScalar, "scalar, q8_K activations"},
      {&kMixScalar.tq2_0, DType::TQ2_0, kScalar, "scalar, q8_K activations"},
      {&kMixScalar.iq3_s, DType::IQ3_S, kScalar, "scalar, q8_K activations"},
      {&kMixAvx2.q5_0, DType::Q5_0, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_0 activations"},
      {&kMixAvx2.q5_1, DType::Q5_1, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_1 activations"},
      {&kMixAvx2.iq4_nl, DType::IQ4_NL, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_0 activations"},
      {&kMixAvx2.q2_K, DType::Q2_K, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kMixAvx2.q3_K, DType::Q3_K, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kMixAvx2.iq4_xs, DType::IQ4_XS, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kMixAvx2.tq1_0, DType::TQ1_0, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kMixAvx2.tq2_0, DType::TQ2_0, kAvx2, "avx2 maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kMixAvx2.iq3_s, DType::IQ3_S, kAvx2, "avx2 grid gather + maddubs, 1 row x 4 tokens, q8_K activations"},
      {&kMixAvx512.q5_0, DType::Q5_0, kAvx512, "avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_0 activations"},
      {&kMixAvx512.q5_1, DType::Q5_1, kAvx512, "avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_1 activations"},
      {&kMixAvx512.iq4_nl, DType::IQ4_NL, kAvx512, "avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_0 activations"},
      {&kMixAvx512.q2_K, DType::Q2_K, kAvx512, "avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_K activations"},
      {&kMixAvx512.q3_K, DType::Q3_K, kAvx512, "avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_K activations"},
      {&kMixAvx512.iq4_xs, DType::IQ4_XS, kAvx512, "avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_K activations"},
      {&kMixAvx512.tq1_0, DType::TQ1_0, kAvx512, "avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_K activations"},
      {&kMixAvx512.tq2_0, DType::TQ2_0, kAvx512, "avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_K activations"},
      {&kMixAvx512.iq3_s, DType::IQ3_S, kAvx512, "avx2 grid gather + avx512vl vnni 256-bit, 1 row x 4 tokens, avx2 q8_K activations"},

      {&kPackedAvx2.q8_0, DType::Q8_0, kAvx2, "avx2 maddubs (sign trick), 16-row groups, 8 rows x 4 tokens"},
      {&kPackedAvx2.q4_0, DType::Q4_0, kAvx2, "avx2 maddubs, 16-row groups, 8 rows x 4 tokens"},
      {&kPackedAvx2.q4_K, DType::Q4_K, kAvx2, "avx2 maddubs, 16-row groups, 8 rows x 4 tokens"},
      {&kPackedAvx2.iq4_nl, DType::IQ4_NL, kAvx2, "avx2 maddubs (sign trick), 16-row groups, vpshufb levels"},
      {&kPackedAvx2.q5_0, DType::Q5_0, kAvx2, "avx2 maddubs, 16-row groups, fifth bits by compare"},
      {&kPackedAvx2.q5_1, DType::Q5_1, kAvx2, "avx2 maddubs, 16-row groups, fifth bits by compare"},
      {&kPackedAvx2.iq4_xs, DType::IQ4_XS, kAvx2, "avx2 maddubs (sign trick), 16-row groups, vpshufb levels"},
      {&kPackedAvx2.q2_K, DType::Q2_K, kAvx2, "avx2 maddubs + vpmaddwd scales, 16-row groups"},
      {&kPackedAvx2.q3_K, DType::Q3_K, kAvx2, "avx2 maddubs + vpmaddwd scales, 16-row groups"},
      {&kPackedAvx2.f32, DType::F32, kAvx2, "avx2 fma, 16-row groups, 8 rows x 6 tokens"},
      {&kPackedAvx2.f16, DType::F16, kAvx2, "avx2 fma, 16-row groups, 8 rows x 6 tokens"},
      {&kPackedAvx2.bf16, DType::BF16, kAvx2, "avx2 fma, 16-row groups, 8 rows x 6 tokens"},
      {&kPackedAvx512.q8_0, DType::Q8_0, kAvx512, "avx512 vnni, 16-row groups"},
      {&kPackedAvx512.q4_0, DType::Q4_0, kAvx512, "avx512 vnni, 16-row groups"},
      {&kPackedAvx512.q4_K, DType::Q4_K, kAvx512, "avx512 vnni, 16-row groups"},
      {&kPackedAvx512.iq4_nl, DType::IQ4_NL, kAvx512, "avx512 vnni, 16-row groups, vpshufb levels"},
      {&kPackedAvx512.q5_0, DType::Q5_0, kAvx512, "avx512 vnni, 16-row groups, fifth bits by mask"},
      {&kPackedAvx512.q5_1, DType::Q5_1, kAvx512, "avx512 vnni, 16-row groups, fifth bits by mask"},
      {&kPackedAvx512.iq4_xs, DType::IQ4_XS, kAvx512, "avx512 vnni, 16-row groups, vpshufb levels"},
      {&kPackedAvx512.q2_K, DType::Q2_K, kAvx512, "avx512 vnni + vpdpwssd scales, 16-row groups"},
      {&kPackedAvx512.q3_K, DType::Q3_K, kAvx512, "avx512 vnni + vpdpwssd scales, 16-row groups"},
      {&kPackedAvx512.f32, DType::F32, kAvx512, "avx512 fma, 16-row groups"},
      {&kPackedAvx512.f16, DType::F16, kAvx512, "avx512 fma, 16-row groups"},
      bf16_dot_enabled()
          ? KernelEntry{&kPackedAvx512Bf16Dot, DType::BF16, kAvx512,
                        "avx512 fma, 16-row groups; over 12 tokens and k <= 4096 avx512_bf16 vdpbf16ps, 16 rows x 16 tokens "
                        "(DUET_BF16_DOT=1: on)"}
          : KernelEntry{&kPackedAvx512.bf16, DType::BF16, kAvx512,
                        "avx512 fma, 16-row groups (vdpbf16ps off: DUET_BF16_DOT=1 and avx512_bf16 turn it on)"},

      {&kKvScalar.f32, KvType::F32, kScalar, "scalar loop"},
      {&kKvScalar.f16, KvType::F16, kScalar, "scalar loop"},
      {&kKvScalar.q8, KvType::Q8, kScalar, "scalar loop"},
      {&kKvScalar.q4, KvType::Q4, kScalar, "scalar loop"},
      {&kKvAvx2.f16, KvType::F16, kAvx2, "avx2 fma, 8 lanes"},
      {&kKvAvx2.q8, KvType::Q8, kAvx2, "avx2 fma, 8 lanes"},
      {&kKvAvx2.q4, KvType::Q4, kAvx2, "avx2 fma, 8 lanes"},

      {&attend_rows_avx2, kAvx2, "avx2, any cache type (widened), up to 8 rows"},
      {&attend_rows_avx512, kAvx512, "avx512, f32 or f16 cache, up to 8 rows"},
      {&attend_part_avx2, kAvx2, "avx2, one decode row, every head of a block in turn"},
      {&attend_part_avx512, kAvx512, "avx512, one decode row, every head of a block in turn"},
      {&exp_shifted_scalar, kScalar, "scalar std::exp"},
      {&exp_shifted_avx2, kAvx2, "avx2 vector exp"},
      {&exp_shifted_avx512, kAvx512, "avx512 vector exp"},
      {&swiglu_scalar, kScalar, "scalar std::exp"},
      {&swiglu_avx2, kAvx2, "avx2 vector exp"},
      {&swiglu_avx512, kAvx512, "avx512 vector exp"},
      {GegluFn{&geglu_tanh_scalar}, kScalar, "scalar std::tanh"},
      {GegluFn{&geglu_tanh_avx2}, kAvx2, "avx2 vector exp, as sigmoid(2u)"},
      {GegluFn{&geglu_tanh_avx512}, kAvx512, "avx512 vector exp, as sigmoid(2u)"},
      {&kProbesScalar, kScalar, "scalar"},
      {&kProbesAvx2, kAvx2, "avx2"},
      {&kProbesAvx512, kAvx512, "avx512 vnni"},
  };
}

}  // namespace

std::span<const KernelEntry> kernel_table() {
  // Built on first use, after every kernel file's constants exist.
  static const std::vector<KernelEntry> table = make_table();
  return table;
}

std::string_view kernel_op_name(const KernelEntry& e) { return kOpNames[e.impl.index()]; }

std::string_view kernel_type_name(const KernelEntry& e) {
  if (e.impl.index() == kKvRowsOp) return kv_type_name(static_cast<KvType>(e.type));
  if (e.impl.index() > kKvRowsOp) return {};
  return dtype_name(static_cast<DType>(e.type));
}

KernelSet::KernelSet(CpuLevel level) : level_(level) {
  for (const KernelEntry& e : kernel_table()) {
    if (e.level > level) continue;
    const KernelEntry*& slot = slots_[e.impl.index()][e.type];
    if (!slot || slot->level < e.level) slot = &e;
  }
}

std::vector<const KernelEntry*> KernelSet::chosen() const {
  std::vector<const KernelEntry*> out;
  for (const KernelEntry& e : kernel_table())
    if (slots_[e.impl.index()][e.type] == &e) out.push_back(&e);
  return out;
}

const KernelSet& kernels_at(CpuLevel level) {
  static const KernelSet sets[] = {KernelSet(kScalar), KernelSet(kAvx2), KernelSet(kAvx512)};
  return sets[static_cast<int>(level)];
}

const KernelSet& kernels() {
  static const KernelSet& active = kernels_at(active_cpu_level());
  return active;
}

const TypeKernels* type_kernels(DType t) { return kernels().type(t); }

}  // namespace duet
