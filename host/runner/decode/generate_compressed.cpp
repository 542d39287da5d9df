// Greedy generation on a compressed prompt cache (runner/decode/generate_compressed.hpp).
#include "runner/decode/generate_compressed.hpp"

#include <memory>

#include "core/errors.hpp"
#include "runner/compress/budgets.hpp"
#include "runner/compress/cell.hpp"
#include "runner/decode/loop.hpp"
#include "runner/decode/policy.hpp"
#include "runner/plan/config.hpp"
#include "runner/plan/profile_file.hpp"
#include "runner/plan/scorer_route.hpp"

namespace rkv {

namespace {

/// s_l of every model layer, read from `profile_path` (checked against the model's layer count).
std::vector<double> read_layer_profile(const std::string& profile_path, const std::string& who, int64_t n_layers) {
  if (profile_path.empty())
    throw InputError(who + " needs a sensitivity profile: give --profile FILE (profile_path in the C API), a "
                     "profile.json of `ripplekv profile` or a run, or a per-prompt [signal] (cake, squeezeattention) "
                     "that computes one on the prompt");
  const ProfileFile pf = read_profile_file(profile_path);
  if (static_cast<int64_t>(pf.s.size()) != n_layers)
    throw InputError(profile_path + ": the profile has " + std::to_string(pf.s.size()) + " layers, the model " +
                     std::to_string(n_layers));
  return pf.s;
}

/// What of the cell reads the profile, for the message when none is given.
std::string profile_reader(const CellConfig& cc) {
  if (cc.allocator->info->descriptor->flags & RKV_FLAG_NEEDS_PROFILE) return "allocator '" + cc.allocator->id + "'";
  if (cc.codec.layer_bits == "profile") return "compression.codec.layer_bits = \"profile\"";
  return "compression.share.count";
}

}  // namespace

CompressedGeneration generate_compressed(Backend& backend, const Tokenizer& tok,
                                         const std::vector<int32_t>& prompt_ids, const std::string& config_path,
                                         const std::string& profile_path, int64_t max_new_tokens) {
  if (prompt_ids.empty()) throw InputError("the prompt encodes to no tokens");
  if (max_new_tokens < 0) throw InputError("max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
  const CompressionConfig cfg = load_compression_config(config_path);
  const CellConfig& cc = cfg.cell;
  const ModelConfig& mc = backend.model().config;
  CellSetting setting;
  setting.cell = &cc;
  setting.rerotate = cfg.rerotate;
  setting.layers_A = resolve_compressible_layers(cfg.compressible_layers, cfg.compress_global_only, mc, config_path);
  if (!cc.joint.none())
    throw InputError(config_path + ": [compression.joint] is a `ripplekv run` setting (its plan needs the damage of "
                     "every option measured on the run's calibration split); remove it for generate --compress");
  check_cell_on_model(cc, mc, cfg.rerotate, 0, config_path);
  if (cc.uses_profile && !cc.per_prompt_signal)  // a per-prompt signal's profile is computed on this prompt
    setting.profile = read_layer_profile(profile_path, profile_reader(cc), mc.n_layers);

  // The cell's plugins, created for this call; the prefill computes what every scorer of the cell needs.
  HostServices host;
  InstancePool instances(host);
  ScorerSet scorers(instances, mc);
  // Errors a plugin or the decode policy raises name the config file, as the config's own errors do.
  auto in_config = [&](const InputError& e) {
    const std::string m = e.what();
    return InputError(m.rfind(config_path, 0) == 0 ? m : config_path + ": " + m);
  };
  try {
    scorers.add_cell(cc, config_path);
  } catch (const InputError& e) {
    throw in_config(e);
  }
  const LayerScorers layer_scorers = scorers.layers_of(cc);
  setting.scorers = &layer_scorers;
  setting.instances = &instances;
  if (cc.per_prompt_signal) setting.prompt_signal = &scorers.at(*cc.signal);
  const ScorerUse& scorer = scorers.at(*cc.scorer);
  const PrefilledPrompt prompt = prefill_prompt(
      backend, prompt_ids, prefill_needs(scorers.all(), decode_needs_prompt_cumulative(cc.decode, scorer.requirements)));

  // The cell sequence, then greedy decoding on the compacted cache under the decode policy, from T or (rerotate) the
  // cache length.
  ScoreMemo memo;
  CellCompression cell = compress_cell(backend, prompt, memo, setting);
  CompressedPrompt& comp = cell.comp;
  const DecodePolicy policy = [&] {
    try {
      return DecodePolicy(cc.decode, comp.budgets, comp.head_budgets, &scorer);
    } catch (const InputError& e) {
      throw in_config(e);
    }
  }();
  const std::string frozen = policy.frozen_heads_warning(mc.n_kv_heads);
  const std::unique_ptr<DecodeSession> decode =
      policy.begin(backend, *comp.cache, prompt_cumulative_attention(prompt), &comp.prompt_positions);
  const GreedyResult r = greedy_decode(backend, prompt.last_logits, comp.next_position, *comp.cache, max_new_tokens,
                                       tok.end_of_generation_ids(), decode.get());

  CompressedGeneration g;
  g.tokens = r.tokens;
  g.scorer = cc.scorer->id + (cc.route.empty() ? "" : " + route[" + route_label(cc.route) + "]");
  g.allocator = cc.allocator->id;
  if (cc.allocator->heads) g.heads = cc.allocator->heads->id;
  g.decode = cc.decode.describe();
  g.head_budgets = comp.head_budgets;
  g.prompt_tokens = static_cast<int64_t>(prompt_ids.size());
  g.budget_total = cell.budget_total;
  g.budgets = comp.budgets;
  g.layer_bits = cell.layer_bits;
  g.prompt_profile = cell.prompt_profile;
  if (cc.per_prompt_signal) g.signal = cc.signal->id;
  g.share_sources = cell.share_sources;
  g.bytes_full = comp.bytes_full;
  g.bytes_kept = comp.bytes_kept;
  g.warnings = cell.warnings;
  if (!frozen.empty()) g.warnings.push_back(frozen);
  g.decode_tokens_per_second = r.tokens_per_second;
  g.bytes_end = comp.cache->bytes_in_use();
  return g;
}

}  // namespace rkv
