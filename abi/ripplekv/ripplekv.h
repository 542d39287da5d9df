/*
 * ripplekv embedding API (C99; also compiles as C++). Implemented in host/capi/, exported from libripplekv.
 *
 * Rules for every function below:
 *  - Handles are opaque: rkv_context (plugin listing, profile, allocate, run, results) and rkv_model (one open model:
 *    tokenize, detokenize, generate). Option structs are passed by pointer and begin with `struct_size`: set it to
 *    sizeof(the struct); a struct_size smaller than the struct's first layout is RKV_ERROR_INVALID_ARGUMENT
 *    (structs are append-only, as in plugin.h; fields past a caller's struct_size take their documented defaults).
 *  - Every function except rkv_version, rkv_*_last_error and the free/close/destroy functions returns an rkv_status
 *    (RKV_OK or an RKV_ERROR_* code of plugin.h): bad input (a missing file, a bad TOML key, an unknown plugin id)
 *    is RKV_ERROR_INVALID_ARGUMENT, a cancelled run RKV_ERROR_CANCELLED, anything else RKV_ERROR_INTERNAL.
 *  - Errors: each handle keeps the message of its last failed call (there is no global or thread-local error).
 *    rkv_context_last_error / rkv_model_last_error return it ("" after a successful call); the pointer is borrowed
 *    from the handle and valid until the next call on that handle. A failed rkv_model_open stores its message on
 *    the context passed to it.
 *  - Ownership: every string or array the library returns through an out-pointer is owned by the caller and freed
 *    with rkv_string_free (strings) or rkv_ids_free (token ids). Inputs are borrowed for the duration of the call.
 *  - Threads: one handle is used by one thread at a time; different handles may be used from different threads,
 *    except that rkv_model_open's `threads` and rkv_run's run are process-wide (the CPU thread pool is shared, and
 *    one rkv_run per process at a time).
 */
#ifndef RIPPLEKV_RIPPLEKV_H
#define RIPPLEKV_RIPPLEKV_H

#include <stddef.h>
#include <stdint.h>

#include <ripplekv/plugin.h> /* rkv_status, RKV_OK, RKV_ERROR_* */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rkv_context rkv_context;
typedef struct rkv_model rkv_model;

/** The library version, e.g. "0.1.0". Static storage; never freed. Thread-safe. */
const char* rkv_version(void);

/** Frees a string returned by the library (NULL is allowed). */
void rkv_string_free(char* s);

/** Frees a token-id array returned by rkv_tokenize (NULL is allowed). */
void rkv_ids_free(int32_t* ids);

/** Creates a context in *out (the caller destroys it with rkv_context_destroy). Fails only when out is NULL or
 *  memory is exhausted (RKV_ERROR_OUT_OF_MEMORY). */
rkv_status rkv_context_create(rkv_context** out);

/** Destroys a context (NULL is allowed). Models opened through it stay valid. */
void rkv_context_destroy(rkv_context* ctx);

/** The message of the last failed call on ctx, "" if it succeeded; borrowed until the next call on ctx. */
const char* rkv_context_last_error(const rkv_context* ctx);

/** Lists the discovered plugins ($RIPPLEKV_PLUGIN_PATH, then the folder beside libripplekv) as JSON text:
 *  [{"id", "kind", "version", "path", "description", "params": [{"name", "type", "doc", "default", ...}]}].
 *  *out_json is freed with rkv_string_free. */
rkv_status rkv_plugins_json(rkv_context* ctx, char** out_json);

/** Options of rkv_model_open. `dtype` and `weights` were added after the first layout: a struct_size that ends
 *  before a field (RKV_MODEL_OPTIONS_SIZE_V0: before dtype; RKV_MODEL_OPTIONS_SIZE_V1: before weights) is accepted
 *  and reads that field as NULL. */
typedef struct rkv_model_options {
  size_t struct_size; /**< sizeof(rkv_model_options) */
  const char* path;   /**< GGUF file or Hugging Face model folder (required) */
  const char* backend; /**< "cpu", "cuda" or "auto" (cuda when this build has the CUDA backend and a device is
                            present); NULL means "cpu". An unknown name, or "cuda" without a device or in a build
                            without CUDA, is RKV_ERROR_UNSUPPORTED with the reason ("model.backend = cuda: no CUDA
                            device ...") on ctx, before the model file is read */
  int32_t threads;    /**< CPU threads, 0 = all cores; process-wide (sets the shared CPU thread pool) */
  const char* dtype;  /**< compute dtype: "f32" (NULL means "f32"; every backend) or "bf16" (cuda only); bf16 on
                           cpu, or an unknown name, is RKV_ERROR_UNSUPPORTED with the reason on ctx */
  const char* weights; /**< how the cpu backend holds the weights (the config key model.weights): "quantized" (NULL
                            means "quantized": Q8_0/Q4_0/Q4_1 matrices kept in their blocks, other quantized and
                            F16/BF16 matrices requantized to Q8_0 at load; README "Weights on the CPU") or
                            "f32" (everything dequantized to float32 at load: the exact oracle, about 4 bytes per
                            parameter). The cuda backend always loads float32. Another name is
                            RKV_ERROR_INVALID_ARGUMENT naming "weights" on ctx, before the model file is read */
} rkv_model_options;

