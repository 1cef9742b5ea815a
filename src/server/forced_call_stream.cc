#include "server/forced_call_stream.h"

namespace duet::server {

void ForcedCallStream::feed(std::string_view text, std::vector<Event>& out) {
  while (!text.empty()) {
    if (!call_) {
      const size_t open = text.find('{');
      if (open == std::string_view::npos) return;
      text.remove_prefix(open);
      call_.emplace();
    }
    text.remove_prefix(call_->feed(text, out));
    if (call_->done()) call_.reset();
  }
}

std::string ForcedCallStream::finish() {
  std::string cut = call_ && !call_->reported_head() ? call_->unreported() : std::string();
  call_.reset();
  return cut;
}

}  // namespace duet::server
