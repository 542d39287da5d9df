// The host side of "rkv.allocator/1": build the request, call the plugin, validate what it returns, integerize.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plugin/instance.hpp"

namespace rkv {

/// What an allocation produced: integer budgets b [|A|] (sum exactly B), the plugin's real values, and warnings.
struct Allocation {
  std::vector<int64_t> budgets;   ///< b_l per compressible layer, 1 <= b_l <= T, sum B
  std::vector<double> raw;        ///< the allocator's real-valued output x_l
  int64_t budget_total = 0;       ///< B
  std::vector<std::string> warnings;
};

/// The call alone, without checking the answer: builds the request exactly as run_allocator() does, calls the plugin
/// and returns its real values as written (`raw`, NaN where it wrote nothing), its warnings and B; `budgets` stays
/// empty. For tools that judge the answer themselves (conformance/conformance.hpp). Throws rkv::InputError naming the
/// plugin when the request is invalid (see run_allocator) or the call returns an error status.
Allocation call_allocator(const PluginInstance& inst, const std::vector<double>& profile, int64_t budget_total,
                          int64_t prefix_tokens, int64_t n_layers, int64_t protected_count);

/// Calls allocator `inst` for |A| = n_layers layers with global budget B over T prefix positions.
/// `profile` ([|A|], may be empty) is passed only when the plugin sets RKV_FLAG_NEEDS_PROFILE; it is then required
/// and checked (length |A|, no NaN or infinity; negative values are legal). `protected_count` is the scorer's
/// protected count, or -1 standalone.
/// Throws rkv::InputError naming the plugin when it fails, or returns values that are not finite, negative, of the
/// wrong count, or do not sum to B within 1e-6 * B; and when B < |A| (see integerize_budgets). rkv::Cancelled when it
/// returned RKV_ERROR_CANCELLED. The budgets tensor is its own exactly-sized heap allocation (sanitizer build).
Allocation run_allocator(const PluginInstance& inst, const std::vector<double>& profile, int64_t budget_total,
                         int64_t prefix_tokens, int64_t n_layers, int64_t protected_count);

/// Checks a sensitivity profile for use over n_layers layers: length and finiteness. Throws rkv::InputError naming
/// `what` (e.g. the profile file) and the first bad entry.
void validate_profile(const std::vector<double>& profile, int64_t n_layers, const std::string& what);

}  // namespace rkv
