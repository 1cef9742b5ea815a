// duet quantize IN.gguf OUT.gguf TYPE: rewrites a model with its matrices in
// TYPE under the per-tensor policy of quantize/policy.h, optionally weighting
// the quantization error by activations measured on calibration text.
#include <algorithm>
#include <cstdio>

#include "cli/command.h"
#include "cli/progress.h"
#include "cli/common.h"
#include "quantize/quantize_gguf.h"
#include "quantize/calibration.h"

namespace duet::cli {
namespace {

struct QuantizeArgs {
  std::string in;
  std::string out;
  std::string type;
  std::vector<std::string> keep;
  std::string calibrate;
  int32_t calibrate_ctx = 512;
  int32_t threads = 0;
};

// What `type` may be (quantize/policy.h's is_quantize_target), for the help
// and the error.
constexpr const char* kTargetTypes =
    "q8_0 q6_k q5_k q5_1 q5_0 q4_k q4_1 q4_0 iq4_nl iq4_xs q3_k q2_k tq2_0 tq1_0 f16 bf16 f32";

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

Result<ChannelImportance> calibrate(const QuantizeArgs& a, ThreadPool& pool) {
  DUET_ASSIGN(std::unique_ptr<Model> model, Model::load(a.in));
  DUET_ASSIGN(std::string text, read_text(a.calibrate));
  const std::vector<int32_t> ids =
      model->tokenizer().encode(text, model->tokenizer().add_bos_default());
  int32_t ctx = a.calibrate_ctx;
  if (model->config().ctx_len > 0) ctx = std::min(ctx, model->config().ctx_len);
  std::fprintf(stderr, "calibrating on %zu tokens of %s (windows of %d)\n", ids.size(),
               a.calibrate.c_str(), ctx);
  return collect_channel_importance(*model, ids, ctx, pool);
}

int run(const QuantizeArgs& a) {
  auto target = parse_dtype(a.type);
  if (!target) return fail(target.error());
  if (!is_quantize_target(*target))
    return fail(err("cannot quantize to ", a.type, "; types: ", kTargetTypes));
  ThreadPool pool(a.threads);
  QuantizeOptions o;
  o.target = *target;
  o.keep = a.keep;
  ChannelImportance importance;
  if (!a.calibrate.empty()) {
    auto stats = calibrate(a, pool);
    if (!stats) return fail(stats.error());
    importance = std::move(*stats);
    o.importance = &importance;
  }
  auto in = GgufFile::open(a.in);
  if (!in) return fail(in.error());
  uint64_t total = 0;
  for (const TensorView& t : in->tensors()) total += t.nbytes;
  Result<QuantizeSummary> sum = err("not run");
  {
    ProgressBar bar("quantize", mib(total), "MiB");
    sum = quantize_gguf(*in, a.out, o, pool, [&](const QuantizeProgress& p) { bar.update(mib(p.bytes_in)); });
  }
  if (!sum) return fail(sum.error());
  std::fprintf(stderr, "wrote %s: %zu tensors, tensor data %.2f MiB -> %.2f MiB (%.2f -> %.2f bits per weight)\n",
               a.out.c_str(), in->tensors().size(), mib(sum->bytes_in), mib(sum->bytes_out),
               sum->bits_per_weight_in(), sum->bits_per_weight_out());
  std::string types;
  for (const auto& [t, count] : sum->tensors_by_type)
    types += " " + std::string(dtype_name(t)) + ": " + std::to_string(count);
  std::fprintf(stderr, "tensors by type:%s\n", types.c_str());
  return 0;
}

const bool quantize_registered = register_command(
    "quantize", "Rewrite a GGUF model with its matrices in a quantized type",
    [](CLI::App& app) {
      auto a = std::make_shared<QuantizeArgs>();
      app.add_option("input", a->in, "Input GGUF")->required();
      app.add_option("output", a->out, "Output GGUF")->required();
      app.add_option("type", a->type, std::string("One of: ") + kTargetTypes)
          ->required();
      app.add_option("--keep", a->keep,
                     "Copy tensors whose name matches unchanged (glob on the whole name, or a "
                     "regex searched in it; repeatable)");
      app.add_option("--calibrate", a->calibrate,
                     "Text whose activations weight the quantization error per input channel");
      app.add_option("--calibrate-ctx", a->calibrate_ctx, "Tokens per calibration window")
          ->capture_default_str();
      add_threads_option(app, a->threads);
      return [a] { return run(*a); };
    });

}  // namespace
}  // namespace duet::cli
