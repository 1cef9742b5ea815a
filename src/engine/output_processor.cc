#include "engine/output_processor.h"

#include "engine/logprobs.h"

namespace duet {

namespace {

void record_time(Sequence* seq, EngineMetrics& metrics) {
  const double t = seq->seconds_since_submit();
  if (seq->timings.first_token < 0) {
    seq->timings.first_token = t;
    metrics.ttft.observe(t);
  } else {
    metrics.itl.observe(t - seq->timings.token_times.back());
  }
  seq->timings.token_times.push_back(t);
  ++seq->timings.n_generated;
  ++metrics.generated_tokens;
}

}  // namespace

TokenOutcome OutputProcessor::process(Sequence* seq, int32_t token, const float* raw_logits,
                                      EngineMetrics& metrics) const {
  record_time(seq, metrics);
  TokenOutcome out;
  TokenEvent& ev = out.event;
  ev.request_id = seq->request_id;
  ev.choice = seq->choice;
  ev.token = token;
  ev.timings = &seq->timings;
  if (raw_logits) {
    const float lse = log_sum_exp(raw_logits, n_vocab_);
    ev.logprob = raw_logits[token] - lse;
    ev.top_logprobs = top_logprobs(raw_logits, n_vocab_, seq->params.logprobs, lse);
  }

  const bool eos = !seq->params.ignore_eos && tokenizer_.is_end_of_generation(token);
  if (!eos) {
    StopText::Piece piece = seq->text->push(token);
    ev.text = std::move(piece.text);
    seq->stop_matched = piece.stopped;
  }
  // The limits count the tokens reported so far, not accepted drafts after.
  const int32_t n_reported = seq->n_prompt + seq->timings.n_generated;
  // A complete grammar that nothing more can follow ends the output too.
  const bool grammar_done = seq->grammar_end >= 0 && n_reported >= seq->grammar_end;
  if (eos || seq->stop_matched || grammar_done)
    out.finish = FinishReason::kStop;
  else if (seq->timings.n_generated >= seq->params.max_tokens)
    out.finish = FinishReason::kLength;
  else if (ctx_limited_ && n_reported >= ctx_)
    out.finish = FinishReason::kContext;
  return out;
}

TokenEvent OutputProcessor::finish_event(Sequence* seq, FinishReason reason, const std::string& error) const {
  TokenEvent ev;
  ev.request_id = seq->request_id;
  ev.choice = seq->choice;
  // A stop string already ended the text; any other end releases what was held.
  if (reason != FinishReason::kStop || !seq->stop_matched) ev.text = seq->text->finish().text;
  ev.finished = true;
  ev.reason = reason;
  ev.error = error;
  ev.timings = &seq->timings;
  return ev;
}

}  // namespace duet
