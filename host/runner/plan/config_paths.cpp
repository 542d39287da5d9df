#include "runner/plan/config_paths.hpp"

#include <cstdlib>
#include <filesystem>

#include "core/errors.hpp"
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
  // ${VAR}, expanded once, left to right: substituted text is never rescanned, so a value holding "${...}" is kept.
  std::string expanded;
  for (size_t from = 0;;) {
    const size_t pos = v.find("${", from);
    const size_t end = pos == std::string::npos ? pos : v.find('}', pos);
    if (end == std::string::npos) {
      expanded += v.substr(from);
      break;
    }
    const std::string name = v.substr(pos + 2, end - pos - 2);
    const char* env = std::getenv(name.c_str());
    std::string rep = env ? env : "";
    if (name == "RIPPLEKV_CACHE" && rep.empty()) rep = asset_cache_dir();
    if (!env && name != "RIPPLEKV_CACHE")
      throw InputError("'" + value + "' names the environment variable ${" + name + "}, which is not set");
    expanded += v.substr(from, pos - from) + rep;
    from = end + 1;
  }
  v = expanded;
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

std::string resolve_config_path(const TomlContext& c, const toml::node& n, const std::string& key,
                                const std::string& value) {
  try {
    return resolve_config_path(value, c.base_dir);
  } catch (const InputError& e) {
    throw InputError(where(c, n, key) + ": " + e.what());
  }
}

}  // namespace rkv
