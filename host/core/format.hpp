// Numbers as reports, tables and records print them: one formatting for every markdown table and JSON record.
// Thread rules: pure functions.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace rkv {

/// `v` with `significant` significant digits (std::setprecision, e.g. fmt(0.012345, 3) = "0.0123"); "nan" for NaN.
std::string fmt(double v, int significant = 4);

/// `v` with `decimals` digits after the point (std::fixed, e.g. fixed_decimals(0.5, 3) = "0.500"); "nan" for NaN.
std::string fixed_decimals(double v, int decimals);

/// `v` as JSON: the number, or null when it is NaN or infinite (JSON has neither).
nlohmann::json num(double v);

}  // namespace rkv
