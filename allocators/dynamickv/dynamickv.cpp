// DynamicKV's layer budgets: each layer keeps as many positions as it holds among a global top-k of the scorer's
// scores over the layers seen so far, re-decided every `interval` layers (an "rkv.allocator/2" plugin over a
// window-attention scorer such as snapkv).
//
// Source: Zhou et al., "DynamicKV: Task-Aware Adaptive KV Cache Compression for Long Context LLMs" (Findings of EMNLP
// 2025, arXiv:2412.14838); reference code DreamMr/DynamicKV at 8ab3c08, kv_compression/token_drop/methods/
// dynamic_v11.py (DynamicKVClusterV11.update_and_reset_budget) and llama_model_impl/dynamickv_v11.py (its call after
// every 4th layer of the prefill). Per head h of layer l the reference scores the T' = T - w positions before its
// window of w queries (the window's attention summed and avg-pooled: snapkv's score up to a factor w), and with the
// uniform capacity c = B / L per layer (B: the budget in positions summed over the layers), base = c - w and
// budget_size = min(trunc(ratio_max base), T'):
//   every layer first keeps its top budget_size positions (per head, by its own scores);
//   after layer u (u mod interval = interval - 1), over the layers 0..u (n = u + 1 of them): the top tk = base H n of
//     all their scores; count_l = (the top-k entries in layer l) div n; at the last layer, count_u += tk div L -
//     sum(count) (the reference's `need_add`); fix_l = trunc(budget_size count_l / sum(count)) in float32, ss =
//     sum(fix) / (base L), fix_l = floor(fix_l / ss) (Python's float //), fix_u += base L - sum(fix); each layer
//     l <= u then keeps min(its kept positions, fix_l, T') of its ranking (plus its window).
// Deviations, all at edges the published setup (Llama and Mistral, 32 layers, interval 4) never reaches:
//   - the reference re-decides only after layers u with u mod 4 = 3, so with L not a multiple of 4 (SmolLM2's 30,
//     Gemma 3 270M's 18) its last L mod 4 layers keep budget_size positions each, far above the budget; here the last
//     layer always re-decides too (at L = 32 nothing changes);
//   - when a later decision gives a layer more than an earlier one left it, the reference's cut `k[:fix]` runs into
//     the layer's window and stores window entries twice; here a layer keeps min(what it kept, fix_l) distinct
//     entries;
//   - where the reference would divide by zero (no top-k entry counted, or every fix_l 0: a tiny budget), and where
//     base <= 0 (a budget at or below the window), the budget is split uniformly, with a warning;
//   - what the reference leaves unused (a layer capped at T', or cut early below its final share) is given back: the
//     layer budgets b_l = kept_l + w are scaled to sum to B (min(span_l, s b_l), water-filling), so every allocator
//     of a table holds the same bytes; the host integerizes them.
// Scores are the run scorer's, per KV head (snapkv averages a GQA group's query heads; the reference ranks each query
// head after repeat_kv). A sliding-window layer ranks only the positions it holds. Every head of a layer gets b_l.
// After another layer allocator (`heads = "dynamickv"`) it only splits each layer's budget evenly over its heads, as
// the reference does: DynamicKV's decision is the layer budgets.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

