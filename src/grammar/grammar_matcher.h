// Where a sequence stands in a grammar: the set of stacks (a pushdown
// automaton's possible configurations) after the bytes accepted so far.
//
// A stack is its top — the position of the next byte set to match — and a
// return frame: a shared, interned linked list of positions to resume at
// when the current rule ends. Identical stacks get identical ids, so a
// state that repeats (inside a string, between list items) has the same
// key and its token mask can be cached.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace duet {

// One stack: top position in Grammar::elements() and return frame id.
// Packed (pos << 32 | frame) so a state sorts and hashes as integers.
using GrammarStack = uint64_t;
constexpr uint32_t stack_pos(GrammarStack s) { return static_cast<uint32_t>(s >> 32); }
constexpr uint32_t stack_frame(GrammarStack s) { return static_cast<uint32_t>(s); }
constexpr GrammarStack make_stack(uint32_t pos, uint32_t frame) { return (uint64_t{pos} << 32) | frame; }

// The stack of a grammar that has matched a complete root.
constexpr uint32_t kDonePos = UINT32_MAX;
constexpr GrammarStack kDoneStack = make_stack(kDonePos, 0);

// Sorted, unique stacks.
using GrammarState = std::vector<GrammarStack>;

struct GrammarStateHash {
  size_t operator()(const GrammarState& s) const;
};

class MaskCache;

// Return frames, shared by a matcher and its clones (not thread-safe: one
// sequence's matchers live on one thread). Frame 0 is the empty stack.
class FrameArena {
 public:
  FrameArena();
  ~FrameArena();
  struct Frame {
    uint32_t pos;     // where to resume in elements
    uint32_t parent;  // the frame below
  };
  const Frame& operator[](uint32_t id) const { return frames_[id]; }
  // The interned frame (pos, parent).
  uint32_t intern(uint32_t pos, uint32_t parent);
  // A frame that lives only until truncate() (token-mask walks); the same
  // (pos, parent) gives the same id until then, so the walk's states can
  // be compared and its steps remembered.
  uint32_t push_scratch(uint32_t pos, uint32_t parent);
  size_t size() const { return frames_.size(); }
  void truncate(size_t n);
  MaskCache& mask_cache() { return *cache_; }

 private:
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, uint32_t> index_;
  std::unordered_map<uint64_t, uint32_t> scratch_index_;
  std::unique_ptr<MaskCache> cache_;
};

// Expands and advances stacks. Shared by the matcher and the mask walk.
class StackStepper {
 public:
  StackStepper(const Grammar& g, FrameArena& arena) : g_(g), arena_(arena) {}
  // Adds to `out` every stack reached from "about to match elements[pos]
  // with return frame `frame`" whose top is a byte set (or kDoneStack).
  void expand(uint32_t pos, uint32_t frame, bool scratch, GrammarState& out);
  // The stacks after `byte` from `in` (sorted, unique); empty if none match.
  void advance(const GrammarState& in, uint8_t byte, bool scratch, GrammarState& out);

 private:
  const Grammar& g_;
  FrameArena& arena_;
  std::vector<std::pair<uint32_t, uint32_t>> work_, entered_;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Accepts all of `bytes` or, if any byte cannot follow, none of them.
  bool accept_bytes(std::string_view bytes);
  // The bytes so far form a complete root.
  bool can_end() const;
  // Complete, and no byte can follow: generation should stop.
  bool is_complete() const { return state_.size() == 1 && state_[0] == kDoneStack; }

  // Copies share the frame arena (and mask cache); snapshots are states.
  const GrammarState& state() const { return state_; }
  void restore(GrammarState s) { state_ = std::move(s); }

  const Grammar& grammar() const { return *grammar_; }
  FrameArena& arena() const { return *arena_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<FrameArena> arena_;
  GrammarState state_;
  GrammarState scratch_;
};

}  // namespace duet
