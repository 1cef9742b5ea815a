// Jinja's filters (x | trim), tests (x is defined), Python string and dict
// methods (s.strip(), d.items()) and global functions (range, namespace,
// raise_exception): the subset chat templates use. An unknown name is an
// error naming it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/value.h"

namespace duet::jinja {

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;

  // Argument `i` by position, else by keyword `name`; null when absent.
  const Value* get(size_t i, std::string_view name) const;
};

// What every builtin needs besides its arguments: where it was called (for
// messages) and the largest string or list it may build.
struct CallSite {
  Pos pos;
  size_t max_size;

  // An error when a built value of n bytes would exceed max_size.
  Status check_size(size_t n) const;
};

// "`what` cannot take a list at line 1:5", or the undefined value's own message.
Error type_error(const char* what, const Value& v, const CallSite& site);

// Applies a filter by name. `apply_test` lets select/reject run tests.
Result<Value> call_filter(const std::string& name, const Value& in, const Args& args, const CallSite& site);
Result<bool> call_test(const std::string& name, const Value& in, const Args& args, const CallSite& site);
Result<Value> call_method(const Value& obj, const std::string& name, const Args& args, const CallSite& site);
// Global functions; raise_exception returns its message as the error.
Result<Value> call_global(const std::string& name, const Args& args, const CallSite& site);

}  // namespace duet::jinja
