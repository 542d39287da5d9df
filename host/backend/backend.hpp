// The decoder core behind one interface (docs/ARCHITECTURE.md "Data flow"): everything the host pipeline asks of a model -- prefill
// with the scorer statistics, decoding and teacher-forced continuation on a (compressed) cache, selection + compaction,
// cache byte accounting, the perturbation profiler, peak memory per phase -- written once against `Backend` and served
// by one implementation per folder:
//
//   backend/cpu/   float32 on the CPU (OpenBLAS), the oracle every other backend is checked against;
//   backend/cuda/  one NVIDIA GPU (cuBLAS + our kernels), float32 or bfloat16.
//
// The runner, the C API and the CLI include only this file (and make_backend()); backends never include each other.
//
// Why an abstract class and not a table of functions: a backend owns state that lives as long as the model does (device
// weights, a stream, cuBLAS handles, scratch buffers) and the host picks the implementation at run time from TOML, so
// one object with virtual members is the plain C++ form of ggml's backend interface. The C ABI is not involved: plugins
// never see a Backend, only DLPack tensors and the profiler service table built on top of it (runner/profile/profiler.hpp).
//
// Shapes: L layers, H query heads, H_kv KV heads, d head dim, D model width, V vocabulary, T prompt positions.
// Every tensor that crosses this interface is a host float32 array (std::vector), row-major; device memory stays
// inside the backend.
//
// Thread rules: a Backend and the caches and profiler sessions it created are used from one thread at a time; they
// must not outlive the Backend, which must not outlive its Model. Errors: rkv::InputError for bad arguments (naming
// the argument), rkv::Cancelled never (callers poll between calls), other std::exception for backend failures (a CUDA
// call, out of memory).
#pragma once
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/types.hpp"
#include "cache/attention_stats.hpp"
#include "cache/codec.hpp"
#include "model/quant_matrix.hpp"
#include "cache/kv_cache.hpp"
#include "cache/selection.hpp"
#include "model/model.hpp"

namespace rkv {

/// A KV cache held by a backend, in the backend's memory (host memory for cpu, device memory for cuda). Per layer and
/// KV head: keys after RoPE at their stored positions (the original ones, or 0 .. n - 1 after rerotate_layer), values
/// and positions, `head_length(l, h)` entries,
/// physically compact (uniform [H_kv, length, d] or ragged per head; docs/ARCHITECTURE.md "The cache"). Created, copied and
/// changed only through the Backend that made it.
class BackendCache {
 public:
  virtual ~BackendCache() = default;
  /// L.
  virtual int64_t n_layers() const = 0;
  /// Entries held by the longest KV head of `layer` (every head, unless per-head budgets compacted the layer).
  /// rkv::InputError for a layer outside [0, L).
  virtual int64_t length(int64_t layer) const = 0;
  /// Entries held by KV head `head` of `layer`. rkv::InputError for a layer outside [0, L) or a head outside
  /// [0, H_kv).
  virtual int64_t head_length(int64_t layer, int64_t head) const = 0;
  /// Bytes of storage really held over every layer: keys, values and positions, including capacity reserved for
  /// growth (what results report as kv_bytes after compression, where storage is exactly sized).
  virtual size_t bytes() const = 0;
  /// Bytes of the entries in use: sum over layers and KV heads of head_length x (key + value row + position), without reserved
  /// capacity (what results report as kv_bytes_end, so that it does not depend on the growth policy).
  virtual size_t bytes_in_use() const = 0;
  /// The layer whose entries layer `layer`'s attention reads: `layer` itself, or the source Backend::share_layer gave
  /// it (a shared layer holds no entries of its own). rkv::InputError for a layer outside [0, L).
  virtual int64_t shared_source(int64_t layer) const = 0;
};

/// A borrowed DLPack view with its own shape and stride storage (dl() points the tensor at them, so a copied view
/// stays valid). The data belongs to whoever made the view.
class TensorView {
 public:
  TensorView() = default;
  /// ndim <= 4; shape and strides (in elements) are copied.
  TensorView(void* data, DLDevice device, DLDataType dtype, int32_t ndim, const int64_t* shape, const int64_t* strides);
  /// The tensor; its shape and strides point into this object, so keep the view alive while the tensor is used.
  DLTensor* dl();

