// Every kernel duet has, in one table of (operation, element type, CPU level)
// entries (registry.cc), and the choice made from it for one level: for each
// operation and type, the entry of the highest level at or below it. A level
// without a version of its own thus runs the one below's (the AVX-512 level
// runs AVX2's KV row kernels, for instance).
//
// kernels() is that choice for active_cpu_level(), made once, on first use;
// callers index it by type, so a kernel call costs a table load and an
// indirect call, never a search. kernels_at() makes it for any level, for the
// tests that compare levels in one process.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/kv_format.h"
#include "kernels/attention.h"
#include "kernels/kv_kernels.h"
#include "kernels/ops.h"
#include "kernels/packed_gemm.h"
#include "kernels/probes.h"
#include "kernels/type_kernels.h"

namespace duet {

using AttendRowsFn = decltype(&attend_rows_avx512);
using AttendPartFn = decltype(&attend_part_avx512);
using ExpShiftedFn = decltype(&exp_shifted_scalar);
using SwigluFn = decltype(&swiglu_scalar);
// The same signature as SwigluFn: a struct of its own keeps it a separate
// alternative (operation) of KernelImpl.
struct GegluFn {
  SwigluFn fn = nullptr;
};

// What an entry provides; which alternative it holds is its operation.
using KernelImpl = std::variant<const TypeKernels*, const PackedKernels*, const KvRowKernels*, AttendRowsFn,
                                AttendPartFn, ExpShiftedFn, SwigluFn, GegluFn, const ProbeKernels*>;

struct KernelEntry {
  KernelEntry(KernelImpl i, DType t, CpuLevel l, std::string_view n)
      : impl(i), type(static_cast<uint32_t>(t)), level(l), name(n) {}
  KernelEntry(KernelImpl i, KvType t, CpuLevel l, std::string_view n)
      : impl(i), type(static_cast<uint32_t>(t)), level(l), name(n) {}
  KernelEntry(KernelImpl i, CpuLevel l, std::string_view n) : impl(i), type(0), level(l), name(n) {}

  KernelImpl impl;
  uint32_t type;  // a DType, a KvType for the KV row kernels, 0 for untyped operations
  CpuLevel level;
  std::string_view name;  // how the implementation works, for `duet inspect --kernels`
};

std::span<const KernelEntry> kernel_table();
std::string_view kernel_op_name(const KernelEntry& e);
// The entry's element type by name; empty for an untyped operation.
std::string_view kernel_type_name(const KernelEntry& e);

class KernelSet {
 public:
  explicit KernelSet(CpuLevel level);

  CpuLevel level() const { return level_; }
  const TypeKernels* type(DType t) const { return get<const TypeKernels*>(static_cast<uint32_t>(t)); }
  const PackedKernels* packed(DType t) const { return get<const PackedKernels*>(static_cast<uint32_t>(t)); }
  const KvRowKernels* kv_rows(KvType t) const { return get<const KvRowKernels*>(static_cast<uint32_t>(t)); }
  AttendRowsFn attend_rows() const { return get<AttendRowsFn>(0); }  // nullptr where none
  AttendPartFn attend_part() const { return get<AttendPartFn>(0); }  // nullptr where none
  ExpShiftedFn exp_shifted() const { return get<ExpShiftedFn>(0); }
  SwigluFn swiglu() const { return get<SwigluFn>(0); }
  SwigluFn geglu() const { return get<GegluFn>(0).fn; }
  const ProbeKernels* probes() const { return get<const ProbeKernels*>(0); }

  // The chosen entries, in the table's order.
  std::vector<const KernelEntry*> chosen() const;

 private:
  static constexpr size_t kOps = std::variant_size_v<KernelImpl>;
  static constexpr uint32_t kTypes = 40;  // above every DType and KvType value

  template <class Impl>
  static constexpr size_t op() {
    return KernelImpl(std::in_place_type<Impl>).index();
  }
  template <class Impl>
  Impl get(uint32_t type) const {
    const KernelEntry* e = type < kTypes ? slots_[op<Impl>()][type] : nullptr;
    return e ? *std::get_if<Impl>(&e->impl) : Impl{};
  }

  CpuLevel level_;
  std::array<std::array<const KernelEntry*, kTypes>, kOps> slots_{};
};

// The choice for active_cpu_level(), made once.
const KernelSet& kernels();
// The choice for `level`, made once per level.
const KernelSet& kernels_at(CpuLevel level);

}  // namespace duet
