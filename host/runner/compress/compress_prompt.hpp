// Eviction of one prompt's cache to a cell's budgets (docs/ARCHITECTURE.md "Data flow"): per compressible layer, the
// layer's scorer ranks the positions (runner/compress/score_memo.hpp), the host keeps the protected positions and the
// top scores (cache/selection.hpp), and the backend compacts the layer (physically smaller; never sentinel keys).
//
// Thread rules: the backend's rules apply to every call; a ScoreMemo belongs to one thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/compress/score_memo.hpp"
#include "runner/compress/scorers.hpp"

namespace rkv {

/// The cache of one cell after compression.
struct CompressedPrompt {
  std::unique_ptr<BackendCache> cache;  ///< compacted per layer to [H_kv, b_l, d] or per head (layers not in A whole)
  std::vector<int64_t> budgets;         ///< per model layer: b_l, or T for a layer left whole
  std::vector<std::vector<int64_t>> head_budgets;  ///< per model layer: b[l, h] (empty rows: the layer's b_l)
  size_t bytes_full = 0;                ///< cache bytes before compression (T positions every layer)
  size_t bytes_kept = 0;                ///< cache bytes after
  /// Position of the first token fed after the prompt: T (original positions, the default), or with rerotate the
  /// longest KV head over all layers after re-rotation, i.e. the cache length (kvpress' pipeline after
  /// KeyRerotationPress: context_length = cache.get_seq_length(), kvpress/pipeline.py; equal to its value whenever
  /// every layer keeps the same count, as kvpress does). Every kept key then lies before the new tokens.
  int64_t next_position = 0;
  /// With rerotate, per model layer the original prompt position of every entry held, KV head by KV head in cache
  /// order (int32, the stored positions before re-rotation; DecodePolicy::begin seeds accumulated attention from
  /// them); an empty row: the stored positions are the original ones (always without rerotate).
  std::vector<std::vector<int32_t>> prompt_positions;
  std::vector<std::string> warnings;    ///< scorer and selection warnings (e.g. b_l below the protected count)
  double seconds = 0;                   ///< scoring + selection + compaction wall time
};

/// Copies `prompt`'s full cache and compresses every layer of `layers` (model layer indices, the set A) to
/// `budgets` (one per entry of `layers`; b_l >= span_l leaves the layer whole), layer l ranked by `scorers.at(l)` (a
/// ScorerUse for a homogeneous cell, or a route). A sliding-window layer
/// holds only the last span_l = min(T, W) positions (runner/compress/sliding_window.hpp): its selection is made among those,
/// and every sliding layer outside A or left whole is cut to them too; `budgets` in the result are then at most
/// span_l, and bytes_full is what the uncompressed cache holds once cut to its windows (window_bytes()). With `head_budgets`
/// ([|A|][H_kv], from allocate_cell) each KV head keeps its own count (select_positions_per_head). With `rerotate`
/// ([compression] rerotate; kvpress KeyRerotationPress) every compacted layer's kept keys are re-rotated right after
/// its compaction to the contiguous positions 0 .. b_{l,h} - 1 of each KV head (Backend::rerotate_layer; a layer left
/// whole already is at 0 .. T - 1), and next_position is the cache length instead of T. Throws rkv::InputError for
/// rerotate on a model with sliding-window layers (re-rotated positions would move entries across the window).
CompressedPrompt compress_prompt(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorers,
                                 const std::vector<int64_t>& layers, const std::vector<int64_t>& budgets,
                                 ScoreMemo& memo, const std::vector<std::vector<int64_t>>* head_budgets = nullptr,
                                 bool rerotate = false);

/// Bytes the full cache `full` of a prompt of T positions holds once every sliding-window layer keeps only its
/// window (Backend::bytes of a cut copy; full.bytes() on a model without windows shorter than T): what a compressed
/// cell's kv_bytes is compared against.
size_t window_bytes(Backend& backend, const BackendCache& full, int64_t prefix_tokens);

}  // namespace rkv
