#pragma once
// What names a KV block's contents for the prefix cache.
//
// A workload identifies the leading tokens of a request by prefix hashes: one per
// `prefix_block_tokens` (T) tokens, where hash j names tokens [0, (j+1)T) -- the block
// AND everything before it, so equal hashes mean an equal prefix (Request fields
// prefix_block_hashes, prefix_block_tokens, prefix_identified_tokens). Mooncake's
// hash_ids (T = 512) become such a chain through ChainPrefixHashes.
//
// The KV cache's blocks are `block_size` tokens, which need not divide T. KV block k
// covers tokens [k*bs, (k+1)*bs); its key mixes the prefix hash of the source block
// holding its last token with its end position, so two requests share block k exactly
// when their identified prefixes agree up to the end of that source block. Only blocks
// wholly inside the identified tokens have a key; later blocks (a request's own text,
// its output) are never shared.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/request.h"

namespace servelab {

// A 64-bit mix of two values (splitmix64's finalizer over a ^ f(b)): keys are used as
// table hashes directly, so they must be well spread.
inline uint64_t MixKey(uint64_t a, uint64_t b) {
  auto fmix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return fmix(a ^ fmix(b + 0x9e3779b97f4a7c15ULL));
}

// Turns per-block content ids (Mooncake's hash_ids) into prefix hashes, in place:
// ids[j] becomes a hash of ids[0..j].
inline void ChainPrefixHashes(std::vector<uint64_t>& ids) {
  uint64_t parent = 0x5e12e1abULL;
  for (uint64_t& id : ids) {
    parent = MixKey(parent, id);
    id = parent;
  }
}

// Leading KV blocks of `request` that have a key (<= its prefix_identified_tokens / bs).
inline int32_t NumKeyedBlocks(const Request& request, int32_t block_size) {
  if (request.prefix_block_tokens <= 0 || request.prefix_block_hashes.empty()) return 0;
  // (Never past the hashes, whatever prefix_identified_tokens says.)
  const int64_t hashed =
      static_cast<int64_t>(request.prefix_block_hashes.size()) * request.prefix_block_tokens;
  return static_cast<int32_t>(std::min<int64_t>(request.prefix_identified_tokens, hashed) /
                              block_size);
}

// The key of `request`'s KV block `index`. REQUIRES: index < NumKeyedBlocks(request, bs).
inline uint64_t BlockKey(const Request& request, int32_t index, int32_t block_size) {
  const int64_t end = (int64_t{index} + 1) * block_size;
  const auto source = static_cast<size_t>((end - 1) / request.prefix_block_tokens);
  return MixKey(request.prefix_block_hashes[source], static_cast<uint64_t>(end));
}

}  // namespace servelab
