// JSON as a template sees it: what Python's json.loads hands to Jinja in
// Hugging Face's apply_chat_template (messages with tool calls, tool
// schemas). Objects keep their key order, as Python dicts do, so that
// `tools | tojson` prints them as they came.
#pragma once

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/value.h"

namespace duet::jinja {

// null -> none, bool, integers -> int (float past the int64 range), other
// numbers -> float, string, array -> list, object -> dict.
Value value_from_json(const nlohmann::ordered_json& j);

}  // namespace duet::jinja
