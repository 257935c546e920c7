#include "core/prefix_cache.h"

#include "core/hash_prefix_cache.h"
#include "core/radix_prefix_cache.h"

namespace servelab {

std::unique_ptr<PrefixCache> MakePrefixCache(PrefixCacheType type, const BlockPool& pool) {
  switch (type) {
    case PrefixCacheType::kNone: return nullptr;
    case PrefixCacheType::kHash: return std::make_unique<HashPrefixCache>(pool);
    case PrefixCacheType::kRadix: return std::make_unique<RadixPrefixCache>(pool);
  }
  return nullptr;
}

}  // namespace servelab
