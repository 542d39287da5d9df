// C API: open/close a model, tokenize, detokenize, greedy generation with the full or a compressed cache
// (abi/ripplekv/ripplekv.h).
#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>

#include "capi/capi_handles.hpp"
#include "runner/decode/generate_compressed.hpp"
#include "runner/decode/generate.hpp"
#include "tokenizer/chat_template.hpp"

using rkv::capi::guarded;
using rkv::capi::require;

extern "C" {

rkv_status rkv_model_open(rkv_context* ctx, const rkv_model_options* o, rkv_model** out) {
  if (!ctx) return RKV_ERROR_INVALID_ARGUMENT;
  if (out) *out = nullptr;
  rkv_status unsupported = RKV_OK;
  const rkv_status st = guarded(ctx->last_error, [&] {
    require(out, "out");
    require(o, "options");
    if (o->struct_size < RKV_MODEL_OPTIONS_SIZE_V0)
      throw rkv::InputError("rkv_model_options.struct_size " + std::to_string(o->struct_size) + " is too small");
    require(o->path, "options->path");
    const std::string kind = o->backend ? o->backend : "cpu";
    if (o->threads < 0) throw rkv::InputError("threads must be >= 0 (got " + std::to_string(o->threads) + ")");
    const bool has_dtype = o->struct_size >= RKV_MODEL_OPTIONS_SIZE_V1;
    const bool has_weights = o->struct_size >= offsetof(rkv_model_options, weights) + sizeof(const char*);
    const std::string weights = has_weights && o->weights ? o->weights : "quantized";
    if (weights != "quantized" && weights != "f32")
      throw rkv::InputError("weights must be \"quantized\" or \"f32\" (got \"" + weights + "\")");
    rkv::BackendOptions bo;
    bo.threads = o->threads;
    bo.dtype = has_dtype && o->dtype ? o->dtype : "f32";
    try {
      rkv::check_backend_available(kind, bo);
    } catch (const rkv::InputError&) {
      unsupported = RKV_ERROR_UNSUPPORTED;  // an unknown backend, or cuda without a device or a CUDA build
      throw;
    }
    // weights as model.weights (default: the CPU backend's quantized fast path); cuda loads float32 whatever it says.
    const rkv::WeightStorage storage = weights == "f32" ? rkv::WeightStorage::f32 : rkv::WeightStorage::quantized;
    rkv::Model model = rkv::load_model(o->path, rkv::weights_for_backend(kind, storage));
    rkv::Tokenizer tok = model.gguf ? rkv::Tokenizer::from_gguf(*model.gguf) : rkv::Tokenizer::from_path(o->path);
    auto m = std::make_unique<rkv_model>(rkv_model{std::move(model), std::move(tok), std::string(), nullptr});
    m->backend = rkv::make_backend(kind, m->model, bo);
    *out = m.release();
  });
  return unsupported != RKV_OK ? unsupported : st;
}

void rkv_model_close(rkv_model* model) { delete model; }

const char* rkv_model_last_error(const rkv_model* model) {
  return model ? model->last_error.c_str() : "model is NULL";
}

rkv_status rkv_tokenize(rkv_model* m, const char* text, int add_bos, int parse_special, int32_t** out_ids,
                        size_t* out_count) {
  if (!m) return RKV_ERROR_INVALID_ARGUMENT;
  return guarded(m->last_error, [&] {
    require(text, "text");
    require(out_ids, "out_ids");
    require(out_count, "out_count");
    *out_ids = nullptr;
    *out_count = 0;
    const std::vector<int32_t> ids =
        m->tokenizer.encode(text, add_bos != 0 && m->tokenizer.add_bos_by_default(), parse_special != 0);
    if (ids.empty()) return;
    int32_t* p = static_cast<int32_t*>(std::malloc(ids.size() * sizeof(int32_t)));
    if (!p) throw std::bad_alloc();
    std::memcpy(p, ids.data(), ids.size() * sizeof(int32_t));
    *out_ids = p;
    *out_count = ids.size();
  });
}

rkv_status rkv_detokenize(rkv_model* m, const int32_t* ids, size_t n, int render_special, char** out_text) {
  if (!m) return RKV_ERROR_INVALID_ARGUMENT;
  return guarded(m->last_error, [&] {
    require(out_text, "out_text");
    if (n > 0) require(ids, "ids");
    for (size_t i = 0; i < n; ++i)
      if (ids[i] < 0 || ids[i] >= m->tokenizer.n_vocab())
        throw rkv::InputError("token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                              " is outside the vocabulary [0, " + std::to_string(m->tokenizer.n_vocab()) + ")");
    const std::vector<int32_t> v(ids, ids + n);
    *out_text = rkv::capi::copy_string(m->tokenizer.decode(v, render_special != 0));
  });
}

rkv_status rkv_generate(rkv_model* m, const rkv_generate_options* o, char** out_text) {
  if (!m) return RKV_ERROR_INVALID_ARGUMENT;
  return guarded(m->last_error, [&] {
    require(o, "options");
    require(out_text, "out_text");
    if (o->struct_size < RKV_GENERATE_OPTIONS_SIZE_V0)
      throw rkv::InputError("rkv_generate_options.struct_size " + std::to_string(o->struct_size) + " is too small");
    require(o->prompt, "options->prompt");
    if (o->max_new_tokens < 0) throw rkv::InputError("max_new_tokens must be >= 0");
    // Fields after the first layout are read only when the caller's struct has them.
    const bool has_v1 = o->struct_size >= sizeof(rkv_generate_options);
    const char* compression_config = has_v1 ? o->compression_config : nullptr;
    const char* profile_path = has_v1 ? o->profile_path : nullptr;
    char** out_compression_json = has_v1 ? o->out_compression_json : nullptr;
    if (!compression_config && profile_path)
      throw rkv::InputError("profile_path is given without compression_config");

    const rkv::Tokenizer& tok = m->tokenizer;
    std::vector<int32_t> ids;
    if (o->chat) {
      const rkv::ChatTemplate tmpl = rkv::ChatTemplate::for_tokenizer(tok);
      ids = tok.encode(tmpl.apply({{"user", o->prompt}}, true), tok.add_bos_by_default(), true);
    } else {
      ids = tok.encode(o->prompt, tok.add_bos_by_default(), false);
    }
    if (ids.empty()) throw rkv::InputError("the prompt encodes to no tokens");
    // As `ripplekv generate`: the prompt must fit the model's context length, and generation stops there.
    int64_t max_new = o->max_new_tokens;
    const int64_t n_ctx = m->model.config.context_length, n_prompt = static_cast<int64_t>(ids.size());
    if (n_ctx > 0 && n_prompt > n_ctx)
      throw rkv::InputError("the prompt has " + std::to_string(n_prompt) +
                            " tokens, more than the model's context length " + std::to_string(n_ctx));
    if (n_ctx > 0) max_new = std::min(max_new, n_ctx - n_prompt);

    if (!compression_config) {
      rkv::GenerateOptions g;
      g.max_new_tokens = max_new;
      g.stop_ids = tok.end_of_generation_ids();  // default sampling: temperature 0 = greedy
      const rkv::GenerateResult r = rkv::generate(*m->backend, ids, g);
      *out_text = rkv::capi::copy_string(tok.decode(r.tokens, false));
      return;
    }
    const rkv::CompressedGeneration g = rkv::generate_compressed(
        *m->backend, tok, ids, compression_config, profile_path ? profile_path : "", max_new);
    std::string info;
    if (out_compression_json) {
      nlohmann::json j;
      j["scorer"] = g.scorer;
      j["allocator"] = g.allocator;
      j["heads"] = g.heads.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.heads);
      if (!g.head_budgets.empty()) j["head_budgets"] = g.head_budgets;
      j["decode"] = g.decode;
      j["prompt_tokens"] = g.prompt_tokens;
      j["budget_total"] = g.budget_total;
      j["budgets"] = g.budgets;
      if (!g.prompt_profile.empty()) {
        j["signal"] = g.signal;
        j["prompt_profile"] = g.prompt_profile;
      }
      j["kv_bytes_full"] = g.bytes_full;
      j["kv_bytes_kept"] = g.bytes_kept;
      j["kv_bytes_end"] = g.bytes_end;
      j["warnings"] = g.warnings;
      info = j.dump();
    }
    *out_text = rkv::capi::copy_string(tok.decode(g.tokens, false));
    if (out_compression_json) *out_compression_json = rkv::capi::copy_string(info);
  });
}

}  // extern "C"