 private:
  DLTensor t_{};
  int64_t shape_[4] = {0, 0, 0, 0};
  int64_t strides_[4] = {0, 0, 0, 0};
};

/// What a prefill computes besides the cache and the logits.
struct PrefillRequest {
  LogitsFor logits = LogitsFor::Last;
  /// Keep the queries after RoPE of the last `keep_queries` positions of every layer (clamped to T; 0 keeps none).
  int64_t keep_queries = 0;
  /// Scorer statistics (cache/attention_stats.hpp) computed from the attention probabilities of this same pass (no
  /// second attention), one entry per distinct request; empty asks for none.
  std::vector<AttentionStatsOptions> stats;
};

/// A prompt after one prefill from an empty cache (positions 0 .. T-1).
struct PrefillResult {
  std::unique_ptr<BackendCache> cache;  ///< T entries in every layer
  std::vector<float> logits;            ///< float32 [1, V] (Last), [T, V] (All) or empty (None)
  int64_t n_queries = 0;                ///< queries kept per layer: min(keep_queries, T)
  std::vector<std::vector<float>> queries;         ///< per layer float32 [H, n_queries, d]; empty when none kept
  std::vector<std::vector<AttentionStats>> stats;  ///< [request][layer], as PrefillRequest::stats asked
  double seconds = 0;                              ///< wall time of the prefill
};

/// What extend() observes of its own attention besides the logits (for decode-time compression: H2O's accumulated
/// attention, a scorer's decode-time window). Each costs work only when asked.
struct ExtendCapture {
  bool attention_mass = false;  ///< ExtendObservation::attention_mass
  bool queries = false;         ///< ExtendObservation::queries
};

/// What extend() observed, per model layer (vectors empty unless asked).
struct ExtendObservation {
  /// Per layer float32 [G x sum_g head_length(l, g)] after the append, grouped by KV head: KV head g's block starts
  /// at G x sum_{g' < g} head_length(l, g') and holds its G query heads q = gG .. gG + G - 1 one after the other,
  /// head_length(l, g) values each, in cache order: m[q, j] = sum over the n new rows i of A[q, i, j], the softmax
  /// probability row i's query of head q put on entry j of its KV head (0 for entries a row does not see). Each row
  /// adds 1 per query head (H2O's accumulated attention, Zhang et al. 2023, "accumulated attention scores").
  std::vector<std::vector<float>> attention_mass;
  /// Per layer float32 [H, n, d]: the new rows' queries after RoPE (unscaled).
  std::vector<std::vector<float>> queries;
};

/// Peak memory of one named phase of a backend's work ("prefill", "compress", "decode", "profile").
struct PhaseMemoryRecord {
  std::string phase;
  size_t peak_bytes = 0;  ///< cuda: bytes allocated through the backend at the phase's peak; cpu: process peak RSS
};

/// The perturbation profiler of one calibration set layout (prefix of P tokens + window of n_w tokens): the compute
/// side of the host service "rkv.profiler/1" (abi/ripplekv/plugin.h; docs/ARCHITECTURE.md "perturbation_kl", "layer_local").
/// runner/profile/profiler.hpp turns any ProfilerSession into the C service table. For example i:
///  prepare_example: prefill the prefix once; run the reference window over every layer on the intact cache, keeping
///    the window's hidden states entering each layer and the reference next-token distributions P_{i,t};
///  perturb_values(l, alpha, seed, draw): v' = v + alpha ||v||_2 eps, eps = perturbation_noise(seed, draw, i, l, h, u)
///    (core/philox.hpp) on every KV head h and prefix position u that `protect` does not cover;
///  window_kl(from): rerun the window from layer `from` upward on the current cache; KL(P_{i,t} || Q_t) per row t;
///  attention_output(l, perturbed): layer l's window attention output after o_proj, [n_w, D];
///  restore(l): undo every change to layer l (bit-exact).
/// The reference window and every rerun share one code path, so alpha = 0 gives exactly 0.
class ProfilerSession {
 public:
  virtual ~ProfilerSession() = default;
  virtual int64_t prefix_tokens() const = 0;  ///< P
  virtual int64_t window_tokens() const = 0;  ///< n_w
  /// Sets up example `example` (the noise key's i) from `tokens` = P prefix ids then n_w window ids; discards every
  /// change to the previous example. rkv::InputError for another length or an id outside the vocabulary.
  virtual void prepare_example(int64_t example, const std::vector<int32_t>& tokens) = 0;
  /// Adds the norm-scaled noise to layer `layer`'s unprotected prefix values (alpha >= 0 finite, draw in [0, 65535]).
  virtual void perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw) = 0;
  /// KL(P_{i,t} || Q_t) in nats, double [n_w], rerunning the window from layer `from_layer` upward.
  virtual std::vector<double> window_kl(int64_t from_layer) = 0;
  /// Layer `layer`'s attention output after o_proj for the window rows, float32 [n_w, D], from the reference hidden
  /// states entering it, on the layer's reference values (perturbed = false) or its current ones (true).
  virtual std::vector<float> attention_output(int64_t layer, bool perturbed) = 0;
  /// Puts layer `layer`'s values back as prepare_example() left them; a no-op for an unchanged layer.
  virtual void restore(int64_t layer) = 0;
  /// A float32 [H_kv, P, d] host copy of layer `layer`'s current prefix values.
  virtual std::vector<float> read_values(int64_t layer) = 0;
  /// Replaces layer `layer`'s prefix values with `values` (float32 [H_kv, P, d], rounded to the cache's dtype),
  /// keeping the originals for restore() first.
  virtual void write_values(int64_t layer, const std::vector<float>& values) = 0;
  /// True while layer `layer` differs from prepare_example()'s values (perturbed or written, not restored).
  virtual bool is_changed(int64_t layer) const = 0;
};