/// Python's float floor division `a // b` (floatobject.c float_floor_div), b != 0.
double py_floordiv(double a, double b) {
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

class DynamicKV final : public rkv::sdk::HeadAllocator {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.allocator.dynamickv", RKV_KIND_ALLOCATOR, "1.0.0",
                                "DynamicKV: layer budgets from a global top-k of the scores, re-decided every few layers")
        .param(rkv::sdk::Param::Int("interval", 4, "layers between two decisions (the reference: 4)").min(1).max(100000))
        .param(rkv::sdk::Param::Float("ratio_max", 10.0,
                                      "a layer keeps at most ratio_max x (c - w) positions before the first decision "
                                      "(c: the budget per layer, w: the scorer's protected positions; the "
                                      "reference's radio_max)")
                   .min(0.01)
                   .max(1e6))
        .flags(RKV_FLAG_NEEDS_SCORES);
  }
  DynamicKV(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : interval_(p.get_int("interval")), ratio_max_(p.get_float("ratio_max")) {}

  /// budgets [n_layers, n_kv_heads] float64, every head of layer l at b_l, summing to budget_total = H_kv B. Reads
  /// scores float32 [n_layers, n_kv_heads, T], the protected mask uint8 [T] (the scorer's window) and the layer spans.
  /// With layer budgets given, every head of layer l gets b_l. Throws Error(INVALID_ARGUMENT) without scores. Thread
  /// rule: never called concurrently on one instance.
  void allocate_heads(const rkv::sdk::HeadAllocationRequest& r, double* budgets, rkv::sdk::Diagnostics& diag) override {
    if (!r.scores) throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "dynamickv needs the scorer's scores");
    const int64_t L = r.n_layers, H = r.n_kv_heads;
    if (r.layer_budgets) {  // after another layer allocator: DynamicKV gives every head of a layer the same budget
      diag.warning("dynamickv after a layer allocator splits each layer's budget evenly over its heads (the same as "
                   "heads = \"none\"): DynamicKV decides layer budgets; use it as [allocator] plugin");
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < H; ++h) budgets[l * H + h] = static_cast<double>(r.layer_budgets[l]);
      return;
    }
    const std::vector<double> b = scaled_to_budget(r, layer_budgets(r, diag));
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h) budgets[l * H + h] = b[static_cast<size_t>(l)];
  }

 private:
  /// The reference's layer budgets kept_l + w_l (before they are scaled to B); uniform ones where it has none.
  std::vector<double> layer_budgets(const rkv::sdk::HeadAllocationRequest& r, rkv::sdk::Diagnostics& diag) const {
    const int64_t L = r.n_layers, H = r.n_kv_heads, T = r.prefix_tokens;
    const std::vector<double> uniform(static_cast<size_t>(L), 1.0);
    auto is_protected = [&](int64_t j) { return r.protected_mask && r.protected_mask[j] != 0; };
    const int64_t w = std::max<int64_t>(0, r.protected_count);
    const int64_t cap = r.budget_total / (H * L);  // the reference's max_capacity_prompt
    const int64_t base = cap - w, t_past = T - w;
    if (base <= 0 || t_past <= 0) {
      diag.warning("dynamickv: the budget per layer (" + std::to_string(cap) + ") leaves no room beside the " +
                   std::to_string(w) + " protected positions; split uniformly");
      return uniform;
    }
    const int64_t budget_size = std::min(static_cast<int64_t>(ratio_max_ * static_cast<double>(base)), t_past);
    // kept_l: what layer l keeps of its own ranking so far; w_l: its protected positions (within its span)
    std::vector<int64_t> kept(static_cast<size_t>(L)), w_l(static_cast<size_t>(L), 0);
    for (int64_t l = 0; l < L; ++l) {
      int64_t held = 0;
      for (int64_t j = T - r.span(l); j < T; ++j) (is_protected(j) ? w_l[static_cast<size_t>(l)] : held) += 1;
      kept[static_cast<size_t>(l)] = std::min(budget_size, held);
    }
    for (int64_t u = 0; u < L; ++u) {
      if (u % interval_ != interval_ - 1 && u != L - 1) continue;
      std::vector<int64_t> fix;
      if (!decide(r, u, base, budget_size, t_past, fix)) {
        diag.warning("dynamickv: no layer gets a share of the budget after layer " + std::to_string(u) +
                     " (budget_size = min(ratio_max (c - w), T - w) = " + std::to_string(budget_size) +
                     " positions: too small a budget or ratio_max); split uniformly");
        return uniform;
      }
      for (int64_t l = 0; l <= u; ++l)
        kept[static_cast<size_t>(l)] = std::min({kept[static_cast<size_t>(l)], fix[static_cast<size_t>(l)], t_past});
    }
    std::vector<double> b(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) b[static_cast<size_t>(l)] = static_cast<double>(kept[static_cast<size_t>(l)] + w_l[static_cast<size_t>(l)]);
    return b;
  }

  /// `b` scaled to the run's budget B: min(span_l, s b_l) with the one s that makes them sum to B (water-filling: a
  /// layer the scale would take past its span holds its span, the others share the rest); what layers with b_l > 0
  /// cannot take goes to the others below their span, in proportion to their room. Uniform when every b_l is 0.
  static std::vector<double> scaled_to_budget(const rkv::sdk::HeadAllocationRequest& r, const std::vector<double>& b) {
    const int64_t L = r.n_layers;
    double left = static_cast<double>(r.budget_total) / static_cast<double>(r.n_kv_heads);
    std::vector<double> out(static_cast<size_t>(L), 0.0);
    std::vector<bool> full(static_cast<size_t>(L), false);
    for (bool capped = true; capped;) {  // each pass fixes at least one more layer at its span, or ends
      capped = false;
      double weight = 0;
      for (int64_t l = 0; l < L; ++l)
        if (!full[static_cast<size_t>(l)]) weight += b[static_cast<size_t>(l)];
      if (weight <= 0) break;
      const double scale = left / weight;
      for (int64_t l = 0; l < L; ++l) {
        const double span = static_cast<double>(r.span(l));
        if (!full[static_cast<size_t>(l)] && b[static_cast<size_t>(l)] > 0 && scale * b[static_cast<size_t>(l)] >= span) {
          out[static_cast<size_t>(l)] = span, full[static_cast<size_t>(l)] = true, left -= span, capped = true;
        }
      }
      if (!capped)
        for (int64_t l = 0; l < L; ++l)
          if (!full[static_cast<size_t>(l)]) out[static_cast<size_t>(l)] = scale * b[static_cast<size_t>(l)];
      if (!capped) left = 0;
    }
    if (left > 0) {  // every layer with b_l > 0 at its span: the rest by room (B <= the sum of spans, the host's rule)
      double room = 0;
      for (int64_t l = 0; l < L; ++l) room += static_cast<double>(r.span(l)) - out[static_cast<size_t>(l)];
      for (int64_t l = 0; l < L && room > 0; ++l)
        out[static_cast<size_t>(l)] += (static_cast<double>(r.span(l)) - out[static_cast<size_t>(l)]) * left / room;
    }
    return out;
  }

  /// One decision after layer u (update_and_reset_budget): fix_l for l = 0..u. False where the reference divides by
  /// zero.
  bool decide(const rkv::sdk::HeadAllocationRequest& r, int64_t u, int64_t base, int64_t budget_size, int64_t t_past,
              std::vector<int64_t>& fix) const {
    const int64_t L = r.n_layers, H = r.n_kv_heads, T = r.prefix_tokens, n = u + 1;
    struct Entry {
      float score;
      int64_t layer;
    };
    std::vector<Entry> all;
    for (int64_t l = 0; l <= u; ++l)
      for (int64_t h = 0; h < H; ++h) {
        const float* s = r.scores + (l * H + h) * T;
        for (int64_t j = T - r.span(l); j < T; ++j)
          if (!(r.protected_mask && r.protected_mask[j])) all.push_back(Entry{s[j], l});
      }
    const int64_t tk = base * H * n;  // torch.topk(k = tk), or every entry when there are fewer
    const int64_t k = std::min<int64_t>(tk, static_cast<int64_t>(all.size()));
    // the top k: by score, ties to the lower layer
    auto better = [](const Entry& a, const Entry& c) { return a.score > c.score || (a.score == c.score && a.layer < c.layer); };
    if (k < static_cast<int64_t>(all.size())) std::nth_element(all.begin(), all.begin() + k, all.end(), better);
    std::vector<int64_t> count(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < k; ++i) ++count[static_cast<size_t>(all[static_cast<size_t>(i)].layer)];
    int64_t sum = 0;
    for (int64_t& c : count) sum += (c /= n);
    if (u == L - 1 && sum != H * t_past) {  // need_add: the rounding of the div n back to the last layer
      count[static_cast<size_t>(u)] += tk / L - sum;
      sum = tk / L;
    }
    if (sum <= 0) return false;
    fix.assign(static_cast<size_t>(n), 0);
    int64_t fix_sum = 0;
    for (int64_t l = 0; l < n; ++l) {  // int(budget_size * (count_l / sum)), in float32 as torch computes it
      const float share = static_cast<float>(count[static_cast<size_t>(l)]) / static_cast<float>(sum);
      fix[static_cast<size_t>(l)] = static_cast<int64_t>(static_cast<float>(budget_size) * share);
      fix_sum += fix[static_cast<size_t>(l)];
    }
    if (fix_sum == 0) return false;
    const int64_t need = base * L;
    const double ss = static_cast<double>(fix_sum) / static_cast<double>(need);
    int64_t total = 0;
    for (int64_t& f : fix) total += (f = static_cast<int64_t>(py_floordiv(static_cast<double>(f), ss)));
    fix[static_cast<size_t>(u)] += need - total;
    return true;
  }

  int64_t interval_;
  double ratio_max_;
};

}  // namespace

RKV_PLUGIN(DynamicKV)
