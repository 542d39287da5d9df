#include "runner/plan/config_paths.hpp"

#include <cstdlib>
#include <filesystem>

#include "core/regular_file.hpp"

namespace fs = std::filesystem;

namespace rkv {

std::string asset_cache_dir() {
  if (const char* c = std::getenv("RIPPLEKV_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return (fs::path(home ? home : "/root") / ".cache" / "ripplekv").string();
}

std::string resolve_config_path(const std::string& value, const std::string& base_dir) {
  std::string v = value;
  if (v.rfind("austen:", 0) == 0) return (fs::path(asset_cache_dir()) / "austen" / (v.substr(7) + ".txt")).string();
  // ${VAR}
  for (size_t pos; (pos = v.find("${")) != std::string::npos;) {
    const size_t end = v.find('}', pos);
    if (end == std::string::npos) break;
    const std::string name = v.substr(pos + 2, end - pos - 2);
    const char* env = std::getenv(name.c_str());
    std::string rep = env ? env : "";
    if (name == "RIPPLEKV_CACHE" && rep.empty()) rep = asset_cache_dir();
    v = v.substr(0, pos) + rep + v.substr(end + 1);
  }
  if (!v.empty() && v[0] == '~') {
    const char* home = std::getenv("HOME");
    v = std::string(home ? home : "/root") + v.substr(1);
  }
  fs::path p(v);
  if (p.is_relative() && !base_dir.empty()) p = fs::path(base_dir) / p;
  return p.lexically_normal().string();
}

std::string input_file_problem(const std::string& p) {
  std::string why;
  switch (path_kind(p, &why)) {
    case PathKind::regular: return "";
    case PathKind::missing: return "does not exist";
    case PathKind::error: return "cannot be read: " + why;
    case PathKind::directory: return "is a folder, not a file";
    case PathKind::other: return "is " + describe_special_file(p) + ", not a regular file";
  }
  return "is not a regular file";
}

}  // namespace rkv
