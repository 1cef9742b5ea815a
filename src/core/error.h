// Errors as values at the module boundary (DESIGN.md, "Load-bearing
// decisions"): anything that untrusted input can cause returns Result<T>;
// internal invariants may assert.
#pragma once

#include <cassert>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace duet {

struct Error {
  std::string message;
  // A stable name for the kind of error where a caller must tell kinds
  // apart (the server maps it to its API's error code); usually empty.
  std::string code;
};

// Builds an Error from pieces streamed together: err("tensor '", name, "' ...").
template <class... Parts>
Error err(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return Error{os.str(), {}};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : e_(std::move(e)), failed_(true) {}
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { assert(failed_); return e_; }

 private:
  Error e_;
  bool failed_ = false;
};

using Status = Result<void>;

}  // namespace duet

#define DUET_CONCAT_INNER(a, b) a##b
#define DUET_CONCAT(a, b) DUET_CONCAT_INNER(a, b)

// Returns the error of a failed Status/Result from the enclosing function.
#define DUET_TRY(expr)                                   \
  do {                                                   \
    auto&& duet_try_r_ = (expr);                         \
    if (!duet_try_r_.ok()) return duet_try_r_.error();   \
  } while (0)

// DUET_ASSIGN(auto x, f()) declares x from a successful Result or returns its error.
#define DUET_ASSIGN(decl, expr) DUET_ASSIGN_IMPL(DUET_CONCAT(duet_r_, __LINE__), decl, expr)
#define DUET_ASSIGN_IMPL(tmp, decl, expr)   \
  auto tmp = (expr);                        \
  if (!tmp.ok()) return tmp.error();        \
  decl = std::move(tmp).value()