/** struct_size of the first rkv_model_options layout (path, backend, threads). */
#define RKV_MODEL_OPTIONS_SIZE_V0 (offsetof(rkv_model_options, threads) + sizeof(int32_t))
/** struct_size of the second rkv_model_options layout (path, backend, threads, dtype). */
#define RKV_MODEL_OPTIONS_SIZE_V1 (offsetof(rkv_model_options, dtype) + sizeof(const char*))

/** Opens a model and its tokenizer into *out (closed with rkv_model_close). On failure *out is NULL and the message
 *  is on ctx. */
rkv_status rkv_model_open(rkv_context* ctx, const rkv_model_options* options, rkv_model** out);

/** Closes a model (NULL is allowed). */
void rkv_model_close(rkv_model* model);

/** The message of the last failed call on model, "" if it succeeded; borrowed until the next call on model. */
const char* rkv_model_last_error(const rkv_model* model);

/** Encodes UTF-8 `text` into token ids: *out_ids (freed with rkv_ids_free; NULL when *out_count is 0) and
 *  *out_count. add_bos != 0 prepends BOS when the vocabulary has one and asks for it by default; parse_special != 0
 *  turns special-token text (e.g. "<|im_start|>") into its id. */
rkv_status rkv_tokenize(rkv_model* model, const char* text, int add_bos, int parse_special, int32_t** out_ids,
                        size_t* out_count);

/** Decodes n ids into UTF-8 text *out_text (freed with rkv_string_free). render_special != 0 renders special tokens
 *  as their text. An id outside the vocabulary is RKV_ERROR_INVALID_ARGUMENT. */
rkv_status rkv_detokenize(rkv_model* model, const int32_t* ids, size_t n, int render_special, char** out_text);

/** Options of rkv_generate. Decoding is greedy (argmax); generation stops at an end-of-generation token or after
 *  max_new_tokens. Without compression_config the prompt keeps its full KV cache. With it, the prompt is prefilled,
 *  its cache compressed as the config says ([scorer], [allocator] and [budget] of the run schema, plus optional
 *  plugin_paths; other sections are ignored; as `ripplekv generate --compress CONFIG`), and decoding runs on the
 *  compacted cache.
 *  The fields from compression_config on were added after the first layout: a struct_size that ends before them
 *  (RKV_GENERATE_OPTIONS_SIZE_V0) is accepted and they read as NULL. */
typedef struct rkv_generate_options {
  size_t struct_size;     /**< sizeof(rkv_generate_options) */
  const char* prompt;     /**< UTF-8 prompt (required) */
  int chat;               /**< nonzero: wrap the prompt as one user turn of the model's chat template */
  int64_t max_new_tokens; /**< >= 0; 0 in a struct means 0 new tokens */
  const char* compression_config; /**< path of a compression TOML, or NULL for the full cache */
  const char* profile_path;       /**< profile.json (`ripplekv profile` or a run) for an allocator that needs a
                                       sensitivity profile (ripplekv); NULL otherwise. Not read when the config's
                                       [signal] is a per-prompt signal (cake, squeezeattention): that profile is
                                       computed on the prompt */
  char** out_compression_json;    /**< NULL, or receives (caller frees with rkv_string_free) a JSON object
                                       {"scorer", "allocator", "heads" (the per-head allocator or null),
                                       "prompt_tokens", "budget_total", "budgets" (one per model layer,
                                       positions), "head_budgets" (per model layer and KV head, only with a
                                       per-head allocator), "signal" and "prompt_profile" (its s_l per model
                                       layer, only with a per-prompt signal), "kv_bytes_full", "kv_bytes_kept",
                                       "kv_bytes_end" (after decoding), "warnings"};
                                       set only when compression_config is given and the call succeeds */
} rkv_generate_options;

/** struct_size of the first rkv_generate_options layout (prompt, chat, max_new_tokens). */
#define RKV_GENERATE_OPTIONS_SIZE_V0 (offsetof(rkv_generate_options, compression_config))

/** Generates a continuation of options->prompt; *out_text (freed with rkv_string_free) holds the new text only.
 *  Generation also stops at the model's context length (when the model states one).
 *  Errors (RKV_ERROR_INVALID_ARGUMENT, message on the model handle): a missing prompt, max_new_tokens < 0, a prompt
 *  that encodes to no tokens or to more tokens than the model's context length; with compression: a bad config (file, key and line named), an unknown plugin,
 *  budget.layers outside the model, a profile that is needed but missing or has the wrong number of layers; a
 *  plugin that fails (named). Uses the process-wide CPU thread pool; one call at a time per model handle. */
rkv_status rkv_generate(rkv_model* model, const rkv_generate_options* options, char** out_text);

