// `--set KEY=VALUE`: changing one config value from the command line instead of copying the config (run, validate,
// analyze, profile). KEY is a TOML dotted key (`budget.fraction`, `tasks.ruler.examples`, `sweep."budget.fraction"`),
// VALUE a TOML value (`0.25`, `true`, `"snapkv"`, `[0.1, 0.2]`, `{ window = 32 }`); a bare word that is not TOML
// (`snapkv`) is taken as a string. Each override replaces the key's value (creating its tables), later ones win; the
// effective config is then validated like a file (unknown keys and wrong types are refused naming the key and
// "--set"), and a run records it in config.toml.
//
// Thread rules: pure functions.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "runner/plan/toml_reader.hpp"

namespace rkv {

/// Applies `overrides` ("KEY=VALUE" each) to `root` in order. Returns the dotted keys it set (for messages).
/// rkv::InputError "--set 'KEY=VALUE': ..." when an override has no '=', an empty key, a key or value that is not
/// TOML, or a key whose path crosses a value that is not a table (e.g. `budget.fraction.x`).
std::set<std::string> apply_config_overrides(toml::table& root, const std::vector<std::string>& overrides);

/// The config text a run records for `root` after `overrides`: a comment naming `origin` and the overrides, then the
/// effective table as TOML. "" when there are no overrides (the file's own text is recorded then).
std::string effective_config_text(const toml::table& root, const std::string& origin,
                                  const std::vector<std::string>& overrides);

/// `text` with every line break replaced by a space: a comment line that stays one line whatever a file name or an
/// override's value holds (a newline in one would start TOML of its own in a recorded config.toml).
std::string one_line(std::string text);

/// The dotted keys whose values differ between two configs (TOML texts; [sweep] ignored), each as
/// "key: <then> then, <now> now" (or "... then, unset now", "unset then, ... now"), in key order, at most `limit`
/// (then "and N more"). Empty
/// when either text does not parse. For --resume's refusal: the keys that changed, not only two hashes.
std::vector<std::string> changed_config_keys(const std::string& then_text, const std::string& now_text,
                                             size_t limit = 10);

}  // namespace rkv
