// The values a chat template computes with: Python's types as Jinja sees
// them (undefined, none, bool, int, float, str, list, dict). Lists and dicts
// are shared by reference, as in Python, which is what lets a namespace()
// set inside a loop be seen after it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace duet::jinja {

class Value;
using List = std::vector<Value>;

// Insertion-ordered, as Python's dict (items() and tojson keep the order).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // only namespace() objects accept `set ns.x = ...`

  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict };

  // An undefined value remembers what was looked up, for error messages.
  Value() = default;
  static Value undefined(std::string what);
  static Value none();
  Value(bool b) : kind_(Kind::kBool), i_(b) {}
  Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
  Value(int i) : kind_(Kind::kInt), i_(i) {}
  Value(double f) : kind_(Kind::kFloat), f_(f) {}
  Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::kString), s_(s) {}
  Value(List l) : kind_(Kind::kList), list_(std::make_shared<List>(std::move(l))) {}
  Value(Dict d) : kind_(Kind::kDict), dict_(std::make_shared<Dict>(std::move(d))) {}

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return i_ != 0; }
  // Bools count as ints, as in Python (True + 1 == 2).
  int64_t as_int() const { return i_; }
  double as_float() const { return is_float() ? f_ : static_cast<double>(i_); }
  const std::string& as_string() const { return s_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  // What an undefined value stands for ("'x' is undefined").
  const std::string& undefined_what() const { return s_; }

  bool truthy() const;
  // Python's str(): what {{ }} prints.
  std::string str() const;
  // Python's repr(): how a value looks inside a printed list or dict.
  std::string repr() const;
  const char* type_name() const;
  // Bytes of a string, items of a list or dict: the work a copy or a scan costs.
  size_t size_hint() const;
  // Bytes it occupies, roughly (an item of a list counts sizeof(Value)): what
  // the size limit bounds.
  size_t memory_hint() const { return is_string() || size_hint() <= 1 ? size_hint() : size_hint() * sizeof(Value); }

 private:
  Kind kind_ = Kind::kUndefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
};

// Whether `from` is, or holds at any depth, the very dict `target` (same
// object, not equal contents); `visited` counts the containers walked. A
// namespace that came to hold itself would be a reference cycle, never freed.
bool reaches(const Value& from, const Value& target, size_t& visited);

// Python's ==.
bool equal(const Value& a, const Value& b);
// Python's ordering (-1, 0, 1) of two numbers, two strings or two lists;
// nothing for other pairs.
std::optional<int> compare(const Value& a, const Value& b);
// Python's float repr: the shortest digits that round-trip ("1.0", "0.1", "1e+16").
std::string format_float(double f);
// json.dumps(v, ensure_ascii=False) with `indent` spaces (< 0: one line), the
// tojson of Hugging Face's chat templates. Undefined values print as null.
std::string to_json(const Value& v, int indent);

}  // namespace duet::jinja
