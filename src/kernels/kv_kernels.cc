// Scalar reference kernels of the KV storage types. A quantized row's scale
// multiplies the whole integer dot (or the weight p of a value row) once
// instead of every element.
#include "kernels/kv_kernels.h"

#include "kernels/kv_rows.h"

namespace duet {
namespace {

template <class R, KvType T>
constexpr KvRowKernels make() {
  return {kv_rows::scores<R, T>, kv_rows::accumulate<R, T>};
}

}  // namespace

constexpr KvTypeKernels kKvScalar = {make<kv_rows::F32Row, KvType::F32>(), make<kv_rows::F16Row, KvType::F16>(),
                                     make<kv_rows::Q8Row, KvType::Q8>(), make<kv_rows::Q4Row, KvType::Q4>()};

}  // namespace duet
