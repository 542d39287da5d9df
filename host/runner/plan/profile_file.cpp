#include "runner/plan/profile_file.hpp"

#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.hpp"
#include "core/regular_file.hpp"

namespace rkv {

ProfileFile read_profile_file(const std::string& path) {
  const std::string text = read_regular_file(path, "profile file");  // a FIFO or a device is refused without blocking
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("profile file '" + path + "': not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("s") || !j["s"].is_array())
    throw InputError("profile file '" + path + "': expected a JSON object with an array \"s\"");
  ProfileFile p;
  for (size_t i = 0; i < j["s"].size(); ++i) {
    const auto& v = j["s"][i];
    if (!v.is_number())
      throw InputError("profile file '" + path + "': s[" + std::to_string(i) + "] is not a finite number (" +
                       v.dump() + ")");
    const double x = v.get<double>();
    if (!std::isfinite(x))
      throw InputError("profile file '" + path + "': s[" + std::to_string(i) + "] is not finite");
    p.s.push_back(x);
  }
  if (p.s.empty()) throw InputError("profile file '" + path + "': \"s\" is empty");
  if (j.contains("layers")) {
    if (!j["layers"].is_array() || j["layers"].size() != p.s.size())
      throw InputError("profile file '" + path + "': \"layers\" must be an array as long as \"s\" (" +
                       std::to_string(p.s.size()) + ")");
    // One entry per layer, in layer order: with as many entries as "s", ascending unique indices in [0, n) are
    // exactly 0 .. n - 1. Anything else would be applied by position, silently: refused.
    const auto n = static_cast<int64_t>(p.s.size());
    for (size_t i = 0; i < j["layers"].size(); ++i) {
      const auto& v = j["layers"][i];
      const std::string at = "profile file '" + path + "': \"layers\"[" + std::to_string(i) + "]";
      if (!v.is_number_integer()) throw InputError(at + " is not an integer (" + v.dump() + ")");
      const int64_t layer = v.get<int64_t>();
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        throw InputError(at + " = " + v.dump() + " is outside 0.." + std::to_string(n - 1));
      if (layer < 0 || layer >= n)
        throw InputError(at + " = " + std::to_string(layer) + " is outside 0.." + std::to_string(n - 1) + " (one entry per layer, as in \"s\")");
      if (!p.layers.empty() && layer == p.layers.back())
        throw InputError(at + " repeats layer " + std::to_string(layer) + " (each layer once)");
      if (!p.layers.empty() && layer < p.layers.back())
        throw InputError(at + " = " + std::to_string(layer) + " follows layer " + std::to_string(p.layers.back()) +
                         " (layers must be ascending)");
      p.layers.push_back(layer);
    }
  } else {
    for (size_t i = 0; i < p.s.size(); ++i) p.layers.push_back(static_cast<int64_t>(i));
  }
  return p;
}

std::vector<double> parse_sensitivity_list(const std::string& text, const std::string& what) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  size_t index = 0;
  while (std::getline(ss, item, ',')) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    const std::string t = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(t.c_str(), &end);
    if (t.empty() || *end || errno || !std::isfinite(x))
      throw InputError(what + ": item " + std::to_string(index) + " ('" + t + "') is not a finite number");
    out.push_back(x);
    ++index;
  }
  if (out.empty()) throw InputError(what + ": no values given");
  return out;
}

}  // namespace rkv
