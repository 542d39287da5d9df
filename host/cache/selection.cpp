#include "cache/selection.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/errors.hpp"

namespace rkv {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

std::vector<int64_t> protected_positions(int64_t T, const ProtectedSpec& spec) {
  if (T < 0 || spec.sinks < 0 || spec.recent < 0)
    throw InputError("protected positions: T (" + str(T) + "), sinks (" + str(spec.sinks) + ") and recent (" +
                     str(spec.recent) + ") must be >= 0");
  const int64_t sinks = std::min(spec.sinks, T), recent = std::min(spec.recent, T);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(sinks + recent));
  for (int64_t p = 0; p < sinks; ++p) out.push_back(p);
  // The most recent first; a position already taken as a sink (p < sinks) is not listed twice.
  for (int64_t p = T - 1; p >= T - recent && p >= sinks; --p) out.push_back(p);
  return out;
}

Selection select_positions(const float* scores, int64_t n_kv_heads, int64_t T, int64_t budget,
                           const ProtectedSpec& spec, int64_t layer) {
  const std::string where = "layer " + str(layer);
  if (n_kv_heads < 1 || T < 1)
    throw InputError(where + ": selection needs n_kv_heads >= 1 and T >= 1 (got " + str(n_kv_heads) + ", " + str(T) + ")");
  if (budget < 1) throw InputError(where + ": budget b_l = " + str(budget) + " must be >= 1");

  Selection sel;
  sel.layer = layer;
  sel.n_kv_heads = n_kv_heads;
  sel.prefix_tokens = T;
  sel.budget = budget;
  if (budget >= T) {
    sel.untouched = true;
    sel.kept = T;
    return sel;
  }
  if (!scores) throw InputError(where + ": scores missing");

  const std::vector<int64_t> prot = protected_positions(T, spec);
  const int64_t n_prot = static_cast<int64_t>(prot.size());
  const int64_t prot_kept = std::min(budget, n_prot);
  if (budget < n_prot)
    sel.warnings.push_back(where + ": budget b_l = " + str(budget) + " is below the scorer's protected count " +
                           str(n_prot) + " (sinks " + str(std::min(spec.sinks, T)) + ", recent " +
                           str(std::min(spec.recent, T)) + "); kept the first " + str(budget) +
                           " protected positions in priority order (sinks first, then the most recent)");

  std::vector<char> is_prot(static_cast<size_t>(T), 0);
  for (int64_t p : prot) is_prot[static_cast<size_t>(p)] = 1;

  sel.kept = budget;
  sel.positions.resize(static_cast<size_t>(n_kv_heads * budget));
  const int64_t n_top = budget - prot_kept;
  std::vector<int64_t> cand;
  cand.reserve(static_cast<size_t>(T));
  for (int64_t h = 0; h < n_kv_heads; ++h) {
    int64_t* out = sel.positions.data() + h * budget;
    std::copy(prot.begin(), prot.begin() + prot_kept, out);
    if (n_top > 0) {
      const float* s = scores + h * T;
      cand.clear();
      for (int64_t j = 0; j < T; ++j) {
        if (is_prot[static_cast<size_t>(j)]) continue;
        if (!std::isfinite(s[j]))
          throw InputError(where + ", KV head " + str(h) + ", position " + str(j) + ": score is not finite (" +
                           std::to_string(s[j]) + ")");
        cand.push_back(j);
      }
      // Higher score first; equal scores: earlier position first.
      auto better = [s](int64_t a, int64_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
      std::nth_element(cand.begin(), cand.begin() + (n_top - 1), cand.end(), better);
      std::copy(cand.begin(), cand.begin() + n_top, out + prot_kept);
    }
    std::sort(out, out + budget);
  }
  return sel;
}

Selection select_positions_per_head(const float* scores, int64_t n_kv_heads, int64_t T,
                                    const std::vector<int64_t>& head_budgets, const ProtectedSpec& spec,
                                    int64_t layer) {
  const std::string where = "layer " + str(layer);
  if (static_cast<int64_t>(head_budgets.size()) != n_kv_heads)
    throw InputError(where + ": " + str(static_cast<int64_t>(head_budgets.size())) + " head budgets for " +
                     str(n_kv_heads) + " KV heads");
  const bool same = std::all_of(head_budgets.begin(), head_budgets.end(),
                                [&](int64_t b) { return std::min(b, T) == std::min(head_budgets[0], T); });
  if (same) return select_positions(scores, n_kv_heads, T, head_budgets.empty() ? 0 : head_budgets[0], spec, layer);
  // Heads differ: select each head on its own (one-head selections over its score row) and concatenate.
  Selection sel;
  sel.layer = layer;
  sel.n_kv_heads = n_kv_heads;
  sel.prefix_tokens = T;
  for (int64_t h = 0; h < n_kv_heads; ++h) {
    const int64_t b = head_budgets[static_cast<size_t>(h)];
    const Selection one = select_positions(scores ? scores + h * T : nullptr, 1, T, b, spec, layer);
    for (const std::string& w : one.warnings) sel.warnings.push_back(w + " (KV head " + str(h) + ")");
    sel.budget += b;
    sel.kept = std::max(sel.kept, one.kept);
    sel.head_kept.push_back(one.kept);
    if (one.untouched) {
      for (int64_t p = 0; p < T; ++p) sel.positions.push_back(p);
    } else {
      sel.positions.insert(sel.positions.end(), one.positions.begin(), one.positions.end());
    }
  }
  return sel;
}

}  // namespace rkv