/// The decoder core of one model on one device. See the top of this file.
class Backend {
 public:
  virtual ~Backend() = default;

  /// "cpu" or "cuda": what results record as `backend`.
  virtual std::string kind() const = 0;
  /// "f32" or "bf16": the dtype of the cache and of activations (what profiles are cached under).
  virtual std::string compute_dtype() const = 0;
  /// One line for logs, e.g. "cpu: 2 threads, OpenBLAS Haswell" or "cuda: NVIDIA H200, bf16".
  virtual std::string description() const = 0;
  virtual const Model& model() const = 0;

  /// Runs `tokens` (T >= 1, positions 0 .. T-1) into a fresh cache, with what `request` asks for.
  /// rkv::InputError for an empty prompt, an id outside the vocabulary, or a window < 1 in a window statistic.
  virtual PrefillResult prefill(const std::vector<int32_t>& tokens, const PrefillRequest& request) = 0;

  /// Feeds `tokens` at positions start_pos, start_pos + 1, ... on `cache` (appending them to every layer) and returns
  /// the logits after each of them, float32 [n, V] (All), after the last ([1, V], Last) or none. A compacted cache is
  /// fine: keys keep their original rotation, the new tokens continue at start_pos (= T after a prompt of T).
  /// With `capture`, also fills `observed` (must be non-null then; rkv::InputError otherwise) with what it asks for;
  /// the values agree between backends within float tolerance (the CPU is the oracle).
  virtual std::vector<float> extend(BackendCache& cache, const std::vector<int32_t>& tokens, int64_t start_pos,
                                    LogitsFor which, const ExtendCapture& capture = {},
                                    ExtendObservation* observed = nullptr) = 0;

  /// Makes room for `extra` more entries in every KV head of every layer of `cache` that holds its own float32
  /// entries (packed and shared layers are left alone), reallocating a layer at most once, so a growth known in
  /// advance (a chunked prefill of T tokens: runner/compress/chunked_prefill.hpp) is allocated exactly instead of by
  /// extend()'s growth (half the length again, at most 256 rows: rkv::growth_rows). A no-op where the room is there; entries and bytes_in_use()
  /// are unchanged, bytes() counts the room. rkv::InputError for extra < 0.
  virtual void reserve(BackendCache& cache, int64_t extra) = 0;

