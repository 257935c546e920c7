// `servelab calibrate`: fits per-op time models to measured profiles (sim/calibration.h)
// and says how well they predict those profiles and others.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "cli/calibration_report.h"
#include "cli/commands.h"
#include "cli/plot_script.h"
#include "core/text.h"
#include "driver/csv_writer.h"
#include "driver/gpu_catalog.h"
#include "driver/output_dir.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"
#include "sim/model_file.h"
#include "driver/profile_table.h"

namespace servelab {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int Report(const Status& status) { return ReportFailure("calibrate", status); }

// A row filter "context>1024": key tokens|batch|context|tp, then > >= < <= =, a number.
struct HoldOut {
  std::string text, key, relation;
  int64_t value = 0;
  bool Matches(const ProfileRow& r) const {
    const int64_t v = key == "tokens" ? r.tokens : key == "batch" ? r.batch
                      : key == "context" ? r.context : r.tp;
    if (relation == ">") return v > value;
    if (relation == ">=") return v >= value;
    if (relation == "<") return v < value;
    if (relation == "<=") return v <= value;
    return v == value;
  }
};

StatusOr<HoldOut> ParseHoldOut(const std::string& text) {
  HoldOut h;
  h.text = text;
  const size_t at = text.find_first_of("<>=");
  if (at == std::string::npos || at == 0) {
    return InvalidArgument("--hold-out '" + text + "': expected KEY>VALUE, e.g. context>1024");
  }
  h.key = text.substr(0, at);
  const size_t value_at = text.find_first_not_of("<>=", at);
  h.relation = text.substr(at, value_at == std::string::npos ? std::string::npos : value_at - at);
  const std::vector<std::string> keys = {"tokens", "batch", "context", "tp"};
  if (std::find(keys.begin(), keys.end(), h.key) == keys.end()) {
    return InvalidArgument("--hold-out '" + text + "': key '" + h.key +
                           "' is not one of: tokens, batch, context, tp");
  }
  const std::vector<std::string> relations = {">", ">=", "<", "<=", "="};
  if (std::find(relations.begin(), relations.end(), h.relation) == relations.end() ||
      value_at == std::string::npos) {
    return InvalidArgument("--hold-out '" + text + "': expected one of > >= < <= = then a number");
  }
  try {
    size_t used = 0;
    h.value = std::stoll(text.substr(value_at), &used);
    if (used != text.size() - value_at) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    return InvalidArgument("--hold-out '" + text + "': '" + text.substr(value_at) +
                           "' is not a whole number");
  }
  return h;
}

}  // namespace

constexpr const char* kCalibrateHelp =
    "\nFits, per op, a fixed per-kernel cost plus memory and compute terms with fitted\n"
    "efficiencies (sim/op_model.h) to the profiles (servelab's CSV layout, or Vidur's\n"
    "mlp.csv / attention.csv). Writes MODEL.yaml (use it as `cost_model: {type:\n"
    "calibrated, path: MODEL.yaml}`) and, beside it, calibration.json (per file and per\n"
    "op: MAPE, max error, bias, in percent; one `evaluations` entry per --evaluate file),\n"
    "calibration_points.csv (every row measured and predicted: as the model does, by the\n"
    "form alone, and leave-one-out) and calibration.png\n"
    "(plots/calibration.py; skipped with a note if it cannot run). An efficiency marked\n"
    "* kept the roofline's value: no measurement was bound by that term.\n"
    "Each GEMM weight shape measured at 3 or more row counts also gets a correction, the\n"
    "measured / fitted time by rows (cuBLAS's kernel choices; sim/gemm_corrections.h),\n"
    "kept where it predicts left-out rows better than the form. In sample the per-layer\n"
    "MAPE is then given leave-one-out (each GEMM row corrected from its shape's other\n"
    "rows) beside the form's alone; the corrections apply on the fitted device only.\n"
    "MODEL.yaml ends with `complete: true`: a model file cut short is refused where read.\n"
    "Exit status: 0 success, 2 bad input (a malformed profile, too few points, one profile\n"
    "named twice).\n";

int CalibrateCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab calibrate PROFILE.csv... [--out MODEL.yaml] [options]");
  std::vector<std::string> profiles, evaluate, hold_outs;
  std::string out, device;
  double routing_skew = -1;
  options.add_options()
      ("help,h", "show this help")
      ("out", po::value<std::string>(&out),
       "the model file to write (its folder gets the rest), or a folder to write MODEL.yaml in "
       "(default: results/<first profile's name>/MODEL.yaml)")
      ("evaluate", po::value<std::vector<std::string>>(&evaluate)->multitoken(),
       "profiles to predict with the fit (other shapes, TP degrees, GPUs)")
      ("device", po::value<std::string>(&device),
       "the GPU of Vidur files whose name does not tell it (a catalog name)")
      ("hold-out", po::value<std::vector<std::string>>(&hold_outs)->composing(),
       "keep the profiles' rows matching KEY>VALUE (tokens, batch, context, tp; > >= < <= =) "
       "out of the fit and evaluate them apart: how the fit extrapolates (repeatable)")
      ("routing-skew", po::value<double>(&routing_skew),
       "a mixture of experts' routing skew (0-4; 0: uniform) in place of the one its profile's "
       "decode rows fit: a serving run's, which `servelab validate` fits on the engine's decode "
       "batches; the locality and favourites are then fitted at it")
      ("no-plots", "do not draw calibration.png");
  po::options_description hidden;
  hidden.add_options()("profile", po::value<std::vector<std::string>>(&profiles));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("profile", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "servelab calibrate: " << Printable(e.what()) << "\n\n" << options;
    return kExitBadInput;
  }
  if (vm.count("help")) {
    std::cout << options << kCalibrateHelp;
    return kExitOk;
  }
  if (profiles.empty()) return Report(InvalidArgument("no PROFILE.csv given"));
  // No --out: results/<the first profile's name>/MODEL.yaml, as `profile` writes
  // results/<name>-profile.csv and `run` its results/<name>/.
  if (out.empty()) out = (fs::path("results") / fs::path(profiles.front()).stem() / "MODEL.yaml").string();
  // Checked when given, whether or not a file needs it (a servelab profile names its own).
  if (vm.count("device")) {
    if (auto gpu = DeviceSpec(device); !gpu.ok()) {
      return Report(InvalidArgument("--device: " + gpu.status().message()));
    }
  }
  // The outputs' place, checked before anything is read or fitted: the model file and,
  // beside it, calibration.json, calibration_points.csv and calibration.png.
  // --out naming a folder (one that exists, or a path ending in '/'), as `run` and
  // `validate` take theirs: the model is MODEL.yaml in it.
  fs::path out_path(out);
  if (std::error_code ec; out.back() == '/' || fs::is_directory(out_path, ec)) out_path /= "MODEL.yaml";
  const std::string dir = out_path.has_parent_path() ? out_path.parent_path().string() : ".";
  const std::string model_name = out_path.filename().string();
  for (const char* beside : {"calibration.json", "calibration_points.csv", "calibration.png"}) {
    if (model_name == beside) {
      return Report(InvalidArgument("--out " + out + ": " + beside +
                                    " is written beside the model; name the model otherwise"));
    }
  }
  const std::vector<std::string> outputs = {model_name, "calibration.json", "calibration_points.csv",
                                            "calibration.png"};
  std::vector<std::string> inputs = profiles;
  inputs.insert(inputs.end(), evaluate.begin(), evaluate.end());
  // One file named twice (by another path too): its rows would weigh twice in the fit, or
  // a fitted profile's "evaluation" would be its in-sample error under another name (but
  // for its held-out rows).
  for (size_t j = 1; j < inputs.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      std::error_code ec;
      if (!fs::equivalent(inputs[i], inputs[j], ec) || ec) continue;
      const bool fitted = j < profiles.size(), evaluated = i >= profiles.size();
      // With --hold-out, a fitted file evaluated whole is its held-out rows and the rest.
      if (!fitted && !evaluated && !hold_outs.empty()) continue;
      return Report(InvalidArgument(
          inputs[j] + ": the same file as " + inputs[i] +
          (fitted      ? ": its rows would weigh twice in the fit"
           : evaluated ? ": given to --evaluate twice"
                       : ": a fitted profile (its in-sample error is reported already)")));
    }
  }
  if (Status places = CheckOutputPlaces(dir, outputs, inputs); !places.ok()) return Report(places);
  auto folder = OutputDir::Open(dir);
  if (!folder.ok()) return Report(folder.status());
  auto model_out = (*folder)->Stream(model_name);
  if (!model_out.ok()) return Report(model_out.status());
  auto json_out = (*folder)->Stream("calibration.json");
  if (!json_out.ok()) return Report(json_out.status());
  auto points_out = (*folder)->Stream("calibration_points.csv");
  if (!points_out.ok()) return Report(points_out.status());

  std::vector<HoldOut> filters;
  for (const std::string& text : hold_outs) {
    auto h = ParseHoldOut(text);
    if (!h.ok()) return Report(h.status());
    filters.push_back(*h);
  }
  std::vector<ProfileTable> tables, held;
  // Configurations measured more than once weigh once (driver/profile_table.h).
  const auto note_merged = [](const ProfileTable& t) {
    if (t.merged_rows > 0) {
      std::fprintf(stderr,
                   "servelab calibrate: note: %s: %lld measurements (an op at a configuration) repeat "
                   "an earlier one's; each counts once, at their mean\n",
                   t.path.c_str(), static_cast<long long>(t.merged_rows));
    }
  };
  for (const std::string& path : profiles) {
    auto table = ReadProfile(path, device);
    if (!table.ok()) return Report(table.status());
    note_merged(*table);
    if (!filters.empty()) {
      ProfileTable out = *table;
      out.rows.clear();
      std::string labels;
      for (const HoldOut& h : filters) labels += (labels.empty() ? "" : ", ") + h.text;
      out.path = path + " [held out: " + labels + "]";
      std::vector<ProfileRow> kept;
      for (ProfileRow& r : table->rows) {
        const bool hold = std::any_of(filters.begin(), filters.end(),
                                      [&r](const HoldOut& h) { return h.Matches(r); });
        (hold ? out.rows : kept).push_back(std::move(r));
      }
      table->rows = std::move(kept);
      if (table->rows.empty()) {
        return Report(InvalidArgument(path + ": --hold-out keeps every row out of the fit"));
      }
      if (!out.rows.empty()) held.push_back(std::move(out));
    }
    // A profile taken while the host moved: the fit carries that (driver/profile_table.h).
    if (const ProfileSpread spread = SpreadOf(table->rows); spread.median_pct > kNoisyProfileSpreadPct) {
      std::fprintf(stderr,
                   "servelab calibrate: note: %s: its whole steps' p10-p90 spread is a median %.1f%% of a "
                   "row (above %.0f%%): the host moved while it was profiled, and this fit carries that\n",
                   path.c_str(), spread.median_pct, kNoisyProfileSpreadPct);
    }
    tables.push_back(std::move(table).value());
  }
  std::vector<ProfileTable> others = std::move(held);
  for (const std::string& path : evaluate) {
    auto table = ReadProfile(path, device);
    if (!table.ok()) return Report(table.status());
    note_merged(*table);
    others.push_back(std::move(table).value());
  }
  FitOptions fit;
  if (vm.count("routing-skew")) {
    if (!(routing_skew >= 0 && routing_skew <= 4)) {
      return Report(InvalidArgument("--routing-skew " + FormatDouble(routing_skew) + ": must be in [0, 4]"));
    }
    fit.routing_skew = routing_skew;
  }
  auto model = FitProfiles(tables, fit);
  if (!model.ok()) return Report(model.status());
  // Decode steps assumed to have run as graphs (StepGraphOf: a profile that does not
  // record how its steps ran), in the fitted profiles and those evaluated.
  const auto assumes_graphs = [&](const ProfileTable& t) {
    return std::any_of(t.rows.begin(), t.rows.end(), [&](const ProfileRow& r) {
      if (r.op != "step" || r.GraphRecorded()) return false;
      const StatusOr<GpuSpec> gpu = FindGpu(r.device);
      return gpu.ok() && StepGraphOf(*model, *gpu, r).has_value();
    });
  };
  for (const std::vector<ProfileTable>* set : {&tables, &others}) {
    for (const ProfileTable& t : *set) {
      if (!assumes_graphs(t)) continue;
      std::fprintf(stderr,
                   "servelab calibrate: note: %s does not record how its decode steps ran: taken as CUDA "
                   "graphs without the runner's limits (max_num_seqs, the context served)\n",
                   t.path.c_str());
    }
  }
  if (fit.routing_skew && model->routing.empty()) {
    return Report(InvalidArgument("--routing-skew: no profile row counted a mixture of experts' routing "
                                  "(moe_mlp rows with experts_run, from `servelab profile` of a MoE model)"));
  }

  std::vector<Evaluation> fitted, evaluations;
  ProfileTable everything;
  everything.path = "(all fitted profiles)";
  for (const ProfileTable& t : tables) {
    everything.rows.insert(everything.rows.end(), t.rows.begin(), t.rows.end());
    auto e = Evaluate(*model, t);
    if (!e.ok()) return Report(e.status());
    fitted.push_back(std::move(e).value());
  }
  auto in_sample = Evaluate(*model, everything);
  if (!in_sample.ok()) return Report(in_sample.status());
  for (const ProfileTable& t : others) {
    auto e = Evaluate(*model, t);
    if (!e.ok()) return Report(e.status());
    evaluations.push_back(std::move(e).value());
  }

  **model_out << CalibratedModelYaml(*model, in_sample->ops_form);
  **json_out << CalibrationJson(out_path.string(), *model, *in_sample, fitted, evaluations).dump(2) << "\n";
  **points_out << CalibrationPointsCsv(fitted, evaluations);
  if (Status written = (*folder)->Commit(); !written.ok()) return Report(written);

  std::printf("fit on %s (%zu file%s, %zu rows)\n", model->device.c_str(), tables.size(),
              tables.size() == 1 ? "" : "s", everything.rows.size());
  PrintCalibration(*model, *in_sample, fitted, evaluations);
  // How the fitted profiles' decode steps ran, where they record it (graph_rows): what the
  // decode step overhead above was fitted from.
  for (const ProfileTable& t : tables) {
    int64_t graphs = 0, padded = 0, eager = 0;
    for (const ProfileRow& r : t.rows) {
      if (r.op != "step" || r.tokens != r.batch || !r.GraphRecorded()) continue;
      if (r.graph_rows == 0) {
        ++eager;
      } else {
        ++graphs;
        if (r.graph_rows > r.batch) ++padded;
      }
    }
    if (graphs + eager == 0 || t.rows.front().device == "cpu") continue;
    std::printf("decode steps of %s, as recorded: %lld ran as CUDA graphs (%lld padded to the graph's rows), %lld op by op\n",
                t.path.c_str(), static_cast<long long>(graphs), static_cast<long long>(padded),
                static_cast<long long>(eager));
  }
  std::printf("model: %s\n", out_path.string().c_str());
  RemoveStalePlot((fs::path(dir) / "calibration.png").string());
  if (!vm.count("no-plots")) {
    RunPlotScript("calibrate", "calibration.py",
                  {(fs::path(dir) / "calibration_points.csv").string(), "--out",
                   (fs::path(dir) / "calibration.png").string()});
  }
  return kExitOk;
}

}  // namespace servelab
