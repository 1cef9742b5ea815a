// JSON text parsed with its nesting bounded by the parser itself.
//
// nlohmann::json parses iteratively, but what is then done with a value —
// dump() it, copy it, compare it, convert it, hand it to a template — walks
// it recursively, one stack frame per level: a 1 MiB body of "[[[[..." is
// 500 k levels and takes a worker's stack down. Every JSON this program
// reads from outside (request bodies, a model's output, tool-call
// arguments, model files) goes through parse_json, which counts the depth as
// the SAX events arrive and stops at the first level past the bound, so no
// walk afterwards can go deeper and a refusal costs one pass over the bytes.
//
// The values are built here rather than by nlohmann's DOM parser because
// ordered_json's object is a vector searched for every key inserted: an
// object of 60 k keys cost 3 s of CPU to parse. Here each open object of
// an ordered_json keeps a hash index of its keys, so parsing is linear in
// the text either way (a repeated key keeps its first place and its last
// value, as nlohmann's json keeps the last).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace duet {

// The nesting any JSON duet reads may reach. A JSON Schema at the schema
// compiler's own bound (48 nested subschemas) is about 100 levels deep
// inside a request (each subschema adds "properties" -> name), and no model
// file's or API's JSON comes near.
constexpr int kMaxJsonDepth = 128;

namespace json_parse_detail {

template <class J>
class BoundedBuilder {
 public:
  using number_integer_t = typename J::number_integer_t;
  using number_unsigned_t = typename J::number_unsigned_t;
  using number_float_t = typename J::number_float_t;
  using string_t = typename J::string_t;
  using binary_t = typename J::binary_t;

  BoundedBuilder(J& root, int max_depth) : root_(root), max_depth_(max_depth) {}

  bool null() { return put(J(nullptr)); }
  bool boolean(bool v) { return put(J(v)); }
  bool number_integer(number_integer_t v) { return put(J(v)); }
  bool number_unsigned(number_unsigned_t v) { return put(J(v)); }
  bool number_float(number_float_t v, const string_t&) { return put(J(v)); }
  bool string(string_t& v) { return put(J(std::move(v))); }
  bool binary(binary_t&) { return false; }  // JSON text has none
  bool start_object(std::size_t) { return open(J::object()); }
  bool start_array(std::size_t) { return open(J::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    if (levels_.size() == 1) top_key_ = k;
    Level& top = levels_.back();
    auto& members = top.value->template get_ref<typename J::object_t&>();
    if constexpr (kOrdered) {
      auto [at, added] = top.keys.try_emplace(k, members.size());
      if (added) members.emplace_back(std::move(k), J());
      slot_ = &(members.begin() + static_cast<std::ptrdiff_t>(at->second))->second;
    } else {
      slot_ = &members[std::move(k)];
    }
    return true;
  }
  bool parse_error(std::size_t at, const std::string&, const nlohmann::detail::exception&) {
    error_at_ = at;
    return false;
  }

  bool too_deep() const { return too_deep_; }
  // The top-level object's key whose value was being read last.
  const std::string& top_key() const { return top_key_; }
  std::size_t error_at() const { return error_at_; }

 private:
  static constexpr bool kOrdered = std::is_same_v<J, nlohmann::ordered_json>;
  struct Level {
    J* value;
    std::unordered_map<std::string, std::size_t> keys;  // ordered objects: where each key is
  };

  // Where the next value goes: the root, the array's end, or the slot its
  // key made.
  J* place(J&& v) {
    if (levels_.empty()) return &(root_ = std::move(v));
    J& top = *levels_.back().value;
    if (top.is_array()) {
      auto& items = top.template get_ref<typename J::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    return &(*slot_ = std::move(v));
  }
  bool put(J&& v) {
    place(std::move(v));
    return true;
  }
  // An open container is always its parent's last element, and nothing is
  // added to the parent until it closes, so the pointer stays valid.
  bool open(J&& v) {
    if (static_cast<int>(levels_.size()) >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    levels_.push_back({place(std::move(v)), {}});
    return true;
  }
  bool close() {
    levels_.pop_back();
    return true;
  }

  J& root_;
  std::vector<Level> levels_;
  J* slot_ = nullptr;
  std::string top_key_;
  int max_depth_;
  bool too_deep_ = false;
  std::size_t error_at_ = 0;
};

}  // namespace json_parse_detail

// The value of `text` (exactly one JSON value, whitespace around it), or an
// error that says whether it is not JSON or nested deeper than `max_depth`
// (code "json_too_deep"; then `deep_field`, if given, is the top-level
// object's key under which it went too deep, for an API error to name).
// For nlohmann::json and ordered_json.
template <class J = nlohmann::json>
Result<J> parse_json(std::string_view text, int max_depth = kMaxJsonDepth, std::string* deep_field = nullptr) {
  J out;
  json_parse_detail::BoundedBuilder<J> builder(out, max_depth);
  const bool ok = J::sax_parse(text, &builder, nlohmann::detail::input_format_t::json, /*strict=*/true);
  if (builder.too_deep()) {
    Error e = err("JSON nested deeper than ", max_depth, " levels");
    e.code = "json_too_deep";
    if (deep_field) *deep_field = builder.top_key();
    return e;
  }
  if (!ok) return err("not valid JSON (at byte ", builder.error_at(), ")");
  return out;
}

}  // namespace duet
