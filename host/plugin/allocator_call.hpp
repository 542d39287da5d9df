// The host side of "rkv.allocator/1": build the request, call the plugin, validate what it returns, integerize.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plugin/instance.hpp"

namespace rkv {

/// What an allocation produced: integer budgets b [|A|] (sum exactly B), the plugin's real values, and warnings.
struct Allocation {
  std::vector<int64_t> budgets;   ///< b_l per compressible layer, 1 <= b_l <= span_l (T without windows), sum B
  std::vector<double> raw;        ///< the allocator's real-valued output x_l
  int64_t budget_total = 0;       ///< B
  std::vector<std::string> warnings;
};

/// The call alone, without checking the answer: builds the request exactly as run_allocator() does, calls the plugin
/// and returns its real values as written (`raw`, NaN where it wrote nothing), its warnings and B; `budgets` stays
/// empty. For tools that judge the answer themselves (conformance/conformance.hpp). Throws rkv::InputError naming the
/// plugin when the request is invalid (see run_allocator) or the call returns an error status.
Allocation call_allocator(const PluginInstance& inst, const std::vector<double>& profile, int64_t budget_total,
                          int64_t prefix_tokens, int64_t n_layers, int64_t protected_count,
                          const std::vector<int64_t>& layer_spans = {});

/// Calls allocator `inst` for |A| = n_layers layers with global budget B over T prefix positions.
/// `layer_spans` ([|A|], each in [1, T]; empty: all T) are the entries each layer can hold (ModelConfig::layer_span;
/// cache/budget.hpp): they go to the plugin (rkv_allocation_request.layer_spans) and cap each b_l.
/// `profile` ([|A|], may be empty) is passed only when the plugin sets RKV_FLAG_NEEDS_PROFILE; it is then required
/// and checked (length |A|, no NaN or infinity; negative values are legal). `protected_count` is the scorer's
/// protected count, or -1 standalone.
/// Throws rkv::InputError naming the plugin when it fails, or returns values that are not finite, negative, of the
/// wrong count, or do not sum to B within 1e-6 * B; and when B < |A| (see integerize_budgets). rkv::Cancelled when it
/// returned RKV_ERROR_CANCELLED. The budgets tensor is its own exactly-sized heap allocation (sanitizer build).
Allocation run_allocator(const PluginInstance& inst, const std::vector<double>& profile, int64_t budget_total,
                         int64_t prefix_tokens, int64_t n_layers, int64_t protected_count,
                         const std::vector<int64_t>& layer_spans = {});

/// True when `inst` serves "rkv.allocator/1" (layer budgets) / "rkv.allocator/2" (per-head budgets).
bool serves_layer_budgets(const PluginInstance& inst);
bool serves_head_budgets(const PluginInstance& inst);

/// What a per-head allocator is given (rkv.allocator/2; plugin.h rkv_head_allocation_request). Borrowed.
struct HeadAllocationInputs {
  std::vector<double> profile;                      ///< [|A|], passed when the plugin sets RKV_FLAG_NEEDS_PROFILE
  const std::vector<float>* scores = nullptr;       ///< [|A|, H_kv, T], required when it sets RKV_FLAG_NEEDS_SCORES
  std::vector<uint8_t> protected_mask;              ///< [T] (empty: no scorer)
  const std::vector<int64_t>* layer_budgets = nullptr;  ///< [|A|] b_l from an rkv.allocator/1 plugin, or null
  int64_t budget_total = 0;     ///< B (positions per head summed over A); the request carries H_kv x B
  int64_t prefix_tokens = 0;    ///< T
  int64_t n_layers = 0;         ///< |A|
  int64_t n_kv_heads = 0;       ///< H_kv
  int64_t protected_count = -1; ///< per head, -1 with no scorer
  std::vector<int64_t> layer_spans;  ///< [|A|] entries each head of a layer can hold (each in [1, T]); empty: all T
};

/// What a per-head allocation produced.
struct HeadAllocation {
  std::vector<std::vector<int64_t>> budgets;  ///< [|A|][H_kv] entries per head; row l sums to exactly H_kv b_l
  std::vector<int64_t> layer_budgets;         ///< b_l = (row l's sum) / H_kv, summing to B
  std::vector<double> raw;                    ///< the plugin's reals, [|A| x H_kv] row-major
  std::vector<std::string> warnings;
};

/// Calls per-head allocator `inst` and integerizes what it returns: b_l are `in.layer_budgets` when given, otherwise
/// integerize_budgets() of the row sums / H_kv (capped at the layer spans); then each row is integerized to exactly
/// H_kv b_l with every head in [max(1, min(protected_count, b_l)), span_l] (integerize_between). Throws rkv::InputError naming the plugin when it is
/// not an rkv.allocator/2 plugin, fails, or returns values that are not finite, negative, of the wrong count, or do
/// not sum to H_kv B (or, with layer budgets, a row to H_kv b_l) within 1e-6 relative; rkv::Cancelled when it
/// returned RKV_ERROR_CANCELLED. The output tensor is its own exactly-sized heap allocation.
HeadAllocation run_head_allocator(const PluginInstance& inst, const HeadAllocationInputs& in);

/// Checks a sensitivity profile for use over n_layers layers: length and finiteness. Throws rkv::InputError naming
/// `what` (e.g. the profile file) and the first bad entry.
void validate_profile(const std::vector<double>& profile, int64_t n_layers, const std::string& what);

}  // namespace rkv
