/*
 * ripplekv plugin ABI, version 1 (C99; also compiles as C11, C++17 and C++20).
 *
 * A plugin library is a shared object exporting exactly one function, rkv_plugin_library_get(). It returns a library
 * struct that lists descriptors (one per plugin: id, kind, version, description, param spec) and creates instances.
 * An instance hands out per-kind vtables by versioned interface id ("rkv.allocator/1", "rkv.scorer/1",
 * "rkv.signal/1"), so a breaking change to one kind is a new id served beside the old one.
 *
 * Rules that hold for every struct and function in this header (docs/ARCHITECTURE.md "Plugin ABI"):
 *  - Every struct begins with `struct_size` (the sizeof the writer was compiled with). Structs are append-only: a
 *    reader reads a field only if it lies inside `struct_size` (use RKV_HAS_FIELD). Structs are never passed by value.
 *  - No C++ type, exception or allocation crosses the boundary. Strings are NUL-terminated UTF-8.
 *  - Every call returns an rkv_status; a message, when there is one, goes to the caller-supplied rkv_diagnostics sink
 *    (there is no thread-local "last error").
 *  - Tensors are DLPack DLTensor views (dlpack/dlpack.h), borrowed for the duration of the call. Outputs are allocated
 *    by the host and filled by the plugin. CUDA work goes on the stream the host passes.
 *  - Threading: library and descriptor functions are thread-safe. The host never calls one instance concurrently;
 *    different instances may be called from different threads at the same time.
 *  - Lifetime: the host keeps a library loaded for the life of the process; pointers returned by the library
 *    (descriptors, strings, param specs) stay valid that long.
 */
#ifndef RIPPLEKV_PLUGIN_H
#define RIPPLEKV_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ------------------------------------------------------------------------------------------------- */

/** ABI major version: a library built for another major is refused (the host names both versions). */
#define RKV_ABI_VERSION_MAJOR 1
/** ABI minor version: additions only (appended struct fields, new interface ids); older and newer minors load. */
#define RKV_ABI_VERSION_MINOR 7

/** Interface ids of the three kinds, version 1. */
#define RKV_INTERFACE_ALLOCATOR_V1 "rkv.allocator/1"
#define RKV_INTERFACE_ALLOCATOR_V2 "rkv.allocator/2" /**< per-head budgets b[l, h] (ABI minor 1) */
#define RKV_INTERFACE_SCORER_V1 "rkv.scorer/1"
#define RKV_INTERFACE_SIGNAL_V1 "rkv.signal/1"
#define RKV_INTERFACE_PROMPT_SIGNAL_V1 "rkv.prompt_signal/1" /**< a signal computed on each prompt (ABI minor 7) */
/** Host service ids (rkv_host.get_service). */
#define RKV_SERVICE_PROFILER_V1 "rkv.profiler/1"

