#include "model/tp_step.h"

#include <memory>
#include <stdexcept>
#include <vector>

#include "model/model.h"

namespace duet {
namespace {

enum Op : int64_t { kForward = 1, kShiftKeys = 2, kStop = 3 };

// Sent first, fixed size: what follows and the cache it runs on.
struct Header {
  int64_t op = kStop;
  int64_t payload = 0;   // int32 values that follow
  int64_t n_blocks = 0;  // rank 0's cache
  int64_t kv_type = 0;
  int64_t n_groups = 0;  // of layers, in rank 0's cache (kv/kv_groups.h)
  int64_t head = 0;      // a forward pass: 1 when it ends in the vocabulary head
};

void send(Communicator& comm, Op op, const KvCache* cache, std::vector<int32_t>& payload, bool head = false) {
  Header h{op, static_cast<int64_t>(payload.size()), cache ? cache->pool().n_blocks() : 0,
           cache ? static_cast<int64_t>(cache->type()) : 0, cache ? cache->groups().n_groups() : 0, head ? 1 : 0};
  comm.broadcast(&h, sizeof h);
  if (!payload.empty()) comm.broadcast(payload.data(), payload.size() * sizeof(int32_t));
}

std::vector<int32_t> take(const std::vector<int32_t>& p, size_t& at, size_t n) {
  if (at + n > p.size()) throw std::out_of_range("a step from rank 0 is shorter than what it describes");
  std::vector<int32_t> v(p.begin() + static_cast<std::ptrdiff_t>(at), p.begin() + static_cast<std::ptrdiff_t>(at + n));
  at += n;
  return v;
}

void put_table(std::vector<int32_t>& p, const BlockTable& t) {
  p.push_back(t.n_groups());
  for (const std::vector<int32_t>& blocks : t.groups) {
    p.push_back(static_cast<int32_t>(blocks.size()));
    p.insert(p.end(), blocks.begin(), blocks.end());
  }
}

// Reads what put_table wrote at p[at], advancing `at`.
BlockTable take_table(const std::vector<int32_t>& p, size_t& at) {
  BlockTable t;
  t.groups.resize(static_cast<size_t>(p.at(at++)));
  for (std::vector<int32_t>& blocks : t.groups) {
    const auto n = static_cast<size_t>(p.at(at++));
    blocks = take(p, at, n);
  }
  return t;
}

// The batch rank 0 sent, its block tables owned by `tables`.
Batch decode_batch(const std::vector<int32_t>& p, std::vector<BlockTable>& tables) {
  size_t at = 0;
  const auto n = static_cast<size_t>(p.at(at++));
  const auto n_seqs = static_cast<size_t>(p.at(at++));
  Batch b;
  b.tokens = take(p, at, n);
  b.positions = take(p, at, n);
  b.seq = take(p, at, n);
  for (int32_t w : take(p, at, n)) b.want_logits.push_back(static_cast<uint8_t>(w));
  tables.clear();
  for (size_t s = 0; s < n_seqs; ++s) tables.push_back(take_table(p, at));
  for (const BlockTable& t : tables) b.tables.push_back(&t);
  const auto n_copies = static_cast<size_t>(p.at(at++));
  for (size_t i = 0; i < n_copies; ++i, at += 2) b.copies.push_back({p.at(at), p.at(at + 1)});
  return b;
}

}  // namespace

void lead_forward(Communicator& comm, const Batch& batch, const KvCache& cache, bool head) {
  std::vector<int32_t> p{batch.size(), static_cast<int32_t>(batch.tables.size())};
  for (const std::vector<int32_t>* v : {&batch.tokens, &batch.positions, &batch.seq}) p.insert(p.end(), v->begin(), v->end());
  p.insert(p.end(), batch.want_logits.begin(), batch.want_logits.end());
  for (const BlockTable* t : batch.tables) put_table(p, *t);
  p.push_back(static_cast<int32_t>(batch.copies.size()));
  for (const BlockCopy& c : batch.copies) p.insert(p.end(), {c.src, c.dst});
  send(comm, kForward, &cache, p, head);
}

void lead_shift_keys(Communicator& comm, const KvCache& cache, const BlockTable& table, int32_t begin, int32_t end,
                     int32_t delta) {
  std::vector<int32_t> p{begin, end, delta};
  put_table(p, table);
  send(comm, kShiftKeys, &cache, p);
}

void lead_stop(Communicator& comm) {
  std::vector<int32_t> none;
  send(comm, kStop, nullptr, none);
}

Status follow_leader(Model& model, Communicator& comm, ThreadPool& pool) {
  std::unique_ptr<KvCache> cache;
  std::vector<BlockTable> tables;
  std::vector<int32_t> p;
  // A follower's logits are never written (Model::forward): non-null asks
  // for this rank's rows of the head, which go to rank 0.
  float no_logits = 0.0f;
  for (;;) {
    Header h;
    comm.broadcast(&h, sizeof h);
    if (h.op == kStop) return {};
    p.resize(static_cast<size_t>(h.payload));
    comm.broadcast(p.data(), p.size() * sizeof(int32_t));
    const auto type = static_cast<KvType>(h.kv_type);
    if (!cache || cache->pool().n_blocks() != h.n_blocks || cache->type() != type ||
        cache->groups().n_groups() != h.n_groups) {
      const KvShape shape = h.n_groups == 1 ? with_one_table(model.kv_shape()) : model.kv_shape();
      cache = std::make_unique<KvCache>(shape, static_cast<int32_t>(h.n_blocks), type);
    }
    if (h.op == kForward) {
      const Batch batch = decode_batch(p, tables);
      DUET_TRY(model.forward(batch, *cache, pool, h.head ? &no_logits : nullptr));
    } else if (h.op == kShiftKeys) {
      size_t at = 3;
      const BlockTable table = take_table(p, at);
      model.shift_keys(*cache, table, p[0], p[1], p[2], pool);
    } else {
      return err("rank ", comm.rank(), ": unknown step ", h.op, " from rank 0");
    }
  }
}

}  // namespace duet
