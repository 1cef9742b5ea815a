// A safetensors file from untrusted bytes: the header length, the JSON
// header and every tensor's dtype, shape and byte range against the file.
#include <cstddef>
#include <cstdint>

#include "formats/safetensors.h"
#include "memfd_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static duet::fuzz::MemFile file;
  auto st = duet::SafetensorsFile::open(file.write(data, size));
  if (!st) return 0;
  for (const duet::SafetensorsTensor& t : st->tensors()) {
    (void)st->find(t.name);
    (void)t.elements();
  }
  return 0;
}
