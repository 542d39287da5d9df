// The text `ripplekv model info` prints about a model (host/cli/cmd_model.cpp): what the loader makes of a model
// file or folder.
#pragma once
#include <ostream>

#include "model/model.hpp"

namespace rkv {

/// Writes to `os`, one "label: value" line each: path, format, sha256, architecture (and a GGUF's general.name),
/// sizes, RoPE, norm and attention settings, the layer types and windowed KV bytes of a model with sliding-window
/// layers, tensor types, what the CPU backend keeps the matrices in, the parameter count and the KV bytes per token.
/// Reads only what describe_model fills (no weights), so a described and a loaded model print the same text except
/// the sha256 line, which shows `m.sha256`, or "(not computed; --sha256 reads the whole file)" when it is empty.
/// Does not throw beyond what `os` throws; thread-safe for distinct streams.
void print_model_info(const Model& m, std::ostream& os);

}  // namespace rkv
