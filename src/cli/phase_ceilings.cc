#include "cli/phase_ceilings.h"

#include <vector>

#include "formats/type_mix.h"
#include "kernels/packed_gemm.h"
#include "kv/kv_cache.h"

namespace duet::cli {

DType main_dtype(const Model& m) {
  for (const char* name : {"blk.0.ffn_gate.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_gate.0.weight"})
    if (const TensorView* t = m.file().tensor(name)) return t->dtype;
  const std::vector<TypeShare> mix = type_mix(m.file().tensors());
  return mix.empty() ? DType::F32 : mix.front().type;
}

double prefill_ceiling(const Roofline& r, DType weights) {
  // BF16 prefill runs vdpbf16ps where it can (kernels/packed_gemm.h): its
  // peak, twice the fma's, is the one to beat.
  if (weights == DType::BF16 && r.bf16_gflop_s > 0 && bf16_dot_enabled()) return r.bf16_gflop_s;
  const bool is_float = weights == DType::F32 || weights == DType::F16 || weights == DType::BF16;
  return is_float ? r.fma_gflop_s : r.int8_gop_s;
}

server::RooflineBasis measure_serve_roofline(const Model& m, Engine& engine, size_t probe_mib) {
  const Roofline r = measure_roofline(engine.threads(), probe_mib << 20, /*reps=*/1);
  server::RooflineBasis b;
  b.read_gb_s = r.read_gb_s;
  b.compute_gop_s = prefill_ceiling(r, main_dtype(m));
  b.weight_bytes = static_cast<double>(m.weight_bytes_per_pass());
  b.kv_bytes_per_pos = static_cast<double>(engine.cache().bytes_per_token());
  b.flops_per_token = m.layer_flops_per_token();
  b.head_flops = m.head_flops();
  return b;
}

}  // namespace duet::cli
