// How many large request bodies are prepared at once. Preparing a body —
// parsing its JSON, rendering the chat template, tokenizing the prompt —
// takes a core and tens of bytes of transient memory per byte of body (the
// tokenizer's symbols and merge queue): 48 clients sending 1 MiB to
// /tokenize at once took 1.8 GB. Running more preparations than there are
// cores finishes none sooner, so a body past kLargeBody waits for one of n
// slots; small bodies pass straight through.
#pragma once

#include <cstddef>
#include <semaphore>

namespace duet::server {

class PrepGate {
 public:
  static constexpr size_t kLargeBody = 256 << 10;

  explicit PrepGate(int n) : slots_(n < 1 ? 1 : n) {}

  // Holds a slot while alive, when it took one.
  class Slot {
   public:
    explicit Slot(std::counting_semaphore<>* taken) : taken_(taken) {}
    Slot(Slot&& o) noexcept : taken_(o.taken_) { o.taken_ = nullptr; }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (taken_) taken_->release();
    }

   private:
    std::counting_semaphore<>* taken_;
  };

  // Waits for a slot if the body is large; any thread.
  Slot enter(size_t body_bytes) {
    if (body_bytes < kLargeBody) return Slot(nullptr);
    slots_.acquire();
    return Slot(&slots_);
  }

 private:
  std::counting_semaphore<> slots_;
};

}  // namespace duet::server
