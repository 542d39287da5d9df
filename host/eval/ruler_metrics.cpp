#include "eval/ruler_metrics.hpp"

#include "core/errors.hpp"
#include "eval/metrics_python_text.hpp"

namespace rkv {

namespace {
/// [lower(r) in lower(pred)] for each reference, after checking there is one.
std::vector<bool> found_in(const std::string& prediction, const std::vector<std::string>& references, const char* what) {
  if (references.empty()) throw InputError(std::string(what) + ": a sample needs at least one reference");
  const std::string pred = pytext::python_lower(prediction);
  std::vector<bool> found;
  for (const auto& r : references) found.push_back(pred.find(pytext::python_lower(r)) != std::string::npos);
  return found;
}
}  // namespace

double ruler_string_match_all(const std::string& prediction, const std::vector<std::string>& references) {
  const std::vector<bool> found = found_in(prediction, references, "ruler string_match_all");
  double hits = 0;
  for (bool f : found) hits += f ? 1.0 : 0.0;
  return hits / static_cast<double>(found.size());
}

double ruler_string_match_part(const std::string& prediction, const std::vector<std::string>& references) {
  const std::vector<bool> found = found_in(prediction, references, "ruler string_match_part");
  for (bool f : found)
    if (f) return 1.0;
  return 0.0;
}

}  // namespace rkv
