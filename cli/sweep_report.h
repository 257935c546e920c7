#pragma once
// The combined tables of a sweep: sweep.csv / compare.csv (one row per point) and
// compare.md. Deterministic functions of the sweep and its summaries.
#include <string>
#include <vector>

#include "cli/point_outcome.h"
#include "core/status.h"
#include "driver/sweep_config.h"

namespace servelab {

// One row per point in grid order. Columns: each axis key (the value as written), then
// folder, status (ok | failed), then the main metrics of summary.json: finished,
// rejected, request_throughput (req/s), output_throughput (tok/s), ttft_p50_s,
// ttft_p99_s, tpot_p50_s, tpot_p99_s, e2e_mean_s, e2e_p50_s, e2e_p99_s, queue_mean_s,
// goodput (req/s), slo_attainment, preemptions, gpu_busy_fraction,
// cost_per_million_output_tokens (USD), jain_index (over the clients' weighted service).
// A failed point's metric cells are empty. Fields are quoted (RFC 4180) when they hold
// a comma, a quote, a line break or surrounding spaces; numbers are the shortest text
// that reads back to the same double.
// A CSV field, quoted (RFC 4180) when it holds a comma, a quote, a line break or
// surrounding spaces; a double as the shortest text that reads back to it.
std::string CsvQuote(const std::string& field);
std::string CsvNumber(double value);

// With replicates (any outcome's `replicates` non-empty), a
// `replicates` column follows status, each metric is the mean over a point's replicates
// and is followed by `<metric>_ci95`, the half width of its 95% interval (empty for a
// point of one replicate).
std::string SweepCsv(const Sweep& sweep, const std::vector<PointOutcome>& outcomes);

// A Markdown table, one row per point labelled by `labels[i]`: finished, output tok/s,
// TTFT p50/p99 and TPOT p50/p99 (ms), E2E mean/p99 (s), goodput (req/s), and Jain's
// index when the summaries have one.
std::string CompareTable(const std::vector<std::string>& labels,
                         const std::vector<PointOutcome>& outcomes);

// With replicates (every outcome holding the same N >= 2 replicates, on the same seeds): each policy's paired difference from the first, per metric, as "mean ± half
// width" of the 95% interval of the per-replicate differences, "(n.s.)" when the
// interval holds 0 (not significant). "" for one replicate.
std::string PairedTable(const std::vector<std::string>& labels,
                        const std::vector<PointOutcome>& outcomes);

}  // namespace servelab
