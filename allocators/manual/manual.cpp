// Manual allocator: per-layer budgets written down by the user (kvpress PerLayerCompressionPress).
//
// Source: kvpress 0.5.5, kvpress/presses/per_layer_compression_press.py: layer l keeps int(T (1 - r_l)) positions for
// a list of compression ratios r_l (share removed), one per model layer.
//
// `values` lists one number per compressible layer (rank in A), comma-separated; `unit` says what they are:
//   compression_ratio  r_l in [0, 1), kvpress's share removed:  x_l = (1 - r_l) T
//   keep_fraction      f_l in (0, 1], the share kept:            x_l = f_l T
//   tokens             n_l >= 0 positions kept:                  x_l = min(n_l, T)
// The budgets are x scaled to the run's total: b_l = B x_l / sum x (the host then integerizes: water-filling at T,
// largest remainder, ties to the lower layer, every layer at least 1). When sum x differs from B (by more than 1e-6
// relative) a warning says so: to get kvpress's exact counts set the run's budget to the list's total, e.g. for
// ratios r_l `[budget] fraction = mean_l(1 - r_l)` (then B = sum x up to the rounding of B itself). kvpress truncates
// each layer's count (int()); the host rounds by largest remainder, so a layer may keep one position more than
// kvpress's. An empty `values` (the default) gives every layer the same share: b_l = B / |A| (uniform).
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

/// "0.5, 0.3,0.2" -> {0.5, 0.3, 0.2}; throws Error(INVALID_ARGUMENT) naming the bad entry.
std::vector<double> parse_list(const std::string& s) {
  std::vector<double> out;
  if (s.find_first_not_of(" \t") == std::string::npos) return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    const std::string t = a == std::string::npos ? std::string() : item.substr(a, b - a + 1);
    char* end = nullptr;
    const double v = t.empty() ? NAN : std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v))
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "manual: values entry " + std::to_string(out.size()) + " ('" + t +
                                                  "') is not a finite number");
    out.push_back(v);
  }
  return out;
}

class Manual final : public rkv::sdk::Allocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.manual", RKV_KIND_ALLOCATOR, "1.0.0",
                                "Per-layer budgets from a list (kvpress PerLayerCompressionPress), scaled to B")
        .param(Param::String("values", "",
                             "one number per compressible layer, comma-separated, in `unit`; empty: uniform"))
        .param(Param::Choice("unit", "compression_ratio", {"compression_ratio", "keep_fraction", "tokens"},
                             "what values are: kvpress share removed r_l, share kept f_l, or positions kept n_l"));
  }

  Manual(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : values_(parse_list(p.get_string("values"))), unit_(p.get_string("unit")) {
    for (size_t i = 0; i < values_.size(); ++i) {
      const double v = values_[i];
      const bool ok = unit_ == "compression_ratio" ? (v >= 0 && v < 1)
                      : unit_ == "keep_fraction"   ? (v > 0 && v <= 1)
                                                   : v >= 0;
      if (!ok)
        throw Error(RKV_ERROR_INVALID_ARGUMENT,
                    "manual: values entry " + std::to_string(i) + " = " + std::to_string(v) + " is outside " +
                        (unit_ == "compression_ratio" ? "[0, 1)" : unit_ == "keep_fraction" ? "(0, 1]" : "[0, inf)") +
                        " for unit " + unit_);
    }
  }

  /// budgets [n_layers] float64 = B x_l / sum x (see the file comment). Throws Error(INVALID_ARGUMENT) when the list
  /// has another length than n_layers or sums to 0. Warns when sum x differs from B. Thread rule: never called
  /// concurrently on one instance.
  void allocate(const rkv::sdk::AllocationRequest& r, double* budgets, rkv::sdk::Diagnostics& diag) override {
    const double B = static_cast<double>(r.budget_total), T = static_cast<double>(r.prefix_tokens);
    if (values_.empty()) {
      for (int64_t l = 0; l < r.n_layers; ++l) budgets[l] = B / static_cast<double>(r.n_layers);
      return;
    }
    if (static_cast<int64_t>(values_.size()) != r.n_layers)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "manual: values lists " + std::to_string(values_.size()) +
                                                  " layers, the run compresses " + std::to_string(r.n_layers));
    std::vector<double> x(values_.size());
    double sum = 0.0;
    for (size_t l = 0; l < x.size(); ++l) {
      const double v = values_[l];
      x[l] = unit_ == "compression_ratio" ? (1.0 - v) * T : unit_ == "keep_fraction" ? v * T : std::min(v, T);
      sum += x[l];
    }
    if (!(sum > 0)) throw Error(RKV_ERROR_INVALID_ARGUMENT, "manual: the listed budgets sum to 0 positions");
    if (std::fabs(sum - B) > 1e-6 * B) {
      std::ostringstream m;
      m << "manual: the listed budgets sum to " << sum << " positions at T = " << r.prefix_tokens
        << ", the run's budget is B = " << r.budget_total << "; scaled by " << B / sum;
      diag.warning(m.str());
    }
    for (size_t l = 0; l < x.size(); ++l) budgets[l] = B * x[l] / sum;
  }

 private:
  std::vector<double> values_;
  std::string unit_;
};

}  // namespace

RKV_PLUGIN(Manual)
