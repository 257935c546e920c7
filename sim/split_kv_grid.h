#pragma once
// Decode attention's split-KV grid as FlashAttention-2 launches and the block scheduler
// places it, the work of op_model.h's split_kv form (OpWork's pair_bytes, single_bytes,
// waves, combine, combine_splits).
//
// FlashAttention-2's decode kernel (flash-attn's num_splits_heuristic, which vLLM's and
// Vidur's FlashAttention decode run) launches one CTA per (sequence, KV head, split of
// the KV length into 128-token blocks); a batch too small to fill ~80% of the SMs is split
// along the KV, and a second kernel combines the splits. Its time steps with the grid
// the heuristic picks, not with the bytes: at Llama-2-70B TP 2 on an A100 (4 KV heads a
// GPU), 21 sequences take 60% longer than 22 at short contexts (split, then not), and
// every 216 CTAs (two resident a SM) add a wave. The kernel's work is counted as
//   splits      the heuristic's, for seqs x kv_heads CTAs a split over the KV length (the
//               longest sequence's, vLLM's max_seqlen_k; Vidur's profiler allocated
//               max_model_len, which its rows carry)
//   CTA blocks  the whole 128-token blocks of K and V each CTA streams: its split's share
//               of its sequence's (0 for a split past the sequence's end: it exits at
//               once; such a CTA is idle, the others busy)
//   busiest SM  the one given the most busy CTAs (then the most blocks) by the block
//               scheduler as modelled (BusiestSmCtaBlocks): the CTAs in grid order (split
//               before sequence x KV head), one a SM and then a second (two are resident
//               a SM: their shared memory); an idle CTA's slot takes the next CTA at once,
//               SM by SM; once every slot holds a busy CTA, each of the rest starts on the
//               SM whose slot frees first (the fewest blocks given; in a grid of more than
//               4 CTAs a SM, on the SMs in turn). Which SMs the busy
//               CTAs land on decides the time: 10 sequences split 5 ways (busy CTAs 0, 5,
//               ..., 195 of 200) never share an SM, 16 split 3 ways (0, 3, ..., 189 of
//               192: the second round lands on the first's SMs) do, and take 45-80% longer
//               than 22 unsplit sequences (combine included).
//   waves       ceil(CTAs the busiest SM is given / 2). The first wave's CTAs all start at
//               the launch: when it holds two, the shorter's blocks stream at the paired
//               rate (pair_bytes) and the rest of the longer's at the single CTA's
//               (single_bytes); one alone streams at the single rate. A later wave's CTAs
//               start as slots free, staggered, and add its longest CTA's time at the
//               single rate (single_bytes), their bytes beyond it running at the bandwidth
//               (the bytes term): the A100's decode time steps at 108, 216 and 432 CTAs,
//               not at 324, where the second wave's CTAs start to pair. Counting each CTA's
//               own blocks (not the longest CTA's for all) matters when a context crosses a
//               split's boundary: the new CTAs stream one block, and counted as full ones
//               they over-predicted 19-21 sequences at 1,792-2,048 tokens by 18-30%.
//   ramp        of the paired blocks, those of the first pair_ramp_tokens
//               (min(pair_bytes, pair_ramp_tokens x cta_bytes_per_token)), which stream
//               at a rate of their own: on the A100 the first 768 tokens of a paired CTA
//               take 1.5x as long a byte as the rest, and a paired batch's time grows
//               more slowly with the context past them; without the ramp, a fit on
//               contexts up to 1,024 over-predicts longer ones by 5.5% (with it, 2.3%).
//   rows        the sequences (each one query row: its query, output and block table)
//   combine     1 when split: the kernel that merges the splits' partial outputs, and
//               combine_splits, the splits it merges (each row reads every split's
//               partial output): one sequence split 16 ways takes about 3 us longer to
//               combine than 2 ways
#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/op_model.h"

