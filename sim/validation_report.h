#pragma once
// validate's reports of a sweep's loads (sim/validation.h): validation.csv for programs,
// validation.md for people.
#include <string>
#include <vector>

#include "sim/validation.h"

namespace servelab {

// validation.csv: one row per load and quantity:
//   load,quantity,statistic,engine,sim,error_pct
// (step_time rows: statistic mape|bias|max|time over all|decode|mixed steps, engine and
// sim those steps' mean measured and predicted times in seconds, `time` the error of
// their summed time (of those means); step_time_decode_B rows mape|bias per range of
// decode batches (StepErrorsByRange) and step_time_decode_after_prefill_k=K rows mape|bias
// per place after the last prefill step (DecodeErrorsAfterPrefill: k=1 ... k=16+), engine
// and sim their steps' mean times; step_time_decode rows autocorrelation, window_min and
// window_max (ErrorWander; error_pct holds the autocorrelation itself, a fraction, and
// the stretches' mean errors in percent), when there is a whole stretch; for a mixture of
// experts whose engine counts its routing, routing_experts and routing_single_row rows
// per kind of step (statistic decode_B or decode_A-B: decode-only steps of that many
// sequences, in power-of-two ranges; mixed: the steps with a prefill chunk), engine the
// counted and sim the expected experts a MoE layer ran (the mean over the steps), and a
// routing_skew row (statistic decode: the Zipf skew that fits the decode-only steps of
// two or more sequences, engine on its counts, sim on its expectations, error_pct sim -
// engine) and routing_locality and routing_favourites rows (statistic chunk: at that
// skew, the locality and favourites that fit the lone prefill chunks,
// FitRoutingLocality), each when there are such steps; when a step ran or was priced as
// a CUDA graph (GraphAgreementOf), decode_graphs rows, statistic same_graph, other_graph,
// priced_op_by_op and graph_not_run, engine the steps the engine replayed as graphs, sim
// how many of them the simulator priced as the same graph, as another, as run op by op,
// and how many the engine ran op by op that it priced as a graph, error_pct empty; with a host
// check, a reference_step row per step and side, statistic before:<label> or
// after:<label> (ReferenceStep::Label), engine its median and sim its predicted time in
// seconds); a load's reruns (LoadValidation::reruns) follow it, under their own labels,
// with the same rows (none of the host check), so a figure's engine column in a rerun's
// rows against the first run's is the engine's run-to-run change, and rows under
// <load>/mean hold the simulated run against the runs' mean (AgainstEngineMean); rows
// under <load>/replay the replay against the engine (StepReplay): schedule rows,
// statistic steps (sim the replay's own steps) and matched (sim those it replayed as the
// engine's before the schedules parted), engine the engine's steps, error_pct the
// difference in percent (both 0: the schedules never parted), and shifted (engine the
// matched steps, sim those that started at another time, error_pct their share in
// percent), then the end-to-end figures, sim the replay's;
// validation.md: the same as tables, with the loads' busy fractions, the decode errors'
// wander, the routing, the CUDA graphs (and the first step where the two differ), per load the host check's steps, attempts, drift and errors, the replay's
// steps, largest error and where it parted, and with reruns a table of the engine's
// run-to-run changes, how many of TTFT, TPOT and E2E at p50 and p99 the simulator's
// error on the first run is within the largest of them, and a table of the simulated run
// against the runs' mean.
std::string ValidationCsv(const std::vector<LoadValidation>& loads);
std::string ValidationMarkdown(const std::string& experiment, const std::vector<LoadValidation>& loads);

}  // namespace servelab