/** Computes the sensitivity profile of the TOML config at config_path (its model, calibration data and [signal]
 *  section, as `ripplekv profile CONFIG`) and returns the profile JSON (the content of profile.json) in *out_json
 *  (freed with rkv_string_free). threads > 0 overrides the config's model.threads. Profiles are cached as the CLI
 *  caches them. */
rkv_status rkv_profile(rkv_context* ctx, const char* config_path, int32_t threads, char** out_json);

/** Options of rkv_allocate. Exactly one of budget_fraction and budget_tokens is set (nonzero; 0 = unset); a set
 *  value out of its range (a NaN or negative fraction, tokens < 1) is an error naming the field and the value. */
typedef struct rkv_allocate_options {
  size_t struct_size;       /**< sizeof(rkv_allocate_options) */
  const char* allocator;    /**< allocator plugin id, e.g. "uniform", "ripplekv" */
  const char* const* params; /**< n_params "key=value" strings of plugin parameters (may be NULL when 0) */
  size_t n_params;
  const double* profile;    /**< sensitivity per layer (n_profile values; NULL/0 when the allocator needs none) */
  size_t n_profile;
  int64_t prefix_tokens;    /**< T >= 1: prompt positions eligible for compression */
  double budget_fraction;   /**< F in (0, 1]: B = floor(F * T * L + 0.5) */
  int64_t budget_tokens;    /**< N >= 1: B = min(N, T) * L */
  int64_t n_layers;         /**< L >= 1; must equal n_profile when a profile is given (0: take it from the profile) */
} rkv_allocate_options;

/** Runs one allocator and writes the L per-layer budgets b_l (positions kept, summing to B) into budgets[0..L-1];
 *  capacity is the length of the caller's budgets array (< L is RKV_ERROR_INVALID_ARGUMENT). */
rkv_status rkv_allocate(rkv_context* ctx, const rkv_allocate_options* options, int64_t* budgets, size_t capacity);

/** Progress of rkv_run: `done` of `total` examples finished by every pending cell (a run prefills one example at a
 *  time and runs every cell on it); label names the example (borrowed for the call). */
typedef void (*rkv_progress_fn)(int64_t done, int64_t total, const char* label, void* user_data);
/** Cancellation check of rkv_run: return nonzero to stop. */
typedef int (*rkv_cancel_fn)(void* user_data);

/** Options of rkv_run. Exactly one of config_path and config_text is set. */
typedef struct rkv_run_options {
  size_t struct_size;      /**< sizeof(rkv_run_options) */
  const char* config_path; /**< a TOML config file */
  const char* config_text; /**< or TOML text; relative paths in it resolve against the current folder */
  const char* out_dir;     /**< output folder; NULL: the config's [output] dir */
  int32_t threads;         /**< > 0 overrides model.threads */
  int resume;              /**< nonzero: skip the cells, and the examples of cells, already finished in out_dir */
  rkv_progress_fn progress; /**< may be NULL; called on the calling thread after each example, once every pending
                                 cell has run on it (done and total count examples; label names the example) */
  rkv_cancel_fn cancel;    /**< may be NULL; polled every 20 ms from a watcher thread and after each progress call
                                on the calling thread, never from two threads at once */
  void* user_data;         /**< passed to progress and cancel */
} rkv_run_options;

/** Runs the ablation sweep of the config into out_dir (layout as `ripplekv run`: cells/, results.jsonl, report.md,
 *  ...). When cancel returns nonzero the run stops before its next example or cell (or inside a plugin call that
 *  polls the host's is_cancelled()) and returns RKV_ERROR_CANCELLED: finished cells stay in out_dir/cells and the
 *  examples every unfinished cell finished in out_dir/partial (each written atomically or flushed line by line), the
 *  merged outputs (results.jsonl, ...) are not written, and nothing is half-written; rerun with resume to continue.
 *  A config whose [sweep] sweeps "model.path" or "data.eval.seed" runs each value as a run of its own into
 *  out_dir/runs/<name>/ (out_dir/runs.json lists them; progress then counts the examples of every run, and label
 *  starts with the run's name) and writes the runs
 *  side by side in out_dir/report.md; each run has its own results.jsonl there (rkv_results_json gathers them). */
rkv_status rkv_run(rkv_context* ctx, const rkv_run_options* options);

/** Reads out_dir/results.jsonl and returns its records as one JSON array text in *out_json (freed with
 *  rkv_string_free). In the folder of a sweep of runs (out_dir/runs.json, no results.jsonl) the records of every
 *  run's results.jsonl, in run order, each with "run": its name. A missing file (e.g. a cancelled run), a bad line or
 *  a runs.json that is not ripplekv's is RKV_ERROR_INVALID_ARGUMENT. */
rkv_status rkv_results_json(rkv_context* ctx, const char* out_dir, char** out_json);

#ifdef __cplusplus
}
#endif

#endif /* RIPPLEKV_RIPPLEKV_H */
