#pragma once
// What `servelab validate` writes and prints of one load's run beside validation.csv and
// validation.md (sim/validation_report.h): the step-by-step comparison and the console's
// line.
#include <string>

#include "core/status.h"
#include "sim/validation.h"

namespace servelab {

// steps_compared.csv, its header first: a row per step the engine executed (its new
// tokens, sequences and the tokens already in their KV cache before it, in the engine's
// order); a mixture of experts' MoE layers' experts run (the mean per layer) as the engine
// counted and as the simulator expects them, empty when not counted; the CUDA graph the
// engine replayed the step as (a column only when the engine says how it ran every step)
// and the one the simulator priced it as, ROWSxCONTEXT_BUCKET ("16x1024"), empty: op by op.
std::string StepsCsv(const LoadValidation& v);

// StepsCsv(v) into `dir`/steps_compared.csv, `dir` committed as OutputDir does (an
// earlier file replaced whole or not at all).
Status WriteStepsCompared(const std::string& dir, const LoadValidation& v);

// One line on stdout per run of a load: its step error and headline end-to-end errors
// (and, for a rerun, how far its engine moved from the first run's).
void PrintLoad(const LoadValidation& v);

}  // namespace servelab
