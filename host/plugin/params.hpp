// Plugin parameters on the host side: user values (from TOML or `--param KEY=VALUE`) validated against a plugin's
// param spec (rkv_param_spec), and the rkv_params getter table handed to create().
//
// Validation errors (rkv::InputError) name the plugin and the key and say what is allowed: an unknown key lists the
// valid keys and the closest match (Levenshtein distance); a wrong type names the expected type; out-of-range
// values give the bounds; a value not among the choices lists them.
#pragma once
#include <ripplekv/plugin.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace rkv {

/// A parameter value before or after validation.
using ParamValue = std::variant<bool, int64_t, double, std::string>;

/// One user-supplied value and where it came from (for messages, e.g. "config.toml:12" or "--param").
struct UserParam {
  std::string key;
  ParamValue value;
  bool from_text = false;  ///< true when the value is command-line text to be parsed by the spec's type
  std::string origin;
};

/// The validated parameters of one plugin instance: every declared param has a value (default or user's).
class ParamSet {
 public:
  /// Validates `user` against `desc`'s spec. Throws rkv::InputError on any unknown key, bad type, range or choice.
  static ParamSet validate(const rkv_plugin_descriptor& desc, const std::vector<UserParam>& user);

  const std::map<std::string, ParamValue>& values() const { return values_; }
  bool is_set(const std::string& key) const { return explicitly_set_.count(key) != 0; }
  /// The rkv_params table pointing at this object; valid while this ParamSet lives and is not moved.
  const rkv_params* abi() const { return &abi_; }
  /// Text form "k=v, ..." in declaration order (for records and cache keys).
  std::string to_string() const;

  ParamSet();
  ParamSet(const ParamSet& other);
  ParamSet& operator=(const ParamSet& other);

 private:
  void bind();
  std::map<std::string, ParamValue> values_;
  std::vector<std::string> order_;
  std::map<std::string, bool> explicitly_set_;
  rkv_params abi_{};
};

/// Checks one of a plugin's own parameter specs (the descriptor, not a user value), so that a broken spec is refused
/// when its library loads rather than at some later use: the name is an identifier ([a-z_][a-z0-9_]*, a TOML key);
/// the type is known; an int or float spec's min and max are not NaN and min <= max; a float default is finite; an
/// int or float default lies within its bounds; a choice has choices and its default is one of them. Returns "" when
/// the spec is sound, else what is wrong naming the parameter and the field ("parameter 'ratio': default_float is
/// NaN"). `s.name` may be null (reported). Pure function; thread-safe.
std::string param_spec_problem(const rkv_param_spec& s);

/// Text of a param value as a user would write it (true, 32, 0.02, "max").
std::string param_value_to_string(const ParamValue& v);
/// Name of a param type ("bool", "int", "float", "choice", "string").
const char* param_type_name(rkv_param_type t);
/// Edit distance between two strings (for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate closest to `word` by edit distance, or "" when `candidates` is empty.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace rkv