  /// Cuts every layer of `cache` back to its first `length` entries per KV head, dropping what extend() appended after
  /// them, and sizes each layer's storage to exactly those entries (a layer with more room is copied once, so the
  /// extra memory is one layer): the cache as it was before the appends, bit for bit, with bytes() = bytes_in_use().
  /// What lets a full prompt cache be scored in place (extend, read, cut back) instead of through a clone() of it
  /// (runner/compress/prefill.hpp with_prompt_cache). Only for an uncompressed cache: rkv::InputError for a packed,
  /// shared or per-head layer, or a `length` outside [0, length(l)] of some layer (then nothing is changed).
  virtual void truncate(BackendCache& cache, int64_t length) = 0;

  /// A deep copy of `cache` (the prefill is shared by every ablation cell; each compresses its own copy).
  virtual std::unique_ptr<BackendCache> clone(const BackendCache& cache) = 0;

  /// The copy clone() then compact_layer(l, *selections[l]) for every l with a selection give, made one layer at a
  /// time: each layer is copied and at once compacted, so the extra memory is the compacted copy plus one layer,
  /// never a second whole cache (what a compressed cell needs from the shared prefill). `selections` has one entry
  /// per layer (null: the layer is copied whole) and must outlive the call. rkv::InputError as compact_layer() for a
  /// bad selection (then nothing is returned), or when the size differs from n_layers().
  virtual std::unique_ptr<BackendCache> clone_selected(const BackendCache& cache,
                                                       const std::vector<const Selection*>& selections) = 0;

  /// A host float32 copy of layer `layer` in the same layout (uniform: [H_kv, length, d] keys and values, capacity =
  /// length; per head: the same head lengths, each region exactly its length), with positions. What a CPU-only scorer
  /// plugin is handed. rkv::InputError for a bad layer.
  virtual LayerKV download_layer(const BackendCache& cache, int64_t layer) = 0;

  /// ||W_o v||_1 of every entry of layer `layer` for every query head (CriticalKV, arXiv 2502.03805; kvpress
  /// CriticalKVPress.vwl1norm before its mean over the GQA group; backend/cpu/value_output_norms.hpp):
  ///   n[h, j] = sum_c | sum_i W_o[c, h d + i] v[g(h), j, i] |,  g(h) = h / G,
  /// the L1 norm of entry j's value as head h's o_proj writes it into the residual stream (before Gemma's
  /// post-attention norm). float32 [H, length(layer)] on the host, from the weights and entries as the backend holds
  /// them (products accumulated in float32, each L1 sum in double). Scratch: one row block of outputs per head (cpu:
  /// 256 x D floats, plus W_o in float32 when the weights are quantized). rkv::InputError for a bad layer, or a
  /// packed, shared or per-head layer (scorers read the uncompressed prefill).
  virtual std::vector<float> value_output_norms(const BackendCache& cache, int64_t layer) = 0;

  /// The stored position of every entry of layer `layer`, KV head after KV head (head_length(layer, h) each,
  /// ascending within a head, except after encode_layer_classes(): ascending within each precision class): int32 [sum_h head_length]; empty when the cache tracks no positions. A host copy (a
  /// small device-to-host copy on cuda). What sliding-window bookkeeping reads (runner/compress/sliding_window.hpp).
  /// rkv::InputError for a bad layer.
  virtual std::vector<int32_t> layer_positions(const BackendCache& cache, int64_t layer) = 0;

  /// A view of layer `layer`'s keys (values = false) or values on the backend's own device, no copy: [H_kv, length,
  /// d] in the cache's dtype (float32, or bfloat16 in a cuda bf16 cache) with strides (capacity * d, d, 1); device
  /// kDLCPU for cpu, kDLCUDA for cuda (for plugins that declare CUDA support; others get download_layer()).
  /// Borrowed: valid until the cache is extended, compacted or destroyed. rkv::InputError for a bad layer, or a layer
  /// in the per-head layout (its heads hold different counts: no [H_kv, length, d] view exists).
  virtual TensorView layer_view(const BackendCache& cache, int64_t layer, bool values) = 0;

  /// Keeps, per KV head, the entries of `sel` (cache/selection.hpp: ascending cache indices, the same count per head
  /// or per-head counts) and reallocates the layer at exactly that size, so the bytes are really freed; the result
  /// is uniform when every head keeps the same count, per head otherwise (rkv::compact_layer). An untouched
  /// selection is a no-op. rkv::InputError when the layer does not hold the selection's T entries, the head count
  /// differs or an index is out of range.
  virtual void compact_layer(BackendCache& cache, int64_t layer, const Selection& sel) = 0;

