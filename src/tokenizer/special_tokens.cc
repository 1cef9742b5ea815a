#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace duet {

SpecialTokens::SpecialTokens(const std::vector<std::string>& texts, const std::vector<TokenType>& types) {
  for (size_t i = 0; i < texts.size() && i < types.size(); ++i) {
    const TokenType t = types[i];
    if (texts[i].empty() || (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown))
      continue;
    entries_.push_back({texts[i], static_cast<int32_t>(i), t == TokenType::kUserDefined});
  }
  // Ids go in ascending, so a stable sort leaves equal lengths in id order.
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
  for (size_t k = 0; k < entries_.size(); ++k) {
    by_first_byte_[static_cast<uint8_t>(entries_[k].text[0])].push_back(static_cast<uint32_t>(k));
  }
}

void SpecialTokens::partition(std::string_view text, bool parse_special, std::vector<Piece>& out) const {
  // Every occurrence of every eligible token, as (the token's turn, position).
  std::vector<std::pair<uint32_t, size_t>> found;
  for (size_t i = 0; i < text.size(); ++i) {
    for (uint32_t k : by_first_byte_[static_cast<uint8_t>(text[i])]) {
      const Entry& e = entries_[k];
      if ((e.always || parse_special) && text.compare(i, e.text.size(), e.text) == 0) found.emplace_back(k, i);
    }
  }
  // In turn, each takes its occurrences left to right where nothing is taken.
  std::sort(found.begin(), found.end());
  std::vector<bool> taken(found.empty() ? 0 : text.size());
  std::vector<std::pair<size_t, uint32_t>> kept;  // (position, token's turn)
  for (const auto& [k, pos] : found) {
    const size_t end = pos + entries_[k].text.size();
    if (std::any_of(taken.begin() + static_cast<ptrdiff_t>(pos), taken.begin() + static_cast<ptrdiff_t>(end),
                    [](bool b) { return b; }))
      continue;
    std::fill(taken.begin() + static_cast<ptrdiff_t>(pos), taken.begin() + static_cast<ptrdiff_t>(end), true);
    kept.emplace_back(pos, k);
  }
  std::sort(kept.begin(), kept.end());
  size_t at = 0;  // where the next plain piece starts
  for (const auto& [pos, k] : kept) {
    if (pos > at) out.push_back({at, pos, -1});
    const Entry& e = entries_[k];
    out.push_back({pos, pos + e.text.size(), e.id});
    at = pos + e.text.size();
    // llama.cpp strips what C's isspace() calls whitespace, up to the next token.
    if (e.rstrip) {
      while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])) && !(taken[at])) ++at;
    }
  }
  if (at < text.size()) out.push_back({at, text.size(), -1});
}

void SpecialTokens::apply_model_rules(std::string_view general_name) {
  std::string name(general_name);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  for (Entry& e : entries_) e.rstrip = e.text != "<unk>" && e.text != "<s>" && e.text != "<|endoftext|>";
}

}  // namespace duet
