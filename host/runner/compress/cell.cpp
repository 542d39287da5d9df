#include "runner/compress/cell.hpp"

#include <cmath>
#include <numeric>

#include "core/errors.hpp"
#include "runner/compress/budgets.hpp"
#include "runner/compress/chunked_prefill.hpp"
#include "runner/compress/codec_step.hpp"
#include "runner/compress/share.hpp"
#include "runner/compress/sliding_window.hpp"

namespace rkv {

namespace {

/// A joint grid this model cannot run (check_cell_on_model).
void check_joint_on_model(const JointSpec& joint, const ModelConfig& mc, int64_t calibration_prefix_tokens,
                          const std::string& where) {
  for (int b : joint.bits) {
    if (b == 32) continue;
    check_codec(joint.codec(b), mc.head_dim, where + ": compression.joint.bits / group");
    if (has_sliding_window(mc))
      throw InputError(where + ": compression.joint.bits: " + std::to_string(b) + " bits pack layers, which a model "
                       "with sliding-window layers does not support (their window cut would evict from a packed cache)");
  }
  for (double f : joint.fractions)
    for (int64_t l = 0; l < mc.n_layers; ++l) {
      const int64_t span = mc.layer_span(l, calibration_prefix_tokens);
      if (std::floor(f * static_cast<double>(span) + 0.5) < 1)
        throw InputError(where + ": compression.joint.fractions: " + std::to_string(f) + " keeps no position of layer " +
                         std::to_string(l) + "'s span of " + std::to_string(span) +
                         " calibration tokens; raise it or data.calibration.prefix_tokens");
    }
}

/// profile[l] for every layer l of `layers` (empty when the profile is).
std::vector<double> profile_of(const std::vector<double>& profile, const std::vector<int64_t>& layers) {
  std::vector<double> out;
  if (profile.empty()) return out;
  for (int64_t l : layers) out.push_back(profile.at(static_cast<size_t>(l)));
  return out;
}

/// The cell's profile [L]: its calibration profile, or its per-prompt signal's on this prompt (kept in
/// out.prompt_profile, the signal's warnings in out.warnings). Throws rkv::InputError for a profile of the wrong length.
const std::vector<double>& cell_profile(Backend& backend, const PrefilledPrompt& prompt, ScoreMemo& memo,
                                        const CellSetting& s, CellCompression& out) {
  const int64_t L = backend.model().config.n_layers;
  if (s.prompt_signal) {
    if (!s.profile.empty()) throw InputError("compress_cell: a cell has a calibration profile or a per-prompt signal");
    out.prompt_profile = memo.prompt_profile(backend, prompt, *s.prompt_signal, &out.warnings);
    return out.prompt_profile;
  }
  if (!s.profile.empty() && static_cast<int64_t>(s.profile.size()) != L)
    throw InputError("the cell's sensitivity profile has " + std::to_string(s.profile.size()) + " layers, the model " +
                     std::to_string(L));
  return s.profile;
}

/// A cell without a joint plan: plan sharing -> allocate -> evict -> share -> encode.
CellCompression compress_allocated(Backend& backend, const PrefilledPrompt& prompt, ScoreMemo& memo,
                                   const CellSetting& s) {
  const CellConfig& cc = *s.cell;
  const ModelConfig& mc = backend.model().config;
  const int64_t T = static_cast<int64_t>(prompt.tokens.size());
  CellCompression out;
  const std::vector<double>& profile = cell_profile(backend, prompt, memo, s, out);
  // Shared layers hold no cache: the cell's budget over A goes to the layers that keep theirs.
  const SharePlan shared =
      plan_sharing(cc.share, mc, s.layers_A, cell_budget_total(cc, mc, s.layers_A, T), T, profile);
  const CellBudgets alloc =
      allocate_cell(backend, prompt, *s.scorers, memo, s.instances->get(*cc.allocator),
                    cc.allocator->heads ? &s.instances->get(*cc.allocator->heads) : nullptr, shared.layers,
                    profile_of(profile, shared.layers), shared.budget_total);
  out.comp = compress_prompt(backend, prompt, *s.scorers, shared.layers, alloc.layers, memo,
                             alloc.heads.empty() ? nullptr : &alloc.heads, s.rerotate);
  share_compressed(backend, out.comp, shared.sources);
  if (!cc.share.none()) out.share_sources = shared.sources;
  const std::vector<int> bits = layer_bits_of(out.comp, cc.codec, profile, mc);
  const std::vector<std::vector<uint8_t>> classes = token_classes_of(backend, prompt, out.comp, *s.scorers, memo, cc.codec);
  encode_compressed(backend, out.comp, cc.codec, bits, classes);
  out.layer_bits.assign(bits.begin(), bits.end());
  out.token_class_entries = token_class_entries(classes, cc.codec);
  out.budget_total = shared.budget_total;
  out.warnings.insert(out.warnings.end(), alloc.warnings.begin(), alloc.warnings.end());
  if (!shared.warning.empty()) out.warnings.push_back(shared.warning);
  return out;
}

/// A joint cell: the plan -> evict -> share -> encode at the plan's bits.
CellCompression compress_planned(Backend& backend, const PrefilledPrompt& prompt, ScoreMemo& memo,
                                 const CellSetting& s) {
  const CellConfig& cc = *s.cell;
  if (!s.joint_table) throw InputError("compress_cell: a joint cell needs its measured damage table");
  const int64_t T = static_cast<int64_t>(prompt.tokens.size());
  const JointLayerPlan jp =
      plan_joint(cc.joint, *s.joint_table, backend.model().config, s.layers_A, T, *cc.budget_bytes_fraction);
  CellCompression out;
  out.comp = compress_joint(backend, prompt, *s.scorers, memo, cc.joint, jp, s.rerotate);
  out.budget_total = std::accumulate(jp.budgets.begin(), jp.budgets.end(), int64_t{0});
  out.layer_bits.assign(jp.bits.begin(), jp.bits.end());
  for (size_t l = 0; l < jp.sources.size(); ++l)
    if (jp.sources[l] != static_cast<int64_t>(l)) out.share_sources = jp.sources;
  out.joint_plan = jp.chosen;
  return out;
}

/// A cell under [prefill] compress_between_chunks: allocate b_l over A for the whole prompt, then the cell's own
/// chunked prefill evicting to them after every chunk.
CellCompression compress_in_chunks(Backend& backend, const PrefilledPrompt& prompt, ScoreMemo& memo,
                                   const CellSetting& s) {
  const CellConfig& cc = *s.cell;
  const ModelConfig& mc = backend.model().config;
  const int64_t T = static_cast<int64_t>(prompt.tokens.size());
  if (cc.allocator->heads || !serves_layer_budgets(s.instances->get(*cc.allocator)) || !cc.joint.none() ||
      !cc.share.none() || !cc.codec.none() || s.rerotate)
    throw InputError("prefill.compress_between_chunks: the cell is not plain eviction by layer budgets (per-head "
                     "allocator, joint plan, sharing, codec or rerotate)");
  CellCompression out;
  const std::vector<double>& profile = cell_profile(backend, prompt, memo, s, out);
  out.budget_total = cell_budget_total(cc, mc, s.layers_A, T);
  const CellBudgets alloc = allocate_cell(backend, prompt, *s.scorers, memo, s.instances->get(*cc.allocator), nullptr,
                                          s.layers_A, profile_of(profile, s.layers_A), out.budget_total);
  ChunkedCompression chunked = prefill_compressing_chunks(backend, prompt.tokens, s.chunk_tokens, *s.scorers,
                                                          s.layers_A, alloc.layers);
  out.comp = std::move(chunked.comp);
  out.comp.bytes_full = window_bytes(backend, *prompt.cache, T);
  out.last_logits = std::move(chunked.last_logits);
  out.warnings.insert(out.warnings.end(), alloc.warnings.begin(), alloc.warnings.end());
  return out;
}

}  // namespace

void check_cell_on_model(const CellConfig& cell, const ModelConfig& config, bool rerotate,
                         int64_t calibration_prefix_tokens, const std::string& where) {
  if (cell.full_cache) return;
  check_sliding_window_support(config, rerotate, cell.decode.policy, where);
  check_codec_support(config, cell.codec, where);
  check_share_support(config, cell.share, where);
  if (!cell.joint.none()) check_joint_on_model(cell.joint, config, calibration_prefix_tokens, where);
}

CellCompression compress_cell(Backend& backend, const PrefilledPrompt& prompt, ScoreMemo& memo,
                              const CellSetting& setting) {
  CellCompression out = setting.chunk_tokens > 0       ? compress_in_chunks(backend, prompt, memo, setting)
                        : setting.cell->joint.none() ? compress_allocated(backend, prompt, memo, setting)
                                                     : compress_planned(backend, prompt, memo, setting);
  out.warnings.insert(out.warnings.end(), out.comp.warnings.begin(), out.comp.warnings.end());
  return out;
}

}  // namespace rkv
