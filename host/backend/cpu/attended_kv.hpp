// The entries one layer's attention reads (attention.hpp), wherever the cache stores them: a packed prefix
// (cache/packed_kv.hpp: the token precision classes, top first, then the base codec) followed by the float32 tail
// (a LayerKV). Entry i of KV head g is numbered as unpack_layer numbers it, so attention over an AttendedKV equals
// attention over unpack_layer's float copy -- without that copy.
//
// The two products attention needs, for the G query heads of KV head g and the head's entries [k0, k0 + n):
//   scores:      S[r, j] = scale * Q[r] . K[g, k0 + j]            (the float tail: one sgemm on the cache rows)
//   mix_values:  O[r]    = sum_j P[r, j] V[g, k0 + j]             (the float tail: one sgemm on the cache rows)
// On a packed part they run tile by tile: at most kPackedTile entries (64, or a whole number of kivi key units) are
// decoded (decode_tile.hpp: the very floats cache/codec.hpp's decode_key_unit / decode_value_row, and so unpack_layer,
// write; 8 at a time with AVX2) into a per-thread tile of [tile, d] float32 (16 KB at d = 64; KIVI keys channel-major,
// [d, tile]), used at once by a small sgemm while it is in L1, and overwritten by the next tile. This is llama.cpp's CPU flash-attention approach for a quantized cache
// (ggml-cpu ops.cpp, ggml_compute_forward_flash_attn_ext_f16: each V row converted to f32 in a row buffer, then
// accumulated), batched to a tile so the sgemm amortizes its call. The codes are read once per product; no float copy
// of a packed layer exists beyond one tile per thread.
//
// Thread rules: an AttendedKV only reads the layer it views (which must outlive it and not change while it is used);
// scores and mix_values may run concurrently on different heads or ranges (each thread decodes into its own tile).
#pragma once
#include <cstdint>
#include <vector>
#include "cache/kv_cache.hpp"
#include "cache/packed_kv.hpp"

namespace rkv::cpu {

/// Entries decoded per tile of a packed part (rounded up to whole kivi key units).
constexpr int64_t kPackedTile = 64;

class AttendedKV {
 public:
  /// Views `tail` (every entry of a float32 layer) or, with `packed`, the packed entries of each head followed by
  /// the tail's. packed->head_dim and its KV heads must match the tail's (pack_oldest keeps them so); rkv::InputError
  /// otherwise. Implicit from a LayerKV: a float32 layer is attended as it is.
  AttendedKV(const LayerKV& tail, const PackedLayer* packed = nullptr);

  int64_t n_kv_heads() const { return tail_->n_kv_heads; }
  int64_t head_dim() const { return tail_->head_dim; }
  /// Entries of KV head g: packed (every class and the base codec) + tail.
  int64_t head_length(int64_t g) const { return packed_entries(g) + tail_->head_length(g); }
  /// The largest head_length over the KV heads.
  int64_t longest() const;
  /// sum_g head_length(g).
  int64_t entries() const;
  /// True when the layer stores a position beside every entry (the tail or the packed part tracks them).
  bool has_positions() const;
  /// Original position of entry i of KV head g (has_positions() must hold; i in [0, head_length(g))).
  int32_t position(int64_t g, int64_t i) const;
  /// True when some entries are packed (products then decode tiles).
  bool packed() const { return packed_ != nullptr; }

  /// S[r, j] = scale * Q[r] . K[g, k0 + j] for r < m, j < n. q: float32 [m, d] (row stride d); s: float32, row
  /// stride lds >= n, written. [k0, k0 + n) must lie in [0, head_length(g)).
  void scores(int64_t g, int64_t k0, int64_t n, const float* q, int64_t m, float scale, float* s, int64_t lds) const;
  /// O[r] = sum_j P[r, j] V[g, k0 + j] for r < m. p: float32 [m, n] (row stride ldp); o: float32 [m, d], written.
  void mix_values(int64_t g, int64_t k0, int64_t n, const float* p, int64_t m, int64_t ldp, float* o) const;

 private:
  /// One stored run of head g's entries: a packed part's head (codec non-null) or the float tail.
  struct Run {
    const CodecSpec* codec;  ///< null: the float tail
    const PackedHead* head;  ///< the packed part's head (null for the tail)
    int64_t begin, end;      ///< [begin, end) in the head's entry numbering
  };
  int64_t packed_entries(int64_t g) const { return packed_ ? packed_->entries(g) : 0; }
  /// The runs of head g in order (packed parts, then the tail), empty runs left out: at most 3 token classes + the
  /// base codec + the tail.
  struct Runs {
    Run run[5];
    int count = 0;
  };
  Runs runs(int64_t g) const;

  const LayerKV* tail_;
  const PackedLayer* packed_;
};

}  // namespace rkv::cpu