namespace servelab {

// The splits flash-attn's heuristic chooses for `ctas` CTAs a split on `sms` SMs over
// `kv_blocks` 128-token blocks (at most 128).
int64_t FlashDecodeSplits(int64_t ctas, int32_t sms, int64_t kv_blocks);
inline constexpr int64_t kFlashDecodeBlockTokens = 128;
inline constexpr int32_t kFlashDecodeResidentCtas = 2;  // a SM at once (its shared memory)
// Busy CTAs in the order an SM runs them, as runs of CTAs streaming as many blocks:
// memory by runs, not CTAs (a grid of 2^33 CTAs gives its busiest SM ~10^8 of them, in a
// few runs when its sequences are alike).
struct CtaRuns {
  std::vector<std::pair<int64_t, int64_t>> runs;  // (blocks a CTA, CTAs), in order
  // `count` more CTAs of `blocks` each (none when count <= 0), merged with the last run
  // when it has as many blocks.
  void Add(int64_t blocks, int64_t count) {
    if (count <= 0) return;
    if (!runs.empty() && runs.back().first == blocks) {
      runs.back().second += count;
    } else {
      runs.emplace_back(blocks, count);
    }
  }
  size_t size() const {  // CTAs
    int64_t n = 0;
    for (const auto& run : runs) n += run.second;
    return static_cast<size_t>(n);
  }
  // Each CTA's blocks, one entry a CTA (for tests: as large as the CTAs).
  std::vector<int64_t> Expanded() const {
    std::vector<int64_t> out;
    for (const auto& [blocks, count] : runs) out.insert(out.end(), static_cast<size_t>(count), blocks);
    return out;
  }
  bool operator==(const CtaRuns&) const = default;
};
// An SM's CTAs run kFlashDecodeResidentCtas at a time, in waves: its first two together
// (`pair_blocks`: the shorter's blocks; the rest of the longer's alone, in
// `single_blocks`), and each later wave as long as its longest CTA (in `single_blocks`).
struct WaveBlocks {
  int64_t waves = 0, pair_blocks = 0, single_blocks = 0;
  static WaveBlocks Of(const CtaRuns& ctas);  // one pass over the runs
};
// The busiest SM's CTAs when `launched` CTAs, of which CTA `cta` (grid order) streams
// `blocks(cta)` whole blocks of KV (0: it exits at once), are dispatched as the header
// above says: the blocks of each busy CTA it is given, in the order given. The busiest
// gets the most busy CTAs, then the most blocks (then the lowest index). `run_length(cta)`
// says how many CTAs from `cta` on stream as many blocks (at least 1; a sequence's CTAs
// when unsplit): they are placed at once where the grid goes round the SMs in turn.
template <class Blocks, class RunLength>
CtaRuns BusiestSmCtaBlocks(int32_t sms, int64_t launched, Blocks blocks, RunLength run_length);
template <class Blocks>
CtaRuns BusiestSmCtaBlocks(int32_t sms, int64_t launched, Blocks blocks) {
  return BusiestSmCtaBlocks(sms, launched, blocks, [](int64_t) { return int64_t{1}; });
}
// The split-KV fields of a decode batch on `sms` SMs whose sequences attend `attended(i)`
// tokens (cached + the new one), i < seqs; the split length is `kv_length` tokens, or the
// longest sequence's when 0. One pass over the sequences, then one over the CTAs.
template <class Attended>
void AddSplitKvWork(OpWork& work, const OpShape& shape, int32_t sms, int64_t kv_length,
                    int64_t seqs, Attended attended);

template <class Blocks, class RunLength>
CtaRuns BusiestSmCtaBlocks(int32_t sms, int64_t launched, Blocks blocks, RunLength run_length) {
  constexpr int32_t kResident = kFlashDecodeResidentCtas;
  if (sms <= 0 || launched <= 0) return {};
  const auto n = static_cast<size_t>(sms);
  std::vector<int64_t> given(n, 0);     // busy CTAs each SM got
  std::vector<int32_t> resident(n, 0);  // of them, in the launch and the refills
  std::vector<int64_t> load(n, 0);      // their blocks
  std::vector<std::pair<int32_t, int64_t>> placed;  // each busy CTA's SM and blocks, in order
  int64_t next = 0;
  auto give = [&](int32_t sm, int64_t b) {
    ++given[static_cast<size_t>(sm)];
    load[static_cast<size_t>(sm)] += b;
    placed.emplace_back(sm, b);
  };
  auto place = [&](int32_t sm) {
    const int64_t b = blocks(next++);
    if (b > 0) {
      give(sm, b);
      ++resident[static_cast<size_t>(sm)];
    }
  };
  // The launch: one CTA a SM in grid order, then a second one a SM.
  for (int32_t round = 0; round < kResident; ++round) {
    for (int32_t sm = 0; sm < sms && next < launched; ++sm) place(sm);
  }
  // The idle CTAs exit at once; the freed slots take the next CTAs, SM by SM, each SM's
  // slots filled before the next's. An SM whose slots all hold busy CTAs takes no more.
  std::vector<int32_t> open;
  for (int32_t sm = 0; sm < sms; ++sm) {
    if (resident[static_cast<size_t>(sm)] < kResident) open.push_back(sm);
  }
  while (next < launched && !open.empty()) {
    size_t still_open = 0;
    for (const int32_t sm : open) {
      for (int32_t slot = resident[static_cast<size_t>(sm)]; slot < kResident && next < launched;
           ++slot) {
        place(sm);
      }
      if (resident[static_cast<size_t>(sm)] < kResident) open[still_open++] = sm;
    }
    open.resize(still_open);
  }
  // Every slot holds a busy CTA: each of the rest starts on the SM whose slot frees first,
  // the one given the fewest blocks (then the fewest CTAs, then the lowest index). Past
  // two full waves (more than 4 CTAs a SM launched) they go round the SMs in turn
  // instead, a step's cost staying linear in its grid: by then the bytes term dominates.
  const int64_t rest_begin = next;
  const bool round_robin = launched > int64_t{2} * kResident * sms;
  if (next < launched && !round_robin) {
    using Slot = std::tuple<int64_t, int64_t, int32_t>;  // blocks, CTAs, SM
    std::priority_queue<Slot, std::vector<Slot>, std::greater<>> first_free;
    for (int32_t sm = 0; sm < sms; ++sm) {
      first_free.emplace(load[static_cast<size_t>(sm)], given[static_cast<size_t>(sm)], sm);
    }
    for (; next < launched; ++next) {
      const int64_t b = blocks(next);
      if (b <= 0) continue;
      const int32_t sm = std::get<2>(first_free.top());
      first_free.pop();
      give(sm, b);
      first_free.emplace(load[static_cast<size_t>(sm)], given[static_cast<size_t>(sm)], sm);
    }
  }
  // The rest's busy CTAs in turn, the i-th on SM i % sms: visit(first SM, CTAs, blocks)
  // for each run of CTAs with the same blocks.
  auto for_each_run_in_turn = [&](auto visit) {
    size_t sm = 0;
    for (int64_t cta = rest_begin; cta < launched;) {
      const int64_t b = blocks(cta);
      const int64_t run = std::clamp<int64_t>(run_length(cta), 1, launched - cta);
      cta += run;
      if (b <= 0) continue;
      visit(sm, run, b);
      sm = (sm + static_cast<size_t>(run % sms)) % n;
    }
  };
  // Whether SM `sm` is among the `count` SMs from `first` on, round the SMs.
  auto in_turn = [&](size_t sm, size_t first, size_t count) {
    return (sm + n - first) % n < count;
  };
  if (round_robin) {
    // Every SM gets run / sms of a run, and the next run % sms SMs one more: a difference
    // array over the SMs, each run costing O(1).
    std::vector<int64_t> more_given(n + 1, 0), more_load(n + 1, 0);
    int64_t all_given = 0, all_load = 0;
    auto add = [&](size_t from, size_t to, int64_t b) {  // SMs [from, to)
      ++more_given[from];
      --more_given[to];
      more_load[from] += b;
      more_load[to] -= b;
    };
    for_each_run_in_turn([&](size_t first, int64_t run, int64_t b) {
      all_given += run / sms;
      all_load += run / sms * b;
      const auto part = static_cast<size_t>(run % sms);
      if (first + part <= n) {
        add(first, first + part, b);
      } else {
        add(first, n, b);
        add(0, first + part - n, b);
      }
    });
    int64_t running_given = 0, running_load = 0;
    for (size_t sm = 0; sm < n; ++sm) {
      running_given += more_given[sm];
      running_load += more_load[sm];
      given[sm] += all_given + running_given;
      load[sm] += all_load + running_load;
    }
  }
  size_t busiest = 0;
  for (size_t sm = 1; sm < n; ++sm) {
    if (given[sm] > given[busiest] || (given[sm] == given[busiest] && load[sm] > load[busiest])) {
      busiest = sm;
    }
  }
  CtaRuns out;
  for (const auto& [sm, b] : placed) {
    if (static_cast<size_t>(sm) == busiest) out.Add(b, 1);
  }
  if (round_robin) {
    for_each_run_in_turn([&](size_t first, int64_t run, int64_t b) {
      const bool one_more = in_turn(busiest, first, static_cast<size_t>(run % sms));
      out.Add(b, run / sms + (one_more ? 1 : 0));
    });
  }
  return out;
}

template <class Attended>
void AddSplitKvWork(OpWork& work, const OpShape& shape, int32_t sms, int64_t kv_length,
                    int64_t seqs, Attended attended) {
  if (seqs <= 0 || sms <= 0) return;
  const int64_t kv_heads = KvHeadsPerGpu(shape.model, shape.tensor_parallel);
  const int64_t q_per_kv = std::max<int64_t>(
      1, shape.model.num_attention_heads / std::max<int64_t>(1, shape.model.num_key_value_heads));
  // Decode with grouped queries runs each KV head's query heads as the rows of one tile
  // of up to 64 (flash-attn's seqlen_q / ngroups swap).
  const int64_t m_blocks = (q_per_kv + 63) / 64;
  auto blocks_of = [](int64_t tokens) {
    return (tokens + kFlashDecodeBlockTokens - 1) / kFlashDecodeBlockTokens;
  };
  std::vector<int64_t> seq_blocks(static_cast<size_t>(seqs));
  int64_t longest = 0;
  for (int64_t i = 0; i < seqs; ++i) {
    const int64_t tokens = attended(i);
    longest = std::max<int64_t>(longest, tokens);
    seq_blocks[static_cast<size_t>(i)] = blocks_of(tokens);
  }
  const int64_t blocks = blocks_of(kv_length > 0 ? kv_length : longest);
  const int64_t splits = FlashDecodeSplits(seqs * kv_heads * m_blocks, sms, blocks);
  const int64_t per_split = (blocks + splits - 1) / splits;  // blocks a split covers
  const int64_t launched = seqs * kv_heads * m_blocks * splits;
  // The whole blocks a CTA streams: its split's share of its sequence's blocks (none for a
  // split past the sequence's end: it exits at once). Grid order: the query-row tile
  // fastest, then the split, then sequence x KV head.
  const int64_t ctas_a_seq = kv_heads * m_blocks * splits;
  auto cta_blocks = [&](int64_t cta) {
    const int64_t seq_blocks_left = seq_blocks[static_cast<size_t>(cta / ctas_a_seq)];
    if (splits == 1) return std::min(seq_blocks_left, per_split);
    const int64_t split = (cta / m_blocks) % splits;
    return std::clamp<int64_t>(seq_blocks_left - split * per_split, 0, per_split);
  };
  // Unsplit, a sequence's CTAs stream as many blocks: one run.
  auto run_length = [&](int64_t cta) {
    return splits == 1 ? ctas_a_seq - cta % ctas_a_seq : m_blocks - cta % m_blocks;
  };
  const CtaRuns busiest = BusiestSmCtaBlocks(sms, launched, cta_blocks, run_length);
  const WaveBlocks w = WaveBlocks::Of(busiest);
  const int64_t waves = w.waves, pair_blocks = w.pair_blocks, single_blocks = w.single_blocks;
  work.cta_bytes_per_token = 2.0 * shape.model.HeadDim() * DTypeBytes(shape.kv_dtype);
  const double block_bytes =
      static_cast<double>(kFlashDecodeBlockTokens) * work.cta_bytes_per_token;
  work.pair_bytes += static_cast<double>(pair_blocks) * block_bytes;
  work.single_bytes += static_cast<double>(single_blocks) * block_bytes;
  work.waves += static_cast<double>(waves);
  work.combine += splits > 1 ? 1.0 : 0.0;
  work.combine_splits += splits > 1 ? static_cast<double>(splits) : 0.0;
}

}  // namespace servelab
