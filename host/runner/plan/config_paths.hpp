// Paths in a config: "~", ${VAR} and "austen:NAME" expanded, relative paths joined to the config's folder, and the
// checks every input file passes before a run reads it.
//
// Thread rules: pure functions (they read the environment and, for input_file_problem, the file's type).
#pragma once
#include <string>

#include "runner/plan/toml_reader.hpp"

namespace rkv {

/// The asset cache folder ($RIPPLEKV_CACHE or ~/.cache/ripplekv).
std::string asset_cache_dir();

/// Expands "~", ${VAR} (RIPPLEKV_CACHE defaults to asset_cache_dir()) and "austen:NAME" (the fetched novel,
/// <asset cache>/austen/NAME.txt); a relative result is joined to `base_dir` and normalised. Each ${VAR} is expanded
/// once (the substituted text is not rescanned). Errors: rkv::InputError naming the variable when one other than
/// RIPPLEKV_CACHE is not set.
std::string resolve_config_path(const std::string& value, const std::string& base_dir);

/// resolve_config_path for the value of `key` at node `n` of config `c`: its errors start with where(c, n, key).
std::string resolve_config_path(const TomlContext& c, const toml::node& n, const std::string& key,
                                const std::string& value);

/// Why the file `path` cannot serve as an input text file, or "" when it is a readable regular file: missing, a
/// folder, a FIFO or device (which would block or never end), a symbolic-link loop. Never throws.
std::string input_file_problem(const std::string& path);

}  // namespace rkv
