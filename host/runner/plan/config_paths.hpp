// Paths in a config: "~", ${VAR} and "austen:NAME" expanded, relative paths joined to the config's folder, and the
// checks every input file passes before a run reads it.
//
// Thread rules: pure functions (they read the environment and, for input_file_problem, the file's type).
#pragma once
#include <string>

namespace rkv {

/// The asset cache folder ($RIPPLEKV_CACHE or ~/.cache/ripplekv).
std::string asset_cache_dir();

/// Expands "~", ${VAR} (RIPPLEKV_CACHE defaults to asset_cache_dir()) and "austen:NAME" (the fetched novel,
/// <asset cache>/austen/NAME.txt); a relative result is joined to `base_dir` and normalised.
std::string resolve_config_path(const std::string& value, const std::string& base_dir);

/// Why the file `path` cannot serve as an input text file, or "" when it is a readable regular file: missing, a
/// folder, a FIFO or device (which would block or never end), a symbolic-link loop. Never throws.
std::string input_file_problem(const std::string& path);

}  // namespace rkv
