// The text `ripplekv model info` prints about a model (host/cli/cmd_model.cpp): what the loader makes of a model
// file or folder.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "model/model.hpp"

namespace rkv {

/// Writes to `os`, one "label: value" line each: path, format, sha256, architecture (and a GGUF's general.name),
/// sizes, RoPE, norm and attention settings, the layer types and windowed KV bytes of a model with sliding-window
/// layers, tensor types, what the CPU backend keeps the matrices in, the parameter count and the KV bytes per token.
/// Reads only what describe_model fills (no weights), so a described and a loaded model print the same text except
/// the sha256 line, which shows `m.sha256`, or "(not computed; --sha256 reads the whole file)" when it is empty.
/// Does not throw beyond what `os` throws; thread-safe for distinct streams.
void print_model_info(const Model& m, std::ostream& os);

/// The model's own name: a GGUF's general.name ("SmolLM2 135M Instruct"), or "" when the file carries none (and for
/// an HF folder, whose config.json names no model). Reads only metadata; does not throw; thread-safe.
std::string model_name(const Model& m);

/// A parameter count as people write it: "134.5M", "1.5B", or the plain integer below a million.
std::string human_count(int64_t n);

}  // namespace rkv
