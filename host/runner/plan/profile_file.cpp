#include "runner/plan/profile_file.hpp"

#include <cerrno>
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
    for (const auto& v : j["layers"]) {
      if (!v.is_number_integer()) throw InputError("profile file '" + path + "': \"layers\" entries must be integers");
      p.layers.push_back(v.get<int64_t>());
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
