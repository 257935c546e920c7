#include "cli/point_outcome.h"

namespace servelab {

nlohmann::ordered_json PointOutcome::ToJson() const {
  nlohmann::ordered_json j;
  j["ok"] = ok();
  if (!ok()) {
    j["code"] = static_cast<int>(status.code());
    j["message"] = status.message();
    return j;
  }
  j["summary"] = summary;
  j["replicates"] = nlohmann::ordered_json::array();
  for (const auto& r : replicates) j["replicates"].push_back(r);
  return j;
}

PointOutcome PointOutcome::FromJson(const nlohmann::ordered_json& json) {
  PointOutcome o;
  if (!json.is_object() || !json.contains("ok") || !json["ok"].is_boolean()) {
    o.status = Internal("a point's outcome is not in servelab's form");
    return o;
  }
  if (!json["ok"].get<bool>()) {
    int code = json.value("code", static_cast<int>(StatusCode::kInternal));
    if (code < static_cast<int>(StatusCode::kInvalidArgument) ||
        code > static_cast<int>(StatusCode::kInternal)) {
      code = static_cast<int>(StatusCode::kInternal);
    }
    o.status = Status(static_cast<StatusCode>(code), json.value("message", std::string("failed")));
    return o;
  }
  o.status = Status::Ok();
  o.summary = json.value("summary", nlohmann::ordered_json());
  if (json.contains("replicates") && json["replicates"].is_array()) {
    for (const auto& r : json["replicates"]) o.replicates.push_back(r);
  }
  return o;
}

PointOutcome OutcomeOf(const std::vector<StatusOr<RunSummary>>& runs) {
  PointOutcome o;
  for (const auto& run : runs) {
    if (!run.ok()) {
      o.status = run.status();
      return o;
    }
  }
  o.status = Status::Ok();
  o.summary = runs[0]->ToJson();
  if (runs.size() > 1) {
    for (const auto& run : runs) o.replicates.push_back(run->ToJson());
  }
  return o;
}

}  // namespace servelab
