#include "runner/analyze/sharing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/errors.hpp"
#include "core/format.hpp"
#include "core/fnv1a.hpp"
#include "eval/stats.hpp"

namespace rkv {

namespace {

/// mean over the examples `idx` of d[i][l], for l = 1 .. L - 1.
std::vector<double> mean_over(const std::vector<std::vector<double>>& d, const std::vector<size_t>& idx) {
  std::vector<double> m(d.front().size() - 1, 0.0);
  for (size_t i : idx)
    for (size_t l = 1; l < d[i].size(); ++l) m[l - 1] += d[i][l] / static_cast<double>(idx.size());
  return m;
}

}  // namespace

void write_sharing(const std::vector<std::vector<double>>& d, const std::vector<NamedProfile>& signals,
                   int64_t resamples, nlohmann::json& j, std::ostringstream& md) {
  if (d.empty() || d.front().size() < 2)
    throw InputError("analyze --sharing: needs at least one example and a model of two layers or more");
  const size_t N = d.size(), L = d.front().size();
  std::vector<size_t> all(N);
  std::iota(all.begin(), all.end(), size_t{0});
  const std::vector<double> D = mean_over(d, all);  // layers 1 .. L - 1
  nlohmann::json sj;
  sj["D"] = nlohmann::json::array({nullptr});
  for (double v : D) sj["D"].push_back(v);
  sj["D_per_example"] = nlohmann::json::array();
  for (const auto& row : d) {
    nlohmann::json r = nlohmann::json::array({nullptr});
    for (size_t l = 1; l < L; ++l) r.push_back(row[l]);
    sj["D_per_example"].push_back(r);
  }
  std::vector<int64_t> order(L - 1);
  std::iota(order.begin(), order.end(), int64_t{1});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return D[a - 1] < D[b - 1]; });
  sj["order"] = order;
  md << "\n## Sharing damage per layer\n\nD^share_l: only layer l's cache dropped, its attention reading layer l - 1's "
     << "(Cross-Layer Attention at inference, applied after the prefill); mean KL(full || shared) over the "
     << "continuation tokens of " << N << " evaluation examples. Layer 0 has no predecessor. rho: signed Spearman "
     << "between each signal's profile and D^share over layers 1 .. " << L - 1 << ", 95% CI over examples.\n\n"
     << "| signal | rho vs D^share |\n|---|---|\n";
  sj["signals"] = nlohmann::json::array();
  for (const NamedProfile& p : signals) {
    const std::vector<double> s(p.s.begin() + 1, p.s.end());
    const double rho = spearman_rho(s, D);
    const Interval ci = bootstrap_interval(
        N, [&](const std::vector<size_t>& idx) { return spearman_rho(s, mean_over(d, idx)); },
        fnv1a64(p.name + "/analyze/sharing"), static_cast<int>(resamples));
    auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
    sj["signals"].push_back({{"signal", p.name}, {"rho", num(rho)}, {"ci_low", num(ci.low)}, {"ci_high", num(ci.high)}});
    md << "| " << p.name << " | " << fixed_decimals(rho, 3) << " [" << fixed_decimals(ci.low, 3) << ", " << fixed_decimals(ci.high, 3) << "] |\n";
  }
  md << "\n| layer | D^share |\n|---:|---:|\n| 0 | - |\n";
  for (size_t l = 1; l < L; ++l) md << "| " << l << " | " << fixed_decimals(D[l - 1], 4) << " |\n";
  md << "\nLeast damaged first (what [compression.share] count = k with the sharing-damage signal, "
     << "[signal.damage] of = \"sharing\", would share): ";
  for (size_t k = 0; k < order.size(); ++k) md << (k ? ", " : "") << order[k];
  md << ".\n";
  j["sharing"] = sj;
}

}  // namespace rkv
