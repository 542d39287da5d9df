// The joint allocator in a run (README "One byte budget"): per cell with [compression.joint], the damage of every
// option of its grid measured once on the calibration split, then per prompt the plan (cache/joint_plan.hpp) and
// the compressed cache it describes.
//
//   calibration -> D_l(o) per option (the damage signal's profiles, cached like any profile)
//   prompt of T -> bytes_l(o) -> choose_joint_plan -> spend_leftover -> compress (b_l) -> share -> encode (bits_l)
//
// Bytes of layer l keeping b entries at `bits`: H_kv b e(bits), with e the bytes of one entry of one KV head
// (cache/layer_bits.hpp codec_entry_bytes: packed key and value rows, scales, int32 position; float32: 8 d + 4).
// The budget is floor(x sum_{l in A} H_kv span_l e(32)) for budget.bytes_fraction = x: x of the full float32
// cache's bytes over the compressible layers, as token_fraction() gives every other cell at the same x.
//
// Thread rules: as the Backend.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/joint_plan.hpp"
#include "plugin/params.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/plan/joint_spec.hpp"

namespace rkv {

/// The measured damage of every option of a cell's grid.
struct JointDamageTable {
  std::vector<JointOption> options;         ///< joint_options(spec.fractions, spec.bits, spec.share)
  std::vector<std::vector<double>> damage;  ///< [O][L] D_l(o), nats per token; +inf for sharing layer 0
};

/// The damage signal's params (runner/profile/damage_signal.hpp) that measure option `o` of `spec`: {fraction, bits, group,
/// symmetric} with of = "compression", or of = "sharing"; validated against its descriptor.
ParamSet joint_option_damage_params(const JointSpec& spec, const JointOption& o);

/// True when option `o` keeps every entry in float32: it does no damage and is not measured.
bool joint_option_is_lossless(const JointOption& o);

/// The plan of one prompt of T positions.
struct JointLayerPlan {
  std::vector<int64_t> layers;   ///< the layers of A that keep a cache, ascending (compress_prompt's layers)
  std::vector<int64_t> budgets;  ///< [|layers|] b_l, 1 <= b_l <= span_l
  std::vector<int> bits;         ///< [L] bits of every model layer (32: float32; shared and outside A: 32)
  std::vector<int64_t> sources;  ///< [L] the layer each model layer reads (itself unless shared)
  std::vector<std::string> chosen;  ///< [L] the option each layer took ("f=0.5 int4", "shared"; "whole" outside A)
  int64_t bytes = 0;             ///< the plan's bytes after spend_leftover (<= budget)
  int64_t budget = 0;            ///< the byte budget
};

/// The plan of `spec` for a prompt of T positions over the compressible layers `layers_A` (ascending) with
/// budget.bytes_fraction `x`, from the measured `table`: option bytes as the top of this file says (b = floor(f
/// span_l + 0.5), at least 1), choose_joint_plan over A, spend_leftover with the most damaged layers first, and each
/// shared layer reading the nearest earlier layer that keeps its cache (an earlier layer outside A counts). Throws
/// rkv::InputError when no plan fits the budget (naming bytes_fraction), or when the table does not match the model.
JointLayerPlan plan_joint(const JointSpec& spec, const JointDamageTable& table, const ModelConfig& mc,
                          const std::vector<int64_t>& layers_A, int64_t prefix_tokens, double x);

/// Compresses `prompt` as `jp` says: compress_prompt over jp.layers to jp.budgets ranked by `scorer`, the shared
/// layers shared (runner/compress/share.hpp share_compressed), and every layer with bits < 32 encoded with
/// spec.codec(bits) (Backend::encode_layer); bytes_kept is the packed cache's bytes.
CompressedPrompt compress_joint(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorer,
                                ScoreMemo& memo, const JointSpec& spec, const JointLayerPlan& jp, bool rerotate);

}  // namespace rkv
