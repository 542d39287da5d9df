// AdaKV per-head budgets (Feng et al. 2024, "Ada-KV: Optimizing KV Cache Eviction by Adaptive Budget Allocation for
// Efficient LLM Inference", arXiv:2407.11550; reference: kvpress AdaKVPress, presses/adakv_press.py), an
// "rkv.allocator/2" plugin over any scorer's scores. For layer l with a budget of b_l entries per head (H_kv b_l in
// all) and scores s[h, j]:
//
//   every head first keeps its safeguard: the protected positions and its top n_safe = floor(alpha b_l) positions
//     (ranking: protected first, then score descending, ties to the earlier position), f = max(n_safe, protected);
//   the other H_kv (b_l - f) entries go to the highest scores across all heads of the layer (the global top-k;
//     ties to the lower head, then the earlier position);
//   b[l, h] = f + (global picks in head h).
//
// So heads whose scores concentrate on few positions give entries to heads that spread them, and each layer keeps
// exactly H_kv b_l entries. The host then selects, per head, its protected positions and its top b[l, h] - protected
// scores: exactly the set this rule picked. Layer budgets come from an rkv.allocator/1 plugin when composed
// (`[allocator] plugin = "ripplekv", heads = "adakv"`); alone, every layer gets B / |A| (kvpress applies one
// compression ratio to every layer), split as integers with the remainder to the lower layers; on a model with
// sliding-window layers (layer spans below T), the same fraction of each span instead, B span_l / sum span.
// A sliding-window layer holds only its last span_l positions, so only those are ranked (a sink before the window
// is not held, so it is not protected there).
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

class AdaKV final : public rkv::sdk::HeadAllocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.adakv", RKV_KIND_ALLOCATOR, "1.1.0",
                                "AdaKV: per-head budgets by a global top-k over the heads of each layer")
        .param(rkv::sdk::Param::Float("alpha_safeguard", 0.20,
                                      "fraction of b_l every head keeps by its own ranking before the global top-k")
                   .min(0.0)
                   .max(1.0))
        .flags(RKV_FLAG_NEEDS_SCORES);
  }
  AdaKV(const rkv::sdk::Params& p, const rkv::sdk::Host&) : alpha_(p.get_float("alpha_safeguard")) {}

  void allocate_heads(const rkv::sdk::HeadAllocationRequest& r, double* budgets, rkv::sdk::Diagnostics&) override {
    if (!r.scores) throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "adakv needs the scorer's scores");
    const int64_t L = r.n_layers, H = r.n_kv_heads, T = r.prefix_tokens;
    const std::vector<int64_t> b = layer_budgets(r);
    for (int64_t l = 0; l < L; ++l)
      split_layer(r, r.scores + l * H * T, std::min(b[static_cast<size_t>(l)], r.span(l)), r.span(l), budgets + l * H);
  }

 private:
  /// b_l per layer: the given layer budgets, or B / |A| (remainder to the lower layers) when every span is T, or
  /// floor(B span_l / sum span) with the remainder to the lower layers below their span.
  static std::vector<int64_t> layer_budgets(const rkv::sdk::HeadAllocationRequest& r) {
    const int64_t L = r.n_layers, B = r.budget_total / r.n_kv_heads;  // per-head positions summed over layers
    std::vector<int64_t> b(static_cast<size_t>(L));
    if (r.layer_budgets) return std::vector<int64_t>(r.layer_budgets, r.layer_budgets + L);
    int64_t span_sum = 0;
    for (int64_t l = 0; l < L; ++l) span_sum += r.span(l);
    if (span_sum == L * r.prefix_tokens) {
      for (int64_t l = 0; l < L; ++l) b[static_cast<size_t>(l)] = B / L + (l < B % L ? 1 : 0);
      return b;
    }
    int64_t left = B;
    for (int64_t l = 0; l < L; ++l) {
      b[static_cast<size_t>(l)] = std::max<int64_t>(1, B * r.span(l) / span_sum);
      left -= b[static_cast<size_t>(l)];
    }
    for (bool moved = true; left != 0 && moved;) {  // the rounding remainder: lower layers first, within [1, span]
      moved = false;
      for (int64_t l = 0; l < L && left > 0; ++l)
        if (b[static_cast<size_t>(l)] < r.span(l)) ++b[static_cast<size_t>(l)], --left, moved = true;
      for (int64_t l = L; l-- > 0 && left < 0;)
        if (b[static_cast<size_t>(l)] > 1) --b[static_cast<size_t>(l)], ++left, moved = true;
    }
    return b;
  }

  /// b[h] for one layer holding its last `span` of T positions: scores [H, T], b_l entries per head on average.
  void split_layer(const rkv::sdk::HeadAllocationRequest& r, const float* s, int64_t b_l, int64_t span,
                   double* out) const {
    const int64_t H = r.n_kv_heads, T = r.prefix_tokens, first = T - span;  // positions [first, T) are held
    auto is_protected = [&](int64_t j) { return r.protected_mask && r.protected_mask[j] != 0; };
    int64_t n_protected = r.protected_count < 0 ? 0 : std::min(r.protected_count, T);
    if (first > 0 && r.protected_mask) {  // only the protected positions the layer still holds
      n_protected = 0;
      for (int64_t j = first; j < T; ++j) n_protected += is_protected(j) ? 1 : 0;
    }
    const int64_t n_safe = static_cast<int64_t>(std::floor(alpha_ * static_cast<double>(b_l)));
    const int64_t f = std::min(b_l, std::max(n_safe, n_protected));
    // Per head: the ranking (protected first, then score descending, ties to the earlier position); its first f
    // entries are the safeguard, the rest compete globally.
    struct Entry {
      float score;
      int64_t head, pos;
    };
    std::vector<Entry> rest;
    rest.reserve(static_cast<size_t>(H * span));
    std::vector<int64_t> rank(static_cast<size_t>(span));
    for (int64_t h = 0; h < H; ++h) {
      const float* sh = s + h * T;
      for (int64_t k = 0; k < span; ++k) rank[static_cast<size_t>(k)] = first + k;
      std::stable_sort(rank.begin(), rank.end(), [&](int64_t a, int64_t c) {
        if (is_protected(a) != is_protected(c)) return is_protected(a);
        return sh[a] > sh[c];
      });
      for (int64_t k = f; k < span; ++k) {
        const int64_t j = rank[static_cast<size_t>(k)];
        rest.push_back(Entry{sh[j], h, j});
      }
      out[h] = static_cast<double>(f);
    }
    // The global top-k of what is left: score descending, ties to the lower head, then the earlier position.
    const int64_t picks = H * (b_l - f);
    std::stable_sort(rest.begin(), rest.end(), [](const Entry& a, const Entry& c) { return a.score > c.score; });
    for (int64_t k = 0; k < picks && k < static_cast<int64_t>(rest.size()); ++k) out[rest[static_cast<size_t>(k)].head] += 1.0;
  }

  double alpha_;
};

}  // namespace

RKV_PLUGIN(AdaKV)
