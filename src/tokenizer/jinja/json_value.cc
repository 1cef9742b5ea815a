#include "tokenizer/jinja/json_value.h"

namespace duet::jinja {

Value value_from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List list;
      list.reserve(j.size());
      for (const auto& item : j) list.push_back(value_from_json(item));
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      // An object's keys are unique: appended, not set (Dict::set searches
      // the items, which made an object of n keys cost n^2).
      Dict dict;
      dict.items.reserve(j.size());
      for (const auto& [key, item] : j.items()) dict.items.emplace_back(key, value_from_json(item));
      return Value(std::move(dict));
    }
    default: return Value::none();  // binary and discarded values do not come from parsing text
  }
}

}  // namespace duet::jinja
