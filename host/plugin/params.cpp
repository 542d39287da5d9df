#include "plugin/params.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/errors.hpp"

namespace rkv {

const char* param_type_name(rkv_param_type t) {
  switch (t) {
    case RKV_PARAM_BOOL: return "bool";
    case RKV_PARAM_INT: return "int";
    case RKV_PARAM_FLOAT: return "float";
    case RKV_PARAM_CHOICE: return "choice";
    case RKV_PARAM_STRING: return "string";
  }
  return "unknown";
}

std::string param_value_to_string(const ParamValue& v) {
  std::ostringstream os;
  if (auto b = std::get_if<bool>(&v)) os << (*b ? "true" : "false");
  else if (auto i = std::get_if<int64_t>(&v)) os << *i;
  else if (auto d = std::get_if<double>(&v)) os << *d;
  else os << '"' << std::get<std::string>(v) << '"';
  return os.str();
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

namespace {

std::vector<const rkv_param_spec*> specs_of(const rkv_plugin_descriptor& desc) {
  std::vector<const rkv_param_spec*> out;
  if (desc.struct_size < offsetof(rkv_plugin_descriptor, params) + sizeof(desc.params) || !desc.params) return out;
  for (const rkv_param_spec* const* p = desc.params; *p; ++p) out.push_back(*p);
  return out;
}

ParamValue default_of(const rkv_param_spec& s) {
  switch (s.type) {
    case RKV_PARAM_BOOL: return s.default_bool != 0;
    case RKV_PARAM_INT: return s.default_int;
    case RKV_PARAM_FLOAT: return s.default_float;
    default: return std::string(s.default_string ? s.default_string : "");
  }
}

/// A bound as the message shows it: an int param's (or any whole number's below 2^53) as an integer, 1048576 rather
/// than 1.04858e+06; other floats with up to 6 significant digits.
std::string bound_text(double v, bool integer) {
  if ((integer || std::fabs(v) < 9007199254740992.0) && std::isfinite(v) && v == std::floor(v) &&
      std::fabs(v) < 9.2e18)
    return std::to_string(static_cast<long long>(v));
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string range_text(const rkv_param_spec& s) {
  const bool integer = s.type == RKV_PARAM_INT;
  std::ostringstream os;
  if (s.has_min && s.has_max) os << "between " << bound_text(s.min, integer) << " and " << bound_text(s.max, integer);
  else if (s.has_min) os << ">= " << bound_text(s.min, integer);
  else if (s.has_max) os << "<= " << bound_text(s.max, integer);
  return os.str();
}

std::vector<std::string> choices_of(const rkv_param_spec& s) {
  std::vector<std::string> out;
  if (s.choices)
    for (const char* const* c = s.choices; *c; ++c) out.emplace_back(*c);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

/// Converts and checks one user value against its spec.
ParamValue convert(const rkv_plugin_descriptor& desc, const rkv_param_spec& s, const UserParam& u) {
  const std::string where = std::string("plugin '") + desc.id + "', parameter '" + s.name + "'" +
                            (u.origin.empty() ? "" : " (" + u.origin + ")");
  auto bad_type = [&]() -> InputError {
    return InputError(where + ": expected " + param_type_name(s.type) + ", got " + param_value_to_string(u.value));
  };
  ParamValue v = u.value;
  if (u.from_text) {
    const std::string& t = std::get<std::string>(u.value);
    char* end = nullptr;
    errno = 0;
    if (s.type == RKV_PARAM_BOOL) {
      if (t == "true" || t == "1") v = true;
      else if (t == "false" || t == "0") v = false;
      else throw bad_type();
    } else if (s.type == RKV_PARAM_INT) {
      const long long x = std::strtoll(t.c_str(), &end, 10);
      if (t.empty() || *end || errno) throw bad_type();
      v = static_cast<int64_t>(x);
    } else if (s.type == RKV_PARAM_FLOAT) {
      const double x = std::strtod(t.c_str(), &end);
      if (t.empty() || *end || errno) throw bad_type();
      v = x;
    }
  }
  switch (s.type) {
    case RKV_PARAM_BOOL:
      if (!std::holds_alternative<bool>(v)) throw bad_type();
      return v;
    case RKV_PARAM_INT: {
      if (!std::holds_alternative<int64_t>(v)) throw bad_type();
      const double x = static_cast<double>(std::get<int64_t>(v));
      if ((s.has_min && x < s.min) || (s.has_max && x > s.max))
        throw InputError(where + ": " + param_value_to_string(v) + " is out of range; allowed: " + range_text(s));
      return v;
    }
    case RKV_PARAM_FLOAT: {
      if (std::holds_alternative<int64_t>(v)) v = static_cast<double>(std::get<int64_t>(v));
      if (!std::holds_alternative<double>(v)) throw bad_type();
      const double x = std::get<double>(v);
      if (!std::isfinite(x)) throw InputError(where + ": must be finite");
      if ((s.has_min && x < s.min) || (s.has_max && x > s.max))
        throw InputError(where + ": " + param_value_to_string(v) + " is out of range; allowed: " + range_text(s));
      return v;
    }
    case RKV_PARAM_CHOICE: {
      if (!std::holds_alternative<std::string>(v)) throw bad_type();
      const auto choices = choices_of(s);
      if (std::find(choices.begin(), choices.end(), std::get<std::string>(v)) == choices.end())
        throw InputError(where + ": " + param_value_to_string(v) + " is not one of: " + join(choices));
      return v;
    }
    default:
      if (!std::holds_alternative<std::string>(v)) throw bad_type();
      return v;
  }
}

// ---- the rkv_params getter table -------------------------------------------------------------------------------

const ParamValue* lookup(const void* ctx, const char* name) {
  const auto& values = static_cast<const ParamSet*>(ctx)->values();
  auto it = name ? values.find(name) : values.end();
  return it == values.end() ? nullptr : &it->second;
}

rkv_status get_bool(const void* ctx, const char* name, int32_t* out) {
  const ParamValue* v = lookup(ctx, name);
  if (!v || !out || !std::holds_alternative<bool>(*v)) return RKV_ERROR_INVALID_ARGUMENT;
  *out = std::get<bool>(*v) ? 1 : 0;
  return RKV_OK;
}
rkv_status get_int(const void* ctx, const char* name, int64_t* out) {
  const ParamValue* v = lookup(ctx, name);
  if (!v || !out || !std::holds_alternative<int64_t>(*v)) return RKV_ERROR_INVALID_ARGUMENT;
  *out = std::get<int64_t>(*v);
  return RKV_OK;
}
rkv_status get_float(const void* ctx, const char* name, double* out) {
  const ParamValue* v = lookup(ctx, name);
  if (!v || !out || !std::holds_alternative<double>(*v)) return RKV_ERROR_INVALID_ARGUMENT;
  *out = std::get<double>(*v);
  return RKV_OK;
}
rkv_status get_string(const void* ctx, const char* name, const char** out) {
  const ParamValue* v = lookup(ctx, name);
  if (!v || !out || !std::holds_alternative<std::string>(*v)) return RKV_ERROR_INVALID_ARGUMENT;
  *out = std::get<std::string>(*v).c_str();
  return RKV_OK;
}
int32_t get_is_set(const void* ctx, const char* name) {
  return name && static_cast<const ParamSet*>(ctx)->is_set(name) ? 1 : 0;
}

}  // namespace

std::string param_spec_problem(const rkv_param_spec& s) {
  if (!s.name || !*s.name) return "a parameter has no name";
  const std::string name = s.name;
  const std::string where = "parameter '" + name + "': ";
  const bool identifier =
      (std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
      });
  if (!identifier) return where + "name is not an identifier ([a-z_][a-z0-9_]*, a TOML key)";
  switch (s.type) {
    case RKV_PARAM_BOOL:
    case RKV_PARAM_STRING: return "";
    case RKV_PARAM_CHOICE: {
      const auto choices = choices_of(s);
      if (choices.empty()) return where + "choices is empty (a choice without choices)";
      const std::string d = s.default_string ? s.default_string : "";
      if (std::find(choices.begin(), choices.end(), d) == choices.end())
        return where + "default_string \"" + d + "\" is not one of its choices: " + join(choices);
      return "";
    }
    case RKV_PARAM_INT:
    case RKV_PARAM_FLOAT: break;
    default: return where + "type " + std::to_string(s.type) + " is unknown";
  }
  if (s.has_min && std::isnan(s.min)) return where + "min is NaN";
  if (s.has_max && std::isnan(s.max)) return where + "max is NaN";
  if (s.has_min && s.has_max && s.min > s.max)
    return where + "min (" + param_value_to_string(s.min) + ") is greater than max (" + param_value_to_string(s.max) +
           ")";
  const bool is_float = s.type == RKV_PARAM_FLOAT;
  const char* field = is_float ? "default_float" : "default_int";
  const double d = is_float ? s.default_float : static_cast<double>(s.default_int);
  if (!std::isfinite(d)) return where + field + " is " + (std::isnan(d) ? "NaN" : "infinite");
  if ((s.has_min && d < s.min) || (s.has_max && d > s.max))
    return where + field + " " + (is_float ? param_value_to_string(d) : std::to_string(s.default_int)) +
           " is outside its range (" + range_text(s) + ")";
  return "";
}

ParamSet::ParamSet() { bind(); }
ParamSet::ParamSet(const ParamSet& o) : values_(o.values_), order_(o.order_), explicitly_set_(o.explicitly_set_) { bind(); }
ParamSet& ParamSet::operator=(const ParamSet& o) {
  values_ = o.values_;
  order_ = o.order_;
  explicitly_set_ = o.explicitly_set_;
  bind();
  return *this;
}

void ParamSet::bind() {
  abi_ = rkv_params{sizeof(rkv_params), this, &get_bool, &get_int, &get_float, &get_string, &get_is_set};
}

ParamSet ParamSet::validate(const rkv_plugin_descriptor& desc, const std::vector<UserParam>& user) {
  ParamSet set;
  const auto specs = specs_of(desc);
  std::vector<std::string> names;
  for (const auto* s : specs) {
    names.emplace_back(s->name);
    set.order_.emplace_back(s->name);
    set.values_[s->name] = default_of(*s);
  }
  for (const UserParam& u : user) {
    auto it = std::find_if(specs.begin(), specs.end(), [&](const rkv_param_spec* s) { return u.key == s->name; });
    if (it == specs.end()) {
      std::string msg = std::string("plugin '") + desc.id + "' has no parameter '" + u.key + "'" +
                        (u.origin.empty() ? "" : " (" + u.origin + ")");
      if (names.empty()) {
        msg += "; it takes no parameters";
      } else {
        msg += "; valid keys: " + join(names) + "; did you mean '" + closest_match(u.key, names) + "'?";
      }
      throw InputError(msg);
    }
    set.values_[u.key] = convert(desc, **it, u);
    set.explicitly_set_[u.key] = true;
  }
  return set;
}

std::string ParamSet::to_string() const {
  std::string s;
  for (const auto& k : order_) s += (s.empty() ? "" : ", ") + k + "=" + param_value_to_string(values_.at(k));
  return s;
}

}  // namespace rkv
