// Decimal numerals of bounded integers and numbers as GBNF, so a schema's
// minimum/maximum is enforced by the grammar rather than hoped for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace duet {

// Integers are limited to |x| < 10^16 (the grammar's longest numeral).
constexpr int64_t kMaxJsonInteger = 9999999999999999;

// Canonical JSON integers x with lo <= x <= hi (either may be absent).
// Requires lo <= hi when both are given.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// JSON numbers (no exponent) x with lo <= x <= hi, integer bounds.
std::string number_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace duet
