// Global top-k budgets over every layer and KV head: one ranking of the scorer's scores across the whole cache, so a
// layer and a head keep as many entries as they hold among the best H_kv B of all (an "rkv.allocator/2" plugin over a
// scorer whose scores are comparable across layers and heads).
//
// Source: Layer-DefensiveKV (Feng et al., "DefensiveKV", ICLR 2026), reference code FFY0/DefensiveKV at
// 9251b95e7e282a6c18dd98ef6318dd489e639a58, kvpress/presses/efficient_ada_global_scorer_press.py
// (EfficientAdaGlobalScorerPress.compress: gloabl_flatten_scores.topk(int(T (1 - ratio) H_kv L)) over the stacked
// [L, H_kv T] scores, then each layer's count and each head's). The same split is CAKE's and Ada-KV's global variant.
// With scores s[l, h, j] over the compressible layers A (a sliding-window layer's held positions only: its last
// span_l) and B the run's budget in positions per head summed over A:
//   every head first keeps its protected positions that it holds (the scorer's sinks and window; the reference pads
//     its window with the maximum score, so it is always among the picks), f_l of them;
//   the other H_kv B - sum_l H_kv f_l entries go to the highest scores over all (l, h, j) that are left (ties to the
//     lower layer, then the lower head, then the earlier position; the reference's are torch.topk's), at most span_l
//     per head;
//   b[l, h] = f_l + (picks in (l, h)).
// The host then makes each layer's row a multiple of H_kv (b_l = row sum / H_kv, integerized to sum to B) and each head
// at least min(protected, b_l): a row of the reference that is not a multiple of H_kv moves by less than H_kv entries.
// Use it alone (`[allocator] plugin = "global_topk"`); after a layer allocator (`heads = "global_topk"`) it ranks
// within each layer, the Ada-KV split without a safeguard (adakv with alpha_safeguard = 0, up to tie order).
// A budget below the protected entries keeps an equal share of them per head (the host warns when it cuts them);
// entries the ranking cannot place (every held position protected) go one per head, lower layers first.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

class GlobalTopK final : public rkv::sdk::HeadAllocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.global_topk", RKV_KIND_ALLOCATOR, "1.0.0",
                                "global top-k: one ranking of the scores over every layer and KV head")
        .flags(RKV_FLAG_NEEDS_SCORES);
  }
  GlobalTopK(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  /// budgets [n_layers, n_kv_heads] float64 (integers), summing to budget_total = H_kv B (with layer budgets, row l
  /// to H_kv b_l: the same ranking within each layer). Reads scores float32 [n_layers, n_kv_heads, T], the protected
  /// mask uint8 [T] and the layer spans. Throws Error(INVALID_ARGUMENT) without scores. Thread rule: never called
  /// concurrently on one instance.
  void allocate_heads(const rkv::sdk::HeadAllocationRequest& r, double* budgets, rkv::sdk::Diagnostics&) override {
    if (!r.scores) throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "global_topk needs the scorer's scores");
    const int64_t L = r.n_layers, H = r.n_kv_heads;
    if (!r.layer_budgets) {
      split(r, 0, L, r.budget_total, budgets);
      return;
    }
    for (int64_t l = 0; l < L; ++l) split(r, l, l + 1, H * std::min(r.layer_budgets[l], r.span(l)), budgets);
  }

 private:
  /// The top-k split of `total` entries over the heads of layers [l0, l1) (see the file comment).
  static void split(const rkv::sdk::HeadAllocationRequest& r, int64_t l0, int64_t l1, int64_t total, double* budgets) {
    const int64_t H = r.n_kv_heads, T = r.prefix_tokens;
    auto is_protected = [&](int64_t j) { return r.protected_mask && r.protected_mask[j] != 0; };
    struct Entry {
      float score;
      int64_t layer, head, pos;
    };
    std::vector<Entry> rest;
    int64_t picks = total;
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t first = T - r.span(l);  // the layer holds positions first .. T - 1
      int64_t f = 0;
      for (int64_t j = first; j < T; ++j) f += is_protected(j) ? 1 : 0;
      f = std::min(f, total / (H * (l1 - l0)));  // a budget below the protected entries: the host warns and cuts
      for (int64_t h = 0; h < H; ++h) {
        budgets[l * H + h] = static_cast<double>(f);
        picks -= f;
        const float* s = r.scores + (l * H + h) * T;
        for (int64_t j = first; j < T; ++j)
          if (!is_protected(j)) rest.push_back(Entry{s[j], l, h, j});
      }
    }
    std::stable_sort(rest.begin(), rest.end(), [](const Entry& a, const Entry& c) { return a.score > c.score; });
    int64_t k = 0;
    for (; k < picks && k < static_cast<int64_t>(rest.size()); ++k)
      budgets[rest[static_cast<size_t>(k)].layer * H + rest[static_cast<size_t>(k)].head] += 1.0;
    // What the ranking could not place (every held position protected, or the even cut of protected entries above
    // left a remainder): one more entry per (layer, head) below its span, lower layers and heads first.
    for (int64_t left = picks - k; left > 0;) {
      const int64_t before = left;
      for (int64_t l = l0; l < l1 && left > 0; ++l)
        for (int64_t h = 0; h < H && left > 0; ++h)
          if (budgets[l * H + h] < static_cast<double>(r.span(l))) budgets[l * H + h] += 1.0, --left;
      if (left == before) break;  // every head full: the host refuses a total above the spans
    }
  }
};

}  // namespace

RKV_PLUGIN(GlobalTopK)
