#include "grammar/grammar_matcher.h"

#include <algorithm>

#include "grammar/token_mask.h"

namespace duet {

size_t GrammarStateHash::operator()(const GrammarState& s) const {
  uint64_t h = 1469598103934665603ull;
  for (GrammarStack x : s) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

FrameArena::FrameArena() : cache_(std::make_unique<MaskCache>()) { frames_.push_back({kDonePos, 0}); }
FrameArena::~FrameArena() = default;

uint32_t FrameArena::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, fresh] = index_.emplace(key, static_cast<uint32_t>(frames_.size()));
  if (fresh) frames_.push_back({pos, parent});
  return it->second;
}

uint32_t FrameArena::push_scratch(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  auto [it, fresh] = scratch_index_.emplace(key, static_cast<uint32_t>(frames_.size()));
  if (fresh) frames_.push_back({pos, parent});
  return it->second;
}

void FrameArena::truncate(size_t n) {
  frames_.resize(n);
  scratch_index_.clear();
}

namespace {
// Bounds on one step's work. Nested repetitions (("-"+)+)+... are ambiguous:
// the ways to split a run of "-" among the levels multiply, and the stack
// set with them. Past these bounds what lies beyond is not offered (the
// grammar is narrowed, never widened; with nothing left the sequence ends as
// when no token can continue) instead of the step running for minutes.
constexpr size_t kMaxRuleEntries = 1 << 12;
constexpr size_t kMaxStacks = 1 << 12;
}  // namespace

void StackStepper::expand(uint32_t pos, uint32_t frame, bool scratch, GrammarState& out) {
  const auto& els = g_.elements();
  work_.clear();
  entered_.clear();
  work_.push_back({pos, frame});
  while (!work_.empty()) {
    auto [p, f] = work_.back();
    work_.pop_back();
    while (true) {
      const GrammarElement e = els[p];
      if (e.kind == GrammarElement::kBytes) {
        out.push_back(make_stack(p, f));
        break;
      }
      if (e.kind == GrammarElement::kEnd) {
        if (f == 0) {
          out.push_back(kDoneStack);
          break;
        }
        const FrameArena::Frame& up = arena_[f];
        p = up.pos;
        f = up.parent;
        continue;
      }
      // A rule: enter each alternative once per (position, frame).
      const std::pair<uint32_t, uint32_t> key{p, f};
      if (std::find(entered_.begin(), entered_.end(), key) != entered_.end()) break;
      if (entered_.size() >= kMaxRuleEntries) break;
      entered_.push_back(key);
      // A rule in tail position returns straight to our frame, so
      // right recursion (x*, lists) keeps the stack flat.
      uint32_t ret = f;
      if (els[p + 1].kind != GrammarElement::kEnd)
        ret = scratch ? arena_.push_scratch(p + 1, f) : arena_.intern(p + 1, f);
      for (uint32_t a : g_.rules()[e.arg].alts) work_.push_back({a, ret});
      break;
    }
  }
}

void StackStepper::advance(const GrammarState& in, uint8_t byte, bool scratch, GrammarState& out) {
  out.clear();
  const auto& els = g_.elements();
  const auto& sets = g_.byte_sets();
  for (GrammarStack s : in) {
    const uint32_t p = stack_pos(s);
    if (p == kDonePos || !sets[els[p].arg].has(byte)) continue;
    // Inside a literal or a multi-byte character the next element is
    // another byte set: no expansion needed (the mask walk's common case).
    if (els[p + 1].kind == GrammarElement::kBytes)
      out.push_back(make_stack(p + 1, stack_frame(s)));
    else
      expand(p + 1, stack_frame(s), scratch, out);
    if (out.size() > kMaxStacks) {
      out.clear();
      return;
    }
  }
  if (out.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), arena_(std::make_shared<FrameArena>()) {
  StackStepper step(*grammar_, *arena_);
  for (uint32_t a : grammar_->rules()[grammar_->root()].alts) step.expand(a, 0, false, state_);
  std::sort(state_.begin(), state_.end());
  state_.erase(std::unique(state_.begin(), state_.end()), state_.end());
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  StackStepper step(*grammar_, *arena_);
  GrammarState cur = state_;
  for (char c : bytes) {
    step.advance(cur, static_cast<uint8_t>(c), false, scratch_);
    if (scratch_.empty()) return false;
    cur.swap(scratch_);
  }
  state_ = std::move(cur);
  return true;
}

bool GrammarMatcher::can_end() const {
  return !state_.empty() && state_.back() == kDoneStack;
}

}  // namespace duet
