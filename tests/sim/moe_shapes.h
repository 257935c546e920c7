#pragma once
// Small mixture-of-experts shapes the MoE tests share.
#include "core/model_spec.h"
#include "driver/model_catalog.h"

namespace servelab::testing {

// Mixtral's layout (8 experts, 2 a token) at hidden 256, 4 heads of 64, 2 KV heads.
inline ModelSpec SmallMixtral() {
  ModelSpec m = *FindModel("mixtral-8x7b");
  m.hidden_size = 256;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  return m;
}

}  // namespace servelab::testing