  /// Key re-rotation (compression.rerotate; kvpress KeyRerotationPress, FINCH, transformers SinkCache): moves every
  /// entry of layer `layer` to contiguous positions, KV head by KV head (each to its own head_length, in either
  /// layout): entry i of head h, whose key was rotated at its stored position p, gets
  ///   key <- R((i - p) inv_freq) key,   position <- i,     i = 0 .. head_length(layer, h) - 1
  /// (RoPE rotations compose, R(a) R(b) = R(a + b): model/rope.hpp rope_rerotate, llama.cpp#3825), with the model's
  /// own frequencies for that layer (Model::layer_inv_freq, angles in double, cos/sin rounded to float); values are untouched. Called
  /// after compact_layer; tokens fed afterwards should continue at the cache length (the longest head over the
  /// layers), as kvpress' pipeline does (runner/compress/compress_prompt.hpp CompressedPrompt::next_position), not at T. A head
  /// already at 0 .. n - 1 is left as it is. In place, no reallocation. rkv::InputError for a bad layer or a cache
  /// that tracks no positions.
  virtual void rerotate_layer(BackendCache& cache, int64_t layer) = 0;

  /// Stores layer `layer` with `codec` (cache/codec.hpp; README "KV precision: codecs"): every KV head's entries
  /// except the newest codec.residual (in whole key units) are packed -- integer codes plus fp16 scales, and their
  /// positions -- and the float32 rows are freed; the rest stays float32 as the layer's tail (cache/packed_kv.hpp).
  /// From then on the layer is read by dequantizing on use: extend() attends over a transient float32 copy of this
  /// one layer, appends the new entries to the tail and packs those that leave the residual window, so the cache
  /// never holds a float copy of packed entries; bytes() counts packed bytes + scales + positions + the tail.
  /// download_layer() returns the dequantized entries and layer_positions() their positions; compact_layer(),
  /// rerotate_layer() and layer_view() refuse a packed layer (rkv::InputError: compress first, then encode).
  /// codec "none" is a no-op. rkv::InputError for a bad layer, a codec check_codec() refuses for the head dim, or a
  /// layer already encoded.
  virtual void encode_layer(BackendCache& cache, int64_t layer, const CodecSpec& codec) = 0;

  /// encode_layer() with per-token precision (cache/token_bits.hpp; README "KV precision: per-token bits"): the
  /// layer's entries whose class in `entry_class` is c >= 1 are packed by token_class_codecs(codec)[c - 1] into a
  /// class of their own (fixed from then on), the others as encode_layer() packs them with `codec` (its residual
  /// window, and every entry decode appends later). entry_class: one class per entry, KV head after KV head
  /// (head_length(layer, h) each, in cache order); empty: every entry at `codec` (= encode_layer()). download_layer()
  /// and layer_positions() then give, per KV head, the classes' entries (top class first), the base codec's, then the
  /// tail's: no longer ascending positions (attention does not depend on the order). rkv::InputError as
  /// encode_layer(), for an entry_class of another length or a class above codec.token_bits.size(), and for a class
  /// other than 0 on a sliding-window layer (its window search needs the entries in position order).
  virtual void encode_layer_classes(BackendCache& cache, int64_t layer, const CodecSpec& codec,
                                    const std::vector<uint8_t>& entry_class) = 0;

  /// Depth-wise cache sharing at inference (Cross-Layer Attention, Brandon et al. 2024, "CLA"; KVSharer, Yang et al.
  /// 2024; README "Depth-wise sharing"): frees every entry of layer `layer` (bytes() no longer counts them;
  /// head_length() is 0) and from then on extend() runs that layer with its own weights and queries over the cache of
  /// layer `source`, which by then already holds the new rows' entries (source < layer, so it ran first):
  ///   q = RoPE(RMSNorm(x) Wq_layer),  a = softmax(s q K_source^T) V_source,  x += a Wo_layer^T
  /// and the layer's own k and v projections are not stored. Applied after the prefill, like eviction: the prompt's
  /// hidden states are those of the unshared model. A shared layer cannot be compacted, re-rotated, encoded or shared
  /// again (rkv::InputError); download_layer() gives it with no entries. Sharing composes with eviction and codecs
  /// of the source (a packed source is dequantized for the shared layer's attention too). rkv::InputError for a
  /// layer or source outside [0, L), source >= layer, a source that is itself shared, and a layer already shared or
  /// packed. On a sliding-window layer the window applies to the source's entries by their stored positions.
  virtual void share_layer(BackendCache& cache, int64_t layer, int64_t source) = 0;

