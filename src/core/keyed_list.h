// Insertion-ordered key/value lists (GGUF metadata being written, template
// dicts): small enough that a linear search wins, and their order is part of
// what they produce, so a map would not do.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace duet {

// Replaces the value of `key`, or appends the pair when the key is new.
template <class V>
void set_keyed(std::vector<std::pair<std::string, V>>& items, const std::string& key, V value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

}  // namespace duet
