// The cell sequence: how one cell turns a prefilled prompt into its compressed cache (docs/ARCHITECTURE.md
// "Data flow"). It exists once, here; `ripplekv run` (runner/run/) and `generate --compress` (runner/decode/
// generate_compressed.hpp) both call compress_cell.
//
//   a cell without a joint plan:
//     plan sharing (which layers read another layer's cache; the budget B over A goes to the layers that keep theirs)
//     -> allocate (the cell's allocator, and its per-head allocator: b_l, b[l, h])
//     -> evict (per layer: scorer, top-k, compaction; compress_prompt)
//     -> share (shared layers drop their entries and read their source's)
//     -> encode (the codec, at per-layer bits from the profile and per-token classes when the cell asks)
//   a joint cell: the joint plan (b_l, bits and sharing per layer from the measured damage table) -> evict -> share
//     -> encode at the plan's bits (runner/compress/joint.hpp).
//   with [prefill] compress_between_chunks: allocate (layer budgets b_l for the whole prompt) -> prefill the prompt
//     again in chunks, evicting to b_l after every chunk (runner/compress/chunked_prefill.hpp); plain eviction only
//     (the plan refuses per-head allocators, joint plans, sharing and codecs there).
//
// Thread rules: the backend's rules apply to every call; plugin instances are never called concurrently; a ScoreMemo
// belongs to one prompt and one thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/compress/joint.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/compress/score_memo.hpp"
#include "runner/compress/scorers.hpp"
#include "runner/plan/run_plan.hpp"

namespace rkv {

/// Refuses, before any work, a cell this model cannot run, each error starting with `where` (the config and cell):
/// a decode policy or key re-rotation a sliding-window model rules out (check_sliding_window_support), a codec the
/// head dim or sliding windows rule out (check_codec_support), a share spec beyond the model's layers
/// (check_share_support), and for a joint cell an integer width whose group does not suit the head dim, packed layers
/// on a sliding-window model, or a fraction that keeps no position of a layer's span of `calibration_prefix_tokens`
/// (where its damage is measured). A no-op for the full-cache cell.
void check_cell_on_model(const CellConfig& cell, const ModelConfig& config, bool rerotate,
                         int64_t calibration_prefix_tokens, const std::string& where);

/// What a cell needs besides the prompt to compress it. Pointers are borrowed for the call.
struct CellSetting {
  const CellConfig* cell = nullptr;          ///< a compressed cell (not the full cache)
  const LayerScorers* scorers = nullptr;     ///< the scorer of every layer (ScorerSet::layers_of)
  InstancePool* instances = nullptr;         ///< the allocators' instances come from here
  /// [L] the cell's sensitivity profile over every model layer when it reads one (CellConfig::uses_profile: its
  /// allocator, codec.layer_bits = "profile", share.count); empty otherwise.
  std::vector<double> profile;
  /// The cell's per-prompt signal (CellConfig::per_prompt_signal; ScorerSet::at of its [signal]): when set, the
  /// profile is computed on the prompt (ScoreMemo::prompt_profile) and `profile` must be empty.
  const ScorerUse* prompt_signal = nullptr;
  const JointDamageTable* joint_table = nullptr;  ///< a joint cell's measured damage table (required for one)
  std::vector<int64_t> layers_A;             ///< the compressible layers, ascending
  bool rerotate = false;                     ///< [compression] rerotate
  /// C >= 1: [prefill] compress_between_chunks with chunk_tokens = C: the cell prefills the prompt again in chunks
  /// of C and evicts to its budgets after every chunk (chunked_prefill.hpp); 0: it compresses the shared prefill.
  int64_t chunk_tokens = 0;
};

/// One cell's compressed cache of one prompt and what the cell sequence decided.
struct CellCompression {
  CompressedPrompt comp;
  int64_t budget_total = 0;  ///< the entries allocated over A: B' after sharing, or what a joint plan keeps
  /// [L] bits of every model layer (32: float32) when they vary by layer (codec layer_bits = "profile", a joint
  /// plan); empty otherwise
  std::vector<int64_t> layer_bits;
  /// [L][C + 1] entries per token precision class with per-token bits (codec_step.hpp token_class_entries); else empty
  std::vector<std::vector<int64_t>> token_class_entries;
  std::vector<int64_t> share_sources;  ///< [L] the layer each layer reads, when the cell shares (or a joint plan does)
  std::vector<std::string> joint_plan;  ///< [L] a joint cell's option per layer; else empty
  /// [L] the per-prompt signal's profile of this prompt (CellSetting::prompt_signal); empty without one
  std::vector<double> prompt_profile;
  /// The allocators' warnings, then sharing's, then the scorers' and selection's (comp.warnings)
  std::vector<std::string> warnings;
  /// With compression between chunks: float32 [V], the prediction after the prompt's last position computed on the
  /// cell's own chunked prefill (its earlier chunks compressed); empty otherwise (the shared prefill's holds).
  std::vector<float> last_logits;
};

/// Runs the cell sequence of `setting` on `prompt` (see the top of this file). The prefill is left untouched (the
/// compressed cache is a copy). Throws rkv::InputError naming the plugin or setting that fails (an allocator's bad
/// output, a joint plan that fits no option into its bytes, a profile of the wrong length).
CellCompression compress_cell(Backend& backend, const PrefilledPrompt& prompt, ScoreMemo& memo,
                              const CellSetting& setting);

}  // namespace rkv