  /// A profiler for prefixes of `prefix_tokens` and windows of `window_tokens`, never perturbing the positions
  /// `protect` covers. rkv::InputError for P < 1, n_w < 1 or negative counts.
  virtual std::unique_ptr<ProfilerSession> new_profiler(int64_t prefix_tokens, int64_t window_tokens,
                                                        const ProtectedSpec& protect) = 0;

  /// Opens / closes a named memory phase; memory_phases() lists the closed ones in closing order.
  virtual void begin_phase(const std::string& name) = 0;
  virtual void end_phase() = 0;
  virtual std::vector<PhaseMemoryRecord> memory_phases() const = 0;
};

/// Options of make_backend().
struct BackendOptions {
  std::string dtype = "f32";  ///< compute dtype: "f32" everywhere, "bf16" on cuda only
  int threads = -1;           ///< CPU threads (OpenBLAS and the element-wise pool): 0 = every core, -1 = leave the
                              ///< process-wide count as it is
  int device = 0;             ///< CUDA device index
};

/// Makes the backend `kind` for `model`: "cpu", "cuda" or "auto" (cuda when this build has the CUDA backend and a
/// device is present, else cpu). The CUDA backend is a module (libripplekv-cuda.so, backend_module.hpp) loaded on
/// the first call that needs it: "cuda", or "auto" on a machine with the NVIDIA driver; a CPU-only process never
/// loads it. Also sets the process-wide CPU thread count when options.threads >= 0 (every backend
/// runs host-side work on the CPU). Throws rkv::InputError with the message
///   model.backend = cuda: no CUDA device (<reason>)      or
///   model.backend = cuda: this build has no CUDA backend (backend module '<path>' is missing ...)   or
///   model.backend = cuda: backend module '<path>': cannot be loaded: <the dynamic loader's reason>
/// when cuda is asked for and cannot be had, for an unknown kind, and for a dtype the backend cannot run.
/// `model` must outlive the result.
std::unique_ptr<Backend> make_backend(const std::string& kind, const Model& model, const BackendOptions& options = {});

/// `requested` CPU threads (BackendOptions::threads) bounded to what this machine's backends will use: at most a few
/// per core (0 stays 0: every core). When it is lowered, `*warning` (when given) gets one sentence saying so.
/// Reentrant.
int bounded_thread_count(int64_t requested, std::string* warning = nullptr);

/// Throws the rkv::InputError make_backend() would throw for `kind` and `options` before any model is loaded (unknown
/// kind or dtype, cuda without a device or without the CUDA backend, bf16 on cpu); returns otherwise.
void check_backend_available(const std::string& kind, const BackendOptions& options);

/// The checks every backend's share_layer() makes that need no backend state: layer and source inside [0, L),
/// source < layer, neither already shared (BackendCache::shared_source). Throws rkv::InputError naming both.
void check_share_layer(const BackendCache& cache, int64_t layer, int64_t source);

/// The kind "auto" resolves to on this machine ("cuda" or "cpu").
std::string resolve_backend_kind(const std::string& kind);

/// How to load a model for backend `kind` (load_model's `weights`): `requested` (model.weights) for the CPU backend;
/// f32 when `kind` resolves to cuda, which uploads float32 weights and converts them itself.
WeightStorage weights_for_backend(const std::string& kind, WeightStorage requested);

/// A factory for one backend kind. Thread rules: register before any make_backend() call of that kind.
using BackendFactory = std::function<std::unique_ptr<Backend>(const Model&, const BackendOptions&)>;
/// Serves `kind` with `factory` from now on, in place of the built-in one (nullptr removes the override). For test
/// builds that run a backend's code path elsewhere (the CUDA backend compiled against the CPU emulator registers
/// itself as "cuda", tests/backend). `available` answers whether a device is present for "auto".
void register_backend(const std::string& kind, BackendFactory factory, std::function<bool()> available = {});

}  // namespace rkv
