// Python's str operations as chat templates use them, both as filters
// (x | trim) and as methods (x.strip()): on code points where Python counts
// characters, with ASCII-only case mapping (templates apply it to role names).
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/value.h"

namespace duet::jinja {

// Code points of UTF-8 text (an invalid byte becomes U+FFFD), and back.
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);

std::string to_upper(const std::string& s);
std::string to_lower(const std::string& s);
std::string title(const std::string& s);
std::string capitalize(const std::string& s);
// str.strip / lstrip / rstrip: `chars` (code points) or whitespace.
std::string strip(const std::string& s, const Value* chars, bool left, bool right);
// str.replace: at most `count` replacements (all when negative).
Result<std::string> replace_all(const std::string& s, const std::string& from, const std::string& to,
                                int64_t count, const CallSite& site);
// str.split(sep=None, maxsplit=-1).
Result<Value> split(const std::string& s, const Value* sep, const Value* maxsplit, const CallSite& site);
// str.startswith / endswith, with one prefix or a list of them.
Result<bool> starts_or_ends(const std::string& s, const Value* arg, bool start, const CallSite& site);
// Jinja's indent filter: (width, first, blank).
Result<Value> indent(const std::string& s, const Args& args, const CallSite& site);

// s.name(args) for a string s.
Result<Value> call_string_method(const Value& obj, const std::string& name, const Args& args,
                                 const CallSite& site);

}  // namespace duet::jinja
