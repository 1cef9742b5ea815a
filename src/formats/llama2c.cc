#include "formats/llama2c.h"

#include <cstring>
#include <limits>

namespace duet {
namespace {

constexpr uint32_t kExportMagic = 0x616b3432;  // "ak42"
constexpr size_t kLegacyHeaderBytes = 7 * 4;
constexpr size_t kExportHeaderBytes = 256;

int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// Multiplication and addition that report overflow instead of wrapping, so an
// absurd header yields "too large" rather than a small bogus size.
bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

Result<uint64_t> product(std::initializer_list<int64_t> dims, const std::string& path) {
  uint64_t n = 1;
  for (int64_t d : dims)
    if (!mul_ok(n, static_cast<uint64_t>(d), &n))
      return err(path, ": llama2.c header describes a tensor too large to exist");
  return n;
}

Status validate(const ModelConfig& c, const std::string& path) {
  const std::pair<const char*, int32_t> fields[] = {
      {"dim", c.dim},           {"hidden_dim", c.ffn_dim},    {"n_layers", c.n_layers},
      {"n_heads", c.n_heads},   {"n_kv_heads", c.n_kv_heads}, {"vocab_size", c.n_vocab},
      {"seq_len", c.ctx_len},
  };
  for (const auto& [name, v] : fields)
    if (v <= 0) return err(path, ": llama2.c header field ", name, " = ", v, " (must be positive)");
  if (c.dim % c.n_heads != 0)
    return err(path, ": llama2.c header: dim ", c.dim, " is not a multiple of n_heads ", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    return err(path, ": llama2.c header: n_heads ", c.n_heads,
               " is not a multiple of n_kv_heads ", c.n_kv_heads);
  if (c.head_dim % 2 != 0)
    return err(path, ": llama2.c header: head size ", c.head_dim, " is odd (RoPE needs pairs)");
  return {};
}

// The seven header fields in file order, as hyper-parameters.
ModelConfig config_from_header(const int32_t (&p)[7], bool shared_classifier) {
  ModelConfig c{.n_vocab = p[5], .dim = p[0], .n_layers = p[2], .n_heads = p[3], .n_kv_heads = p[4],
                .ffn_dim = p[1], .ctx_len = p[6], .tied_output = shared_classifier};
  if (c.n_heads > 0) c.head_dim = c.rope_dim = c.dim / c.n_heads;
  return c;
}

// Walks the file in order, handing out weights; all bounds were checked by
// the exact-size test before the first take.
class Cursor {
 public:
  Cursor(Llama2cCheckpoint& ck, size_t offset) : ck_(ck), pos_(offset) {}

  Llama2cWeight fp32(std::vector<int64_t> shape) {
    Llama2cWeight w{std::move(shape), nullptr};
    w.data = reinterpret_cast<const float*>(ck_.file.data() + pos_);
    pos_ += static_cast<size_t>(w.elements()) * 4;
    return w;
  }

  // int8 values then one fp32 scale per group, dequantized to fp32.
  Llama2cWeight q8(std::vector<int64_t> shape, int32_t group) {
    Llama2cWeight w{std::move(shape), nullptr};
    const size_t n = static_cast<size_t>(w.elements());
    const uint8_t* q = ck_.file.data() + pos_;
    const uint8_t* scales = q + n;
    std::vector<float>& out = ck_.dequantized.emplace_back(n);
    for (size_t i = 0; i < n; ++i) {
      const float s = load_f32(scales + (i / static_cast<size_t>(group)) * 4);
      out[i] = static_cast<float>(static_cast<int8_t>(q[i])) * s;
    }
    pos_ += n + n / static_cast<size_t>(group) * 4;
    w.data = out.data();
    return w;
  }

  void skip(size_t bytes) { pos_ += bytes; }
  size_t pos() const { return pos_; }

 private:
  Llama2cCheckpoint& ck_;
  size_t pos_;
};

// Bytes the tensors take after the header, or an error if that overflows.
Result<uint64_t> payload_bytes(const Llama2cCheckpoint& ck, const std::string& path) {
  const ModelConfig& c = ck.config;
  const int64_t L = c.n_layers, d = c.dim, h = c.ffn_dim, v = c.n_vocab;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  DUET_ASSIGN(const uint64_t embed, product({v, d}, path));
  DUET_ASSIGN(const uint64_t norms, product({2 * L + 1, d}, path));
  DUET_ASSIGN(const uint64_t wq, product({L, qd, d}, path));
  DUET_ASSIGN(const uint64_t wkv, product({2 * L, kvd, d}, path));
  DUET_ASSIGN(const uint64_t wo, product({L, d, qd}, path));
  DUET_ASSIGN(const uint64_t ffn, product({3 * L, h, d}, path));
  DUET_ASSIGN(const uint64_t freq, product({c.ctx_len, c.head_dim}, path));
  const uint64_t cls = c.tied_output ? 0 : embed;
  const uint64_t matrices[] = {embed, wq, wkv, wo, ffn, cls};

  uint64_t total = 0;
  auto add = [&](uint64_t elems, uint64_t bytes_per) {
    uint64_t b;
    if (!mul_ok(elems, bytes_per, &b) || __builtin_add_overflow(total, b, &total)) return false;
    return true;
  };
  bool ok = add(norms, 4);
  if (ck.version == 2) {
    // Every matrix is int8 plus a fp32 scale per group.
    for (uint64_t m : matrices) ok = ok && add(m, 1) && add(m / static_cast<uint64_t>(ck.group_size), 4);
  } else {
    for (uint64_t m : matrices) ok = ok && add(m, 4);
    if (ck.version == 0) ok = ok && add(freq, 4);  // freq_cis real + imag, seq_len*head_size/2 each
  }
  if (!ok) return err(path, ": llama2.c header describes a model too large to exist");
  return total;
}

Status check_group_size(const Llama2cCheckpoint& ck, const std::string& path) {
  const ModelConfig& c = ck.config;
  if (ck.group_size <= 0)
    return err(path, ": llama2.c version 2 group_size = ", ck.group_size, " (must be positive)");
  // Each matrix is quantized whole, so its size must divide into groups; the
  // row lengths dim and hidden_dim are what every matrix size is made of.
  const int64_t g = ck.group_size;
  const int64_t sizes[] = {int64_t{c.n_vocab} * c.dim, int64_t{c.dim} * c.dim,
                           int64_t{c.kv_dim()} * c.dim, int64_t{c.ffn_dim} * c.dim};
  for (int64_t s : sizes)
    if (s % g != 0)
      return err(path, ": llama2.c version 2 group_size ", g,
                 " does not divide a weight matrix of ", s, " elements");
  return {};
}

void bind_legacy(Llama2cCheckpoint& ck, Cursor& cur) {
  const ModelConfig& c = ck.config;
  const int64_t d = c.dim, h = c.ffn_dim, qd = c.q_dim(), kvd = c.kv_dim();
  ck.token_embedding = cur.fp32({c.n_vocab, d});
  auto& ls = ck.layers;
  for (auto& l : ls) l.rms_att = cur.fp32({d});
  for (auto& l : ls) l.wq = cur.fp32({qd, d});
  for (auto& l : ls) l.wk = cur.fp32({kvd, d});
  for (auto& l : ls) l.wv = cur.fp32({kvd, d});
  for (auto& l : ls) l.wo = cur.fp32({d, qd});
  for (auto& l : ls) l.rms_ffn = cur.fp32({d});
  for (auto& l : ls) l.w1 = cur.fp32({h, d});
  for (auto& l : ls) l.w2 = cur.fp32({d, h});
  for (auto& l : ls) l.w3 = cur.fp32({h, d});
  ck.rms_final = cur.fp32({d});
  cur.skip(static_cast<size_t>(c.ctx_len) * static_cast<size_t>(c.head_dim) * 4);  // freq_cis
  if (!c.tied_output) ck.wcls = cur.fp32({c.n_vocab, d});
}

// Versions 1 and 2 share an order: norms first, then the matrices.
void bind_export(Llama2cCheckpoint& ck, Cursor& cur) {
  const ModelConfig& c = ck.config;
  const int64_t d = c.dim, h = c.ffn_dim, qd = c.q_dim(), kvd = c.kv_dim();
  auto& ls = ck.layers;
  for (auto& l : ls) l.rms_att = cur.fp32({d});
  for (auto& l : ls) l.rms_ffn = cur.fp32({d});
  ck.rms_final = cur.fp32({d});
  auto mat = [&](std::vector<int64_t> shape) {
    return ck.version == 2 ? cur.q8(std::move(shape), ck.group_size) : cur.fp32(std::move(shape));
  };
  ck.token_embedding = mat({c.n_vocab, d});
  for (auto& l : ls) l.wq = mat({qd, d});
  for (auto& l : ls) l.wk = mat({kvd, d});
  for (auto& l : ls) l.wv = mat({kvd, d});
  for (auto& l : ls) l.wo = mat({d, qd});
  for (auto& l : ls) l.w1 = mat({h, d});
  for (auto& l : ls) l.w2 = mat({d, h});
  for (auto& l : ls) l.w3 = mat({h, d});
  if (!c.tied_output) ck.wcls = mat({c.n_vocab, d});
}

}  // namespace

int64_t Llama2cWeight::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<Llama2cCheckpoint> read_llama2c_checkpoint(const std::string& path) {
  Llama2cCheckpoint ck;
  DUET_ASSIGN(ck.file, MappedFile::open(path));
  const uint8_t* p = ck.file.data();
  const size_t size = ck.file.size();

  size_t header = kLegacyHeaderBytes;
  int32_t params[7];
  bool shared_classifier = true;
  if (size >= 4 && static_cast<uint32_t>(load_i32(p)) == kExportMagic) {
    if (size < kExportHeaderBytes)
      return err(path, ": llama2.c export header needs ", kExportHeaderBytes, " bytes, file has ", size);
    ck.version = load_i32(p + 4);
    if (ck.version != 1 && ck.version != 2)
      return err(path, ": unsupported llama2.c export version ", ck.version, " (supported: 1, 2)");
    for (int i = 0; i < 7; ++i) params[i] = load_i32(p + 8 + 4 * i);
    shared_classifier = p[36] != 0;
    if (ck.version == 2) ck.group_size = load_i32(p + 37);
    header = kExportHeaderBytes;
  } else {
    if (size < kLegacyHeaderBytes)
      return err(path, ": too small for a llama2.c checkpoint (", size, " bytes, header needs ",
                 kLegacyHeaderBytes, ")");
    for (int i = 0; i < 7; ++i) params[i] = load_i32(p + 4 * i);
    // The legacy format marks an unshared classifier by a negative vocab_size.
    shared_classifier = params[5] > 0;
    if (params[5] < 0 && params[5] != std::numeric_limits<int32_t>::min()) params[5] = -params[5];
  }
  ck.config = config_from_header(params, shared_classifier);
  const ModelConfig& c = ck.config;
  DUET_TRY(validate(c, path));
  if (ck.version == 2) DUET_TRY(check_group_size(ck, path));

  DUET_ASSIGN(const uint64_t payload, payload_bytes(ck, path));
  const uint64_t expected = payload + header;
  if (expected != size)
    return err(path, ": llama2.c checkpoint (version ", ck.version, ", dim ", c.dim, ", hidden_dim ",
               c.ffn_dim, ", n_layers ", c.n_layers, ", n_heads ", c.n_heads, ", n_kv_heads ",
               c.n_kv_heads, ", vocab_size ", c.n_vocab, ", seq_len ", c.ctx_len,
               c.tied_output ? ", shared classifier" : ", separate classifier",
               ") should be ", expected, " bytes, file has ", size,
               size < expected ? " (truncated?)" : " (trailing data?)");

  ck.layers.resize(static_cast<size_t>(c.n_layers));
  Cursor cur(ck, header);
  if (ck.version == 0)
    bind_legacy(ck, cur);
  else
    bind_export(ck, cur);
  assert(cur.pos() == size);
  return ck;
}

Result<Llama2cTokenizer> read_llama2c_tokenizer(const std::string& path) {
  DUET_ASSIGN(MappedFile file, MappedFile::open(path));
  const uint8_t* p = file.data();
  const size_t size = file.size();
  if (size < 4)
    return err(path, ": too small for a llama2.c tokenizer (", size, " bytes, need 4 for max_token_length)");
  Llama2cTokenizer tok;
  tok.max_token_length = load_i32(p);
  if (tok.max_token_length <= 0)
    return err(path, ": llama2.c tokenizer max_token_length = ", tok.max_token_length, " (must be positive)");
  size_t pos = 4;
  while (pos < size) {
    const size_t id = tok.pieces.size();
    if (size - pos < 8)
      return err(path, ": llama2.c tokenizer truncated in the header of token ", id, " at offset ", pos,
                 " (", size - pos, " bytes left, need 8)");
    const float score = load_f32(p + pos);
    const int32_t len = load_i32(p + pos + 4);
    pos += 8;
    if (len < 0) return err(path, ": llama2.c tokenizer token ", id, " has length ", len);
    if (static_cast<size_t>(len) > size - pos)
      return err(path, ": llama2.c tokenizer token ", id, " at offset ", pos, " has length ", len,
                 ", past the end of the file (", size - pos, " bytes left)");
    tok.pieces.emplace_back(reinterpret_cast<const char*>(p + pos), static_cast<size_t>(len));
    tok.scores.push_back(score);
    pos += static_cast<size_t>(len);
  }
  if (tok.pieces.empty()) return err(path, ": llama2.c tokenizer holds no tokens");
  return tok;
}

}  // namespace duet
