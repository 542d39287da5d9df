// The reproducibility manifest every cell file records ("manifest"): what reproductions of LLM evaluations most often
// get wrong (lm-eval-harness and LongBench issue threads): the tokenizer, the chat template, the stop ids and the
// generation settings of each task. Together with each example's "input" (runner/tasks/example_input.hpp: the text
// window or prompt, its token ids' hash and its final length after the chat template) it pins a cell's inputs.
// Thread rules: pure function of its arguments.
#pragma once
#include <nlohmann/json.hpp>

#include "model/model.hpp"
#include "runner/plan/run_plan.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

/// {"model": {name, file, architecture, parameters, n_layers, n_heads, n_kv_heads, head_dim, context_length,
///            sliding_window},
///  "tokenizer": {description, n_vocab, vocab_sha256, bos, eos, eot, add_bos},
///  "chat_template": {name, jinja_sha256},
///  "generation": {decoding: "greedy", stop_ids, and per task of the plan its settings: lm_fidelity prefix and
///                 teacher-forced continuation tokens, needle max_new_tokens and answer prefix, longbench max tokens}}.
/// vocab_sha256 hashes every token's text and attribute in id order (the merges are pinned by the model file's
/// sha256, which the cell records beside it); jinja_sha256 hashes the template text the model file carries ("" when
/// none). "model" is what the report's headline names the model by: the GGUF's general.name ("" when it has none),
/// the file or folder name, and the shape (parameters counted as Model::parameter_count; sliding_window 0 when none).
/// Throws nothing beyond std::bad_alloc.
nlohmann::json reproducibility_manifest(const RunPlan& plan, const Tokenizer& tokenizer, const Model& model);

}  // namespace rkv
