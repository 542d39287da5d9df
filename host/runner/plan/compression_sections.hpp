// The [compression] tables of a cell ([compression.decode], .codec, .share, .joint) and budget.layers: each read
// into its spec with every value range-checked where it is read; what depends on the model (the head dim, the layer
// count, sliding windows) is checked once the model is loaded (runner/compress/ checks).
//
// Thread rules: pure functions of the TOML.
#pragma once
#include <cstdint>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "cache/codec.hpp"
#include "runner/plan/decode_spec.hpp"
#include "runner/plan/joint_spec.hpp"
#include "runner/plan/share_spec.hpp"
#include "runner/plan/toml_reader.hpp"

namespace rkv {

/// The keys of [compression.<table>] for table "decode", "codec", "share" or "joint": what the section allows and a
/// sweep may vary ("compression.<table>.<key>"); empty for any other name.
const std::vector<std::string>& compression_table_keys(const std::string& table);

/// [compression.decode] of `root`: policy (a name of decode_policies()) and the parameters, each policy reading its
/// own (sinks: rolling; recent: h2o; interval, target: periodic), so one section serves a sweep over policies.
DecodeSpec parse_decode_section(const TomlContext& c, const toml::table& root);

/// [compression.codec] of `root` (cache/codec.hpp): format, bits, group, symmetric, residual, layer_bits, bits_ratio,
/// token_bits and token_shares; each format reads the keys it uses (so one section serves a sweep over formats).
CodecSpec parse_codec_section(const TomlContext& c, const toml::table& root);

/// [compression.share] of `root`: groups = g (CLA@g), map = [[layer, source], ...] or count = k, at most one of them.
ShareSpec parse_share_section(const TomlContext& c, const toml::table& root);

/// [compression.joint] of `root`: plan ("none" | "damage"), fractions, bits, share, group, symmetric.
JointSpec parse_joint_section(const TomlContext& c, const toml::table& root);

/// budget.layers of the [budget] table: model layer indices >= 0, each at most once (the set A), or the string
/// "global" (then `*global_only` is set and the list is empty).
std::vector<int64_t> compressible_layers(const TomlContext& c, const toml::table& budget, bool* global_only);

}  // namespace rkv