/** Nonzero when `field` of struct pointer `ptr` lies inside the `struct_size` its writer declared. */
#define RKV_HAS_FIELD(ptr, type, field) \
  ((ptr) != NULL && (size_t)(ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* ---- Status and diagnostics ----------------------------------------------------------------------------------- */

/** Result of every call. Values are stable; new codes may be added (treat unknown nonzero codes as errors). */
typedef int32_t rkv_status;
#define RKV_OK 0
#define RKV_ERROR_INVALID_ARGUMENT 1 /**< bad input: wrong shape, dtype, value or unknown id */
#define RKV_ERROR_INTERNAL 2         /**< a bug or an exception inside the callee */
#define RKV_ERROR_CANCELLED 3        /**< the host's cancellation check said stop */
#define RKV_ERROR_UNSUPPORTED 4      /**< the request needs a feature this plugin or host lacks */
#define RKV_ERROR_OUT_OF_MEMORY 5    /**< an allocation failed */

/** Levels of a diagnostic message. */
typedef int32_t rkv_diag_level;
#define RKV_DIAG_ERROR 0   /**< explains a non-OK status */
#define RKV_DIAG_WARNING 1 /**< the call succeeded, but the run's records must carry this */
#define RKV_DIAG_INFO 2    /**< progress or detail; the host may drop it */

/**
 * Diagnostics sink supplied by the caller of a plugin function.
 * report(): thread rule: called only from within the call it was passed to, on that call's thread; `message` is
 * borrowed for the duration of report() (the sink copies it). `ctx` is the caller's, opaque to the plugin.
 */
typedef struct rkv_diagnostics {
  uint32_t struct_size;
  void* ctx;
  void (*report)(void* ctx, rkv_diag_level level, const char* message);
} rkv_diagnostics;

/* ---- Parameters ----------------------------------------------------------------------------------------------- */

/** Types of plugin parameters. */
typedef int32_t rkv_param_type;
#define RKV_PARAM_BOOL 1   /**< true/false */
#define RKV_PARAM_INT 2    /**< int64, bounds inclusive */
#define RKV_PARAM_FLOAT 3  /**< double, bounds inclusive */
#define RKV_PARAM_CHOICE 4 /**< one string among `choices` */
#define RKV_PARAM_STRING 5 /**< free string */

/**
 * One parameter of a plugin, as its TOML table and `ripplekv plugins describe` show it. The host validates every
 * user value against it before an instance is created (unknown key, wrong type, out of range, not among choices).
 * The spec itself is checked when the library loads, which is refused (naming the plugin, the parameter and the
 * field) for a name that is no identifier or repeats, min or max NaN, min > max, a non-finite float default, a
 * default outside [min, max], or a choice whose default is not among its choices.
 * Static data owned by the library; valid for the process lifetime.
 */
typedef struct rkv_param_spec {
  uint32_t struct_size;
  const char* name;            /**< TOML key, [a-z_][a-z0-9_]*, unique within the plugin */
  rkv_param_type type;
  const char* doc;             /**< one line, with units */
  int32_t default_bool;        /**< RKV_PARAM_BOOL default (0 or 1) */
  int64_t default_int;         /**< RKV_PARAM_INT default */
  double default_float;        /**< RKV_PARAM_FLOAT default */
  const char* default_string;  /**< RKV_PARAM_CHOICE / RKV_PARAM_STRING default */
  int32_t has_min;             /**< INT/FLOAT: nonzero when `min` applies */
  int32_t has_max;             /**< INT/FLOAT: nonzero when `max` applies */
  double min;                  /**< inclusive lower bound */
  double max;                  /**< inclusive upper bound */
  const char* const* choices;  /**< CHOICE: NULL-terminated list of allowed values; NULL otherwise */
} rkv_param_spec;

/**
 * Typed parameter getters handed to create(). The host has validated every value and filled defaults, so a getter
 * for a declared parameter of the matching type returns RKV_OK; an undeclared name or a type mismatch returns
 * RKV_ERROR_INVALID_ARGUMENT. Strings returned by get_string are borrowed until create() returns (copy them).
 * is_set() tells whether the user gave the value explicitly (1) or it is the default (0).
 * Thread rule: valid only during the create() call that received it, on that thread.
 */
typedef struct rkv_params {
  uint32_t struct_size;
  const void* ctx;
  rkv_status (*get_bool)(const void* ctx, const char* name, int32_t* out);
  rkv_status (*get_int)(const void* ctx, const char* name, int64_t* out);
  rkv_status (*get_float)(const void* ctx, const char* name, double* out);
  rkv_status (*get_string)(const void* ctx, const char* name, const char** out);
  int32_t (*is_set)(const void* ctx, const char* name);
} rkv_params;

/* ---- Host services -------------------------------------------------------------------------------------------- */

/**
 * Services the host offers an instance. Passed to create(); valid until the instance is destroyed.
 * is_cancelled(): nonzero once the caller asked to stop; long plugin calls poll it and return RKV_ERROR_CANCELLED.
 *   Thread-safe; cheap (an atomic load).
 * get_service(): a versioned service table by id (e.g. RKV_SERVICE_PROFILER_V1), or NULL when this host has none.
 *   Thread-safe; the table stays valid until the instance is destroyed.
 */
typedef struct rkv_host {
  uint32_t struct_size;
  uint32_t abi_major; /**< the host's RKV_ABI_VERSION_MAJOR */
  uint32_t abi_minor; /**< the host's RKV_ABI_VERSION_MINOR */
  void* ctx;
  int32_t (*is_cancelled)(void* ctx);
  const void* (*get_service)(void* ctx, const char* service_id);
} rkv_host;

/* ---- Descriptors, instances, the library ----------------------------------------------------------------------- */

/** Plugin kinds. */
typedef int32_t rkv_plugin_kind;
#define RKV_KIND_SIGNAL 1    /**< layer sensitivity s[L] */
#define RKV_KIND_SCORER 2    /**< which positions a layer keeps: scores[H_kv, T] */
#define RKV_KIND_ALLOCATOR 3 /**< how many positions each layer keeps: b[|A|] */

/** Descriptor flags. */
#define RKV_FLAG_NEEDS_PROFILE ((uint64_t)1) /**< allocator: uses the sensitivity profile (others get none) */
#define RKV_FLAG_SUPPORTS_CUDA ((uint64_t)2) /**< accepts CUDA DLTensors and the host's stream */
#define RKV_FLAG_NEEDS_SCORES ((uint64_t)4)  /**< allocator/2: uses the scorer's scores (others get none) */
/** ABI minor 7, signal: serves rkv.prompt_signal/1 and is computed on each prompt being compressed, from the prefill's
 *  statistics, instead of once on calibration windows (it need not serve rkv.signal/1). */
#define RKV_FLAG_PER_PROMPT ((uint64_t)8)

/**
 * What a plugin is, readable without creating an instance. Static data owned by the library.
 * id: reverse-DNS, unique across all loaded libraries (e.g. "org.ripplekv.allocator.uniform"); its last component
 *     ("uniform") may be used on the command line when unambiguous.
 * params: NULL-terminated array of pointers (pointers, so each spec may carry its own struct_size).
 */
typedef struct rkv_plugin_descriptor {
  uint32_t struct_size;
  const char* id;
  rkv_plugin_kind kind;
  const char* version;     /**< plugin version, "MAJOR.MINOR.PATCH" */
  const char* description; /**< one line */
  const rkv_param_spec* const* params;
  uint64_t flags;          /**< RKV_FLAG_* */
} rkv_plugin_descriptor;

/**
 * A created plugin. Owned by the host from create() until destroy().
 * get_interface(): the vtable for `interface_id` (e.g. RKV_INTERFACE_ALLOCATOR_V1) or NULL when not served; the
 *   table is valid until destroy(). destroy(): frees the instance; `self` is invalid afterwards.
 * Thread rule: the host never calls one instance from two threads at once.
 */
typedef struct rkv_plugin_instance {
  uint32_t struct_size;
  void* plugin_data; /**< the plugin's own state */
  const void* (*get_interface)(const struct rkv_plugin_instance* self, const char* interface_id);
  void (*destroy)(struct rkv_plugin_instance* self);
} rkv_plugin_instance;

/**
 * The library: what rkv_plugin_library_get() returns. Static data owned by the library.
 * abi_major/abi_minor: the ABI this library was built for (RKV_ABI_VERSION_* of its headers), always filled so the
 *   host can name both versions when they are incompatible.
 * descriptor_count()/descriptor_at(): thread-safe; descriptor_at returns NULL for an index out of range.
 * create(): makes an instance of `plugin_id`. `host`, `params` and `diag` are borrowed for the call (`host` and the
 *   tables it serves stay valid for the instance's life). On success *out is set and RKV_OK returned; on failure
 *   *out is untouched, a message goes to `diag`, and a non-OK status is returned. Thread-safe.
 */
typedef struct rkv_plugin_library {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name; /**< library name for messages, e.g. "ripplekv builtin allocators" */
  uint32_t (*descriptor_count)(void);
  const rkv_plugin_descriptor* (*descriptor_at)(uint32_t index);
  rkv_status (*create)(const char* plugin_id, const rkv_host* host, const rkv_params* params,
                       const rkv_diagnostics* diag, rkv_plugin_instance** out);
} rkv_plugin_library;

/**
 * The one exported entry point, looked up by name "rkv_plugin_library_get".
 * host_abi_major/minor: the host's ABI version, so a library may adapt or refuse. Always returns the library struct
 * (whose abi_major says what it was built for) or NULL only on failure. Thread-safe; cheap; may be called repeatedly.
 */
typedef const rkv_plugin_library* (*rkv_plugin_library_get_fn)(uint32_t host_abi_major, uint32_t host_abi_minor);
#define RKV_PLUGIN_ENTRY_SYMBOL "rkv_plugin_library_get"

/* ---- rkv.allocator/1 ------------------------------------------------------------------------------------------ */

/**
 * What an allocator is asked (docs/ARCHITECTURE.md "Budget semantics"). Borrowed for the call.
 * profile: float64 [n_layers] on the CPU, the sensitivity profile over the compressible layers A (index = rank in
 *   A), or NULL when the plugin did not set RKV_FLAG_NEEDS_PROFILE. May be negative; never NaN or infinite.
 * budget_total: B, positions kept summed over A (>= n_layers).
 * prefix_tokens: T, positions eligible for compression per layer.
 * n_layers: |A|.
 * protected_count: positions the run's scorer protects per layer (sinks + observation/recent window), or -1 when
 *   there is no scorer (standalone `ripplekv allocate`).
 * layer_spans (ABI minor 3; read it only when RKV_HAS_FIELD says it is there): int64 [n_layers] on the CPU, span_l =
 *   the entries layer l can hold, min(T, window_l) for a sliding-window layer (Gemma 2/3), T otherwise; 1 <= span_l
 *   <= T. B is a fraction of sum span_l, and the host caps every b_l at span_l (water-filling against per-layer caps),
 *   so an allocator that wants every layer to keep the same fraction returns x_l proportional to span_l. NULL, or
 *   absent in an older host's struct, means every span is T.
 */
typedef struct rkv_allocation_request {
  uint32_t struct_size;
  const DLTensor* profile;
  int64_t budget_total;
  int64_t prefix_tokens;
  int64_t n_layers;
  int64_t protected_count;
  const DLTensor* layer_spans;
} rkv_allocation_request;

/**
 * Allocator vtable "rkv.allocator/1".
 * allocate(): fills `budgets_out`, a host-owned float64 [n_layers] CPU tensor, with finite non-negative reals whose
 *   sum is within 1e-6 * B of B. The host validates them (anything else is rejected naming the plugin id) and
 *   integerizes (water-filling at T, largest remainder). Warnings (e.g. a fallback) go to `diag` at
 *   RKV_DIAG_WARNING and reach the run's records. Thread rule: never called concurrently on one instance.
 */
typedef struct rkv_allocator_v1 {
  uint32_t struct_size;
  rkv_status (*allocate)(rkv_plugin_instance* self, const rkv_allocation_request* request, DLTensor* budgets_out,
                         const rkv_diagnostics* diag);
} rkv_allocator_v1;

/* ---- rkv.allocator/2 (ABI minor 1) --------------------------------------------------------------------------- */

/**
 * What a per-head allocator is asked (docs/ARCHITECTURE.md "Per-head budgets"). Borrowed for the call.
 * Budgets are in cache entries: b[l, h] entries kept by KV head h of layer l. The total is H_kv x B, the entries a
 * uniform split of the run's budget B (rkv.allocator/1) holds, so a per-head run keeps the same bytes.
 * profile: float64 [n_layers] on the CPU, as in rkv.allocator/1 (NULL unless RKV_FLAG_NEEDS_PROFILE).
 * scores: float32 [n_layers, n_kv_heads, prefix_tokens] on the CPU, the run scorer's scores (larger = keep), or NULL
 *   unless the plugin sets RKV_FLAG_NEEDS_SCORES. Finite.
 * protected_mask: uint8 [prefix_tokens] on the CPU, 1 at the positions every head keeps whatever the scores say
 *   (the scorer's sinks and recent window), or NULL when there is no scorer.
 * layer_budgets: int64 [n_layers] on the CPU, or NULL. When set, the layer budgets come from an rkv.allocator/1
 *   plugin (composition: `[allocator] heads = "<id>"`), and row l of the output must sum to n_kv_heads x
 *   layer_budgets[l]; when NULL, the plugin splits the whole total over layers and heads.
 * budget_total: H_kv x B, entries summed over every (layer, KV head) of A.
 * prefix_tokens: T. n_layers: |A|. n_kv_heads: H_kv.
 * protected_count: positions the scorer protects per head (the ones of protected_mask), or -1 with no scorer.
 * layer_spans (ABI minor 3; read it only when RKV_HAS_FIELD says it is there): int64 [n_layers] on the CPU, as in
 *   rkv_allocation_request: each head of layer l holds at most span_l entries (the host caps b[l, h] there); the
 *   scores of a sliding-window layer at positions before T - span_l are those of entries the layer no longer holds
 *   (ignore them). NULL, or absent, means every span is T.
 */
typedef struct rkv_head_allocation_request {
  uint32_t struct_size;
  const DLTensor* profile;
  const DLTensor* scores;
  const DLTensor* protected_mask;
  const DLTensor* layer_budgets;
  int64_t budget_total;
  int64_t prefix_tokens;
  int64_t n_layers;
  int64_t n_kv_heads;
  int64_t protected_count;
  const DLTensor* layer_spans;
} rkv_head_allocation_request;

/**
 * Allocator vtable "rkv.allocator/2", served beside (or instead of) "rkv.allocator/1".
 * allocate_heads(): fills `budgets_out`, a host-owned float64 [n_layers, n_kv_heads] CPU tensor (row-major), with
 *   finite non-negative reals summing to budget_total within 1e-6 x budget_total (and, with layer_budgets, each row
 *   to n_kv_heads x layer_budgets[l] within 1e-6 of it). The host validates them (anything else is rejected naming
 *   the plugin id) and integerizes each layer's row to exactly its sum, every head in [min(protected_count, b_l), T]
 *   (at least 1): water-filling, then largest remainder, as for layers. Warnings go to `diag` at RKV_DIAG_WARNING.
 *   Thread rule: never called concurrently on one instance.
 */
typedef struct rkv_allocator_v2 {
  uint32_t struct_size;
  rkv_status (*allocate_heads)(rkv_plugin_instance* self, const rkv_head_allocation_request* request,
                               DLTensor* budgets_out, const rkv_diagnostics* diag);
} rkv_allocator_v2;

/* ---- rkv.scorer/1 --------------------------------------------------------------------------------------------- */

/** Statistics a scorer may ask the host for (bit mask). All fp32, computed by the host on its backend. */
#define RKV_STAT_KEYS ((uint64_t)1)                 /**< keys after RoPE [H_kv, T, d] */
#define RKV_STAT_VALUES ((uint64_t)2)               /**< values [H_kv, T, d] */
#define RKV_STAT_WINDOW_ATTENTION ((uint64_t)4)     /**< sum over the last `window` prompt queries of A[h,t,j]: [H, T] */
#define RKV_STAT_CUMULATIVE_ATTENTION ((uint64_t)8) /**< sum over all prompt queries t >= j of A[h,t,j]: [H, T] */
#define RKV_STAT_WINDOW_QUERIES ((uint64_t)16)      /**< queries after RoPE of the last `window` prompt positions [H, w, d] */
/** ABI minor 4: keys before RoPE [H_kv, T, d]: R(-p_j) k_j, each cached key turned back by its own position p_j. */
#define RKV_STAT_PRE_ROPE_KEYS ((uint64_t)32)
/**
 * ABI minor 4 (prefill only): the first two moments of the prompt's queries before RoPE, per query head, over the
 * positions t = query_skip .. T - 1 (n = T - query_skip of them; none when T <= query_skip):
 *   mean  mu[h]       = (1/n) sum_t q0[h, t]                               [H, d]
 *   covariance S[h]   = (1/n) sum_t (q0[h, t] - mu[h]) (q0[h, t] - mu[h])^T  [H, d, d]   (biased, 1/n, as kvpress)
 * Both are zero when n = 0. Computed during the prefill from its own queries (no second forward).
 */
#define RKV_STAT_QUERY_MOMENTS ((uint64_t)64)

/**
 * ABI minor 5 (prefill only): ||W_o v||_1 of every prompt entry for every query head, float32 [H, T]:
 *   n[h, j] = sum_c | sum_i W_o[c, h d + i] v[g(h), j, i] |,   g(h) = h / G,  c < d_model,  i < d,
 * the L1 norm of entry j's value as head h's o_proj writes it into the residual stream (before Gemma's post-attention
 * norm), from the weights and values as the host's backend holds them. The weight CriticalKV (Feng et al. 2025, arXiv
 * 2502.03805) puts on an entry's attention score; kvpress CriticalKVPress.vwl1norm is its mean over the G heads of a
 * group. Computed by the host when asked (one o_proj's worth of products per entry), not during the prefill.
 */
#define RKV_STAT_VALUE_OUTPUT_NORMS ((uint64_t)128)

/**
 * ABI minor 7 (prefill only): the cosine between each prompt position's residual stream before and after the layer's
 * attention block, float32 [T]:
 *   c[t] = x_t . (x_t + o_t) / (max(||x_t||, 1e-8) max(||x_t + o_t||, 1e-8)),
 * x_t the residual entering the layer, o_t what the attention block adds (after o_proj and, for Gemma, its
 * post-attention norm). Near 1: attention barely changed the token. SqueezeAttention's layer importance (Wang et al.,
 * ICLR 2025) is its mean over the prompt. Captured by the host's one-shot prefill (not with [prefill] chunk_tokens).
 */
#define RKV_STAT_RESIDUAL_COSINE ((uint64_t)256)

/** rkv_scorer_requirements.budget_dependent (ABI minor 6): when score() is given head_budgets (see the inputs). */
#define RKV_BUDGET_NONE 0       /**< never: the scores do not depend on the budget */
#define RKV_BUDGET_FINAL 1      /**< the final selection's budgets; allocators read the budget-free ranking */
#define RKV_BUDGET_ALLOCATION 2 /**< also the layer's budget share when an allocator reads the scores */

/** The model's attention shape, given to a scorer so it can state its requirements. */
typedef struct rkv_attention_shape {
  uint32_t struct_size;
  int64_t n_layers;
  int64_t n_heads;    /**< H, query heads */
  int64_t n_kv_heads; /**< H_kv; GQA group G = H / H_kv */
  int64_t head_dim;   /**< d */
} rkv_attention_shape;

/**
 * What a scorer needs, filled by requirements(). Protected positions are kept regardless of scores, in priority
 * order: the first `sinks` positions, then the last `recent` positions (its observation or recent window). When a
 * layer's budget is below sinks + recent, the host keeps them in that order up to the budget and records a warning.
 *
 * Decode-time scoring (ABI minor 2; the host zero-fills the struct, so a plugin built before it reads as prefill-only):
 * with `decode_scoring` nonzero, score() may also be called on a cache while decoding (decode policy "periodic",
 * kvpress DecodingPress). Then rkv_scorer_inputs describes one layer as it is held at that moment: prefix_tokens = T
 * is the number of entries held per KV head (the longest head when heads hold different counts; the host ignores
 * the scores of a shorter head's padding, whose keys and values are zero), entries in cache order (ascending original
 * position), and the statistics of `decode_stats` are decode-time ones:
 *   RKV_STAT_WINDOW_ATTENTION / RKV_STAT_WINDOW_QUERIES: over the tokens decoded since the last compression (at most
 *     `window` of them; `window` in the inputs says how many), each query seeing the entries at or before its own
 *     position;
 *   RKV_STAT_CUMULATIVE_ATTENTION: the attention each held entry has accumulated from every query so far (prompt and
 *     decoded tokens), per query head;
 *   RKV_STAT_KEYS / RKV_STAT_VALUES: the held entries.
 * `sinks` and `recent` protect the first and last entries held.
 * Chunked prefill with compression between chunks (host [prefill] compress_between_chunks) calls score() the same way
 * after every chunk of the prompt: the window statistics are over that chunk's queries, the entries are those held
 * after the chunk was appended. A scorer without `decode_scoring` is refused there (it cannot score a chunk).
 */
typedef struct rkv_scorer_requirements {
  uint32_t struct_size;
  uint64_t stats;  /**< RKV_STAT_* mask */
  int64_t window;  /**< w for RKV_STAT_WINDOW_ATTENTION / RKV_STAT_WINDOW_QUERIES (clamped to T by the host) */
  int64_t sinks;   /**< leading positions protected */
  int64_t recent;  /**< trailing positions protected */
  uint32_t decode_scoring; /**< ABI minor 2: nonzero when score() supports decode-time scoring (see above) */
  uint64_t decode_stats;   /**< ABI minor 2: RKV_STAT_* mask needed for decode-time scoring (never
                                RKV_STAT_QUERY_MOMENTS or RKV_STAT_VALUE_OUTPUT_NORMS: prompt statistics) */
  int64_t query_skip;      /**< ABI minor 4: leading prompt positions left out of RKV_STAT_QUERY_MOMENTS (>= 0;
                                kvpress ExpectedAttentionPress's n_sink) */
  uint32_t budget_dependent; /**< ABI minor 6: RKV_BUDGET_* (0: score() ignores head_budgets; see the inputs) */
} rkv_scorer_requirements;

/**
 * What a scorer scores: one layer of one example after prefill. Borrowed for the call; each tensor is NULL unless
 * its RKV_STAT_* bit was requested. Device: CPU, or CUDA when the plugin set RKV_FLAG_SUPPORTS_CUDA and the host
 * runs on CUDA (then `stream` is the cudaStream_t to use).
 *
 * ABI minor 4 appends (read them only when RKV_HAS_FIELD says they are there):
 * pre_rope_keys, query_mean, query_covariance: RKV_STAT_PRE_ROPE_KEYS and RKV_STAT_QUERY_MOMENTS (see their bits).
 * rope_inv_freq: float64 [d/2] on the CPU, this layer's RoPE frequencies with the model's scaling already applied
 *   (theta^(-2i/d), then linear / llama3 / GGUF frequency factors; a sliding-window layer's own base), given on every
 *   call whether or not a statistic was requested (NULL for a model without RoPE). The host's rotation convention
 *   (the Hugging Face "rotate_half" layout) at position p: pair i couples x[i] and x[i + d/2] by the angle
 *   a = p inv_freq[i]:  x'[i] = x[i] cos a - x[i + d/2] sin a,  x'[i + d/2] = x[i + d/2] cos a + x[i] sin a.
 *   Every post-RoPE tensor above (keys, window queries) was rotated so; in the prefill, position = cache index.
 *
 * ABI minor 5 appends: value_output_norms, float32 [H, T] on the CPU (RKV_STAT_VALUE_OUTPUT_NORMS).
 *
 * ABI minor 6 appends: head_budgets, int64 [H_kv] on the CPU: how many of the layer's T positions each KV head keeps
 *   (protected positions included; each in [0, T]), for a scorer whose requirements set `budget_dependent`:
 *   RKV_BUDGET_FINAL: given when the host scores a layer for its final prefill selection, with the budgets that
 *     selection keeps (all equal under a per-layer budget, per head under an rkv.allocator/2 split); NULL when an
 *     allocator reads the scores (e.g. AdaKV's head split), for codec token classes, the joint byte planner, and
 *     decode-time and between-chunk scoring: the scorer then returns its budget-free ranking. CriticalKV (Feng et al.
 *     2025, arXiv 2502.03805) keeps a share of the budget by its inner score first, and kvpress's CriticalAdaKVPress
 *     splits heads by that inner score.
 *   RKV_BUDGET_ALLOCATION: as FINAL, and also when an allocator reads the scores: then every head gets its layer's
 *     budget before the split, b_l from the layer allocator, or without one floor(B / |A|) capped at the layer's span
 *     (the one budget share kvpress's per-layer compression_ratio gives every layer). DefensiveKV (Feng et al. 2026,
 *     FFY0/DefensiveKV) clamps its stage 1 by that share, and its head split (AdaKV) and Layer-DefensiveKV's global
 *     top-k rank those budgeted scores.
 *   NULL for a scorer with budget_dependent = 0. The host calls a budget-dependent scorer once per (layer, budgets)
 *   and never reuses its scores across budgets.
 * residual_cosine (ABI minor 7): float32 [T] on the CPU (RKV_STAT_RESIDUAL_COSINE).
 * attention_window (ABI minor 6): the layer's sliding window W in tokens (a query at position t attends to keys
 *   t - W + 1 .. t; Gemma 2/3's local layers), or 0 for full causal attention (also when the host does not know, e.g.
 *   a layer compressed through the C API). A scorer that computes its own attention from window queries and keys
 *   must mask the keys a query does not see; the host's statistics already do.
 */
typedef struct rkv_scorer_inputs {
  uint32_t struct_size;
  int64_t layer;             /**< model layer index */
  int64_t prefix_tokens;     /**< T */
  int64_t window;            /**< effective window (requested w clamped to T) */
  const DLTensor* keys;                 /**< float32 [H_kv, T, d] */
  const DLTensor* values;               /**< float32 [H_kv, T, d] */
  const DLTensor* window_attention;     /**< float32 [H, T] */
  const DLTensor* cumulative_attention; /**< float32 [H, T] */
  const DLTensor* window_queries;       /**< float32 [H, w, d] */
  void* stream;                         /**< cudaStream_t or NULL */
  const DLTensor* pre_rope_keys;        /**< ABI minor 4: float32 [H_kv, T, d] */
  const DLTensor* query_mean;           /**< ABI minor 4: float32 [H, d] */
  const DLTensor* query_covariance;     /**< ABI minor 4: float32 [H, d, d] */
  const DLTensor* rope_inv_freq;        /**< ABI minor 4: float64 [d/2], CPU (see above) */
  const DLTensor* value_output_norms;   /**< ABI minor 5: float32 [H, T] (RKV_STAT_VALUE_OUTPUT_NORMS) */
  const DLTensor* head_budgets;         /**< ABI minor 6: int64 [H_kv], CPU, or NULL (see above) */
  int64_t attention_window;             /**< ABI minor 6: see above */
  const DLTensor* residual_cosine;      /**< ABI minor 7: float32 [T] (RKV_STAT_RESIDUAL_COSINE) */
} rkv_scorer_inputs;

/**
 * Scorer vtable "rkv.scorer/1".
 * requirements(): fills `out` for this model shape. Called once per instance and model, before score().
 * score(): fills `scores_out`, a host-owned float32 [H_kv, T] tensor; larger means keep. Must be finite. The host
 *   keeps the protected positions, then the top scores per KV head up to the layer's budget (ties to the earlier
 *   position). Thread rule: never called concurrently on one instance.
 */
typedef struct rkv_scorer_v1 {
  uint32_t struct_size;
  rkv_status (*requirements)(rkv_plugin_instance* self, const rkv_attention_shape* shape,
                             rkv_scorer_requirements* out, const rkv_diagnostics* diag);
  rkv_status (*score)(rkv_plugin_instance* self, const rkv_scorer_inputs* inputs, DLTensor* scores_out,
                      const rkv_diagnostics* diag);
} rkv_scorer_v1;

/* ---- rkv.signal/1 and the host's profiler service ------------------------------------------------------------- */

/**
 * Host profiler service "rkv.profiler/1" (rkv_host.get_service), for signal plugins (docs/ARCHITECTURE.md "perturbation_kl").
 * Calibration example i = a prefix of `prefix_tokens` tokens + an evaluation window of `window_tokens` tokens.
 * All functions: `ctx` is the table's ctx; called from the signal's profile() call only, on its thread.
 *
 * prepare_example(i): prefills example i's prefix once and runs the reference window on the intact cache
 *   (P_{i,t}); later calls for other layers reuse it. 0 <= i < n_examples.
 * perturb_values(layer, alpha, seed, draw): v' = v + alpha * ||v||_2 * eps, eps ~ N(0, I_d) from Philox4x32-10 +
 *   Box-Muller keyed by (seed, draw, example, layer, head, position), on every KV head and every prefix position not
 *   protected by the base scorer. Keys and other layers untouched. Undone by restore().
 * values_view(layer, out): a raw float32 [H_kv, prefix_tokens, d] view of that layer's prefix values for custom
 *   perturbations (writes allowed until restore(); the view is invalid after restore()).
 * is_protected(position): nonzero when the base scorer protects that prefix position (it must not be perturbed).
 * window_kl(from_layer, kl_out): runs the window from layer `from_layer` upward on the current cache and writes
 *   KL(P_{i,t} || Q_t) in nats per window position into kl_out (float64 [window_tokens], CPU).
 * attention_output(layer, perturbed, out): the window's attention output after o_proj at `layer`, float32
 *   [window_tokens, d_model], on the reference cache (perturbed = 0) or the current one (perturbed = 1).
 * restore(layer): undoes perturb_values()/values_view() writes on that layer.
 */
typedef struct rkv_profiler_v1 {
  uint32_t struct_size;
  void* ctx;
  int64_t n_layers;
  int64_t n_heads;
  int64_t n_kv_heads;
  int64_t head_dim;
  int64_t d_model;
  int64_t n_examples;
  int64_t prefix_tokens;
  int64_t window_tokens;
  rkv_status (*prepare_example)(void* ctx, int64_t example, const rkv_diagnostics* diag);
  rkv_status (*perturb_values)(void* ctx, int64_t layer, double alpha, uint64_t seed, int64_t draw,
                               const rkv_diagnostics* diag);
  rkv_status (*values_view)(void* ctx, int64_t layer, DLTensor* out, const rkv_diagnostics* diag);
  int32_t (*is_protected)(void* ctx, int64_t position);
  rkv_status (*window_kl)(void* ctx, int64_t from_layer, DLTensor* kl_out, const rkv_diagnostics* diag);
  rkv_status (*attention_output)(void* ctx, int64_t layer, int32_t perturbed, DLTensor* out,
                                 const rkv_diagnostics* diag);
  rkv_status (*restore)(void* ctx, int64_t layer, const rkv_diagnostics* diag);
} rkv_profiler_v1;

/**
 * Signal vtable "rkv.signal/1".
 * profile(): computes one sensitivity value per model layer. `per_example_out` is a host-owned float64
 *   [n_examples, n_layers] CPU tensor (d_{i,l}); `s_out` float64 [n_layers] (s_l, normally the mean over examples).
 *   Signals that need no model (depth) ignore the profiler and fill every row alike. Must be finite.
 *   `profiler` may be NULL for model-free signals when the host has no model; such a signal then uses n_layers.
 *   Thread rule: never called concurrently on one instance; polls rkv_host.is_cancelled between examples.
 */
typedef struct rkv_signal_request {
  uint32_t struct_size;
  int64_t n_layers;
  int64_t n_examples;
  const rkv_profiler_v1* profiler;
} rkv_signal_request;

typedef struct rkv_signal_v1 {
  uint32_t struct_size;
  rkv_status (*profile)(rkv_plugin_instance* self, const rkv_signal_request* request, DLTensor* s_out,
                        DLTensor* per_example_out, const rkv_diagnostics* diag);
} rkv_signal_v1;

/* ---- rkv.prompt_signal/1 (ABI minor 7) -------------------------------------------------------------------------- */

/**
 * Per-prompt signal vtable "rkv.prompt_signal/1", served by a signal plugin whose descriptor sets RKV_FLAG_PER_PROMPT
 * (docs/ARCHITECTURE.md "Per-prompt signals"). Where rkv.signal/1 measures a model once on calibration windows, a
 * per-prompt signal reads the statistics of the prompt being compressed and returns one value s_l per layer for
 * that prompt, before the cell's allocator runs; the host passes s over the compressible layers as the allocator's
 * profile (float64, larger = more sensitive, as for rkv.signal/1). CAKE (Qin et al., ICLR 2025) is one: its layer
 * preference from the entropy and variance of the observation window's attention.
 *
 * requirements(): as rkv_scorer_v1.requirements, for this model shape: the RKV_STAT_* statistics the signal reads
 *   (prefill statistics: `decode_scoring` and `decode_stats` must be 0), their `window` and `query_skip`.
 *   `sinks` and `recent` are ignored (a signal protects nothing); `budget_dependent` must be RKV_BUDGET_NONE (the
 *   signal runs before any budget exists). Called once per instance and model, before layer_value(); the host
 *   computes what it asks for in the shared prefill (streamed: no T x T matrix is kept).
 * layer_value(): writes s_l of one layer of one prompt into *s_out (finite). `inputs` is what a scorer of the same
 *   requirements gets for that layer (rkv_scorer_inputs: T, the window, each requested tensor, rope_inv_freq,
 *   attention_window; head_budgets NULL): a tensor the signal did not request is NULL. Called once per (prompt,
 *   layer) for every model layer, in layer order; the host keeps the values of one prompt for every cell that
 *   reads them. Thread rule: never called concurrently on one instance.
 */
typedef struct rkv_prompt_signal_v1 {
  uint32_t struct_size;
  rkv_status (*requirements)(rkv_plugin_instance* self, const rkv_attention_shape* shape,
                             rkv_scorer_requirements* out, const rkv_diagnostics* diag);
  rkv_status (*layer_value)(rkv_plugin_instance* self, const rkv_scorer_inputs* inputs, double* s_out,
                            const rkv_diagnostics* diag);
} rkv_prompt_signal_v1;

/* ---- The entry point ------------------------------------------------------------------------------------------ */

/** Declared for plugin authors; define it once per library (the SDK's RKV_PLUGIN_LIBRARY macro does). */
#if defined(_WIN32)
#define RKV_PLUGIN_EXPORT __declspec(dllexport)
#else
#define RKV_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif

#endif /* RIPPLEKV_PLUGIN_H */
