#include "engine/stop_text.h"

#include <algorithm>

namespace duet {

StopText::StopText(const Tokenizer& tok, std::vector<std::string> stops, bool continues_prompt)
    : detok_(tok, /*first_is_start=*/!continues_prompt), stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopText::Piece StopText::push(int32_t token) {
  held_ += detok_.push(token);
  return release(false);
}

StopText::Piece StopText::finish() {
  held_ += detok_.flush();
  return release(true);
}

StopText::Piece StopText::release(bool at_end) {
  Piece out;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    out.text = held_.substr(0, first);
    out.stopped = true;
    held_.clear();
    return out;
  }
  // Keep the longest tail that is a proper prefix of some stop string. Stop
  // strings are whole UTF-8 text, so the cut falls on a character boundary.
  size_t keep = 0;
  if (!at_end) {
    for (const std::string& s : stops_) {
      for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
        if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
      }
    }
  }
  out.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace duet
