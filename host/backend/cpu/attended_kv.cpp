#include "backend/cpu/attended_kv.hpp"

#include <algorithm>
#include <string>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/decode_tile.hpp"
#include "cache/codec.hpp"
#include "core/errors.hpp"

namespace rkv::cpu {

namespace {

/// This thread's tile of decoded entries: at least `floats` float32, reused by every later call on the thread.
float* tile_buffer(size_t floats) {
  thread_local std::vector<float> tile;
  if (tile.size() < floats) tile.resize(floats);
  return tile.data();
}

/// Entries per tile of a part whose keys are packed `quantum` entries at a time: kPackedTile rounded up to units.
int64_t tile_entries(int64_t quantum) { return (kPackedTile + quantum - 1) / quantum * quantum; }

/// S[r, j] = scale * Q[r] . K[a + j] for the packed entries [a, b) of one head (indices within the part). A tile
/// starts at a key unit; KIVI's units decode channel-major ([d, tile]: S = Q K^T is then a plain product), the other
/// codecs' row by row ([tile, d]).
void packed_scores(const CodecSpec& codec, const PackedHead& head, int64_t d, int64_t a, int64_t b, const float* q,
                   int64_t m, float scale, float* s, int64_t lds) {
  const bool by_channel = codec.format == CodecFormat::kivi;
  const int64_t quantum = codec_key_quantum(codec), tile = tile_entries(quantum);
  const size_t unit_bytes = codec_key_unit_bytes(codec, d);
  float* keys = tile_buffer(static_cast<size_t>(tile * d));
  for (int64_t t = a; t < b;) {
    const int64_t first = t / quantum * quantum;  // the tile starts at t's key unit
    const int64_t e = std::min(b, first + tile);
    const int64_t u0 = first / quantum, u1 = (e + quantum - 1) / quantum;  // packed heads hold whole units
    const uint8_t* codes = head.k.data() + static_cast<size_t>(u0) * unit_bytes;
    if (by_channel) {
      decode_kivi_keys_by_channel(codec, codes, u1 - u0, d, keys, tile);
      gemm_nn(m, e - t, d, scale, q, d, keys + (t - first), tile, 0.0f, s + (t - a), lds);
    } else {
      decode_value_rows(codec, codes, u1 - u0, d, keys);
      gemm_nt(m, e - t, d, scale, q, d, keys + (t - first) * d, d, 0.0f, s + (t - a), lds);
    }
    t = e;
  }
}

/// O[r] (+)= sum_j P[r, j] V[a + j] for the packed entries [a, b) of one head; `accumulate` adds to o.
void packed_mix(const CodecSpec& codec, const PackedHead& head, int64_t d, int64_t a, int64_t b, const float* p,
                int64_t m, int64_t ldp, float* o, bool accumulate) {
  const size_t row_bytes = codec_value_row_bytes(codec, d);
  float* values = tile_buffer(static_cast<size_t>(kPackedTile * d));
  for (int64_t t = a; t < b; t += kPackedTile) {
    const int64_t e = std::min(b, t + kPackedTile);
    decode_value_rows(codec, head.v.data() + static_cast<size_t>(t) * row_bytes, e - t, d, values);
    gemm_nn(m, d, e - t, 1.0f, p + (t - a), ldp, values, d, accumulate ? 1.0f : 0.0f, o, d);
    accumulate = true;
  }
}

}  // namespace

AttendedKV::AttendedKV(const LayerKV& tail, const PackedLayer* packed) : tail_(&tail), packed_(packed) {
  if (packed && !packed->packed()) packed_ = nullptr;
  if (packed_ && (static_cast<int64_t>(packed_->heads.size()) != tail.n_kv_heads || packed_->head_dim != tail.head_dim))
    throw InputError("attention: the packed layer has " + std::to_string(packed_->heads.size()) + " KV heads of dim " +
                     std::to_string(packed_->head_dim) + ", its float tail " + std::to_string(tail.n_kv_heads) +
                     " of dim " + std::to_string(tail.head_dim));
  if (packed_ && packed_->classes.size() > 3)
    throw InputError("attention: a packed layer of " + std::to_string(packed_->classes.size()) +
                     " token precision classes (at most 3: 16, 8 and 4 bits)");
}

int64_t AttendedKV::longest() const {
  int64_t n = 0;
  for (int64_t g = 0; g < n_kv_heads(); ++g) n = std::max(n, head_length(g));
  return n;
}

int64_t AttendedKV::entries() const {
  int64_t n = 0;
  for (int64_t g = 0; g < n_kv_heads(); ++g) n += head_length(g);
  return n;
}

bool AttendedKV::has_positions() const { return tail_->has_positions() || (packed_ && packed_->positions); }

AttendedKV::Runs AttendedKV::runs(int64_t g) const {
  Runs out;
  int64_t at = 0;
  if (packed_) {
    for (const auto& [codec, part] : packed_->parts()) {
      const PackedHead& head = (*part)[static_cast<size_t>(g)];
      if (head.entries > 0) out.run[out.count++] = Run{codec, &head, at, at + head.entries};
      at += head.entries;
    }
  }
  if (tail_->head_length(g) > 0) out.run[out.count++] = Run{nullptr, nullptr, at, at + tail_->head_length(g)};
  return out;
}

int32_t AttendedKV::position(int64_t g, int64_t i) const {
  const Runs rs = runs(g);
  for (int r = 0; r < rs.count; ++r) {
    const Run& run = rs.run[r];
    if (i < run.begin || i >= run.end) continue;
    if (!run.codec) {
      if (!tail_->has_positions()) break;
      return *tail_->pos_at(g, i - run.begin);
    }
    if (run.head->pos.empty()) break;
    return run.head->pos[static_cast<size_t>(i - run.begin)];
  }
  throw InputError("attention: entry " + std::to_string(i) + " of KV head " + std::to_string(g) +
                   " has no stored position");
}

void AttendedKV::scores(int64_t g, int64_t k0, int64_t n, const float* q, int64_t m, float scale, float* s,
                        int64_t lds) const {
  const int64_t d = head_dim();
  const Runs rs = runs(g);
  for (int r = 0; r < rs.count; ++r) {
    const Run& run = rs.run[r];
    const int64_t a = std::max(k0, run.begin), b = std::min(k0 + n, run.end);
    if (a >= b) continue;
    float* out = s + (a - k0);
    if (run.codec) {
      packed_scores(*run.codec, *run.head, d, a - run.begin, b - run.begin, q, m, scale, out, lds);
    } else {
      gemm_nt(m, b - a, d, scale, q, d, tail_->k_at(g, a - run.begin), d, 0.0f, out, lds);
    }
  }
}

void AttendedKV::mix_values(int64_t g, int64_t k0, int64_t n, const float* p, int64_t m, int64_t ldp, float* o) const {
  const int64_t d = head_dim();
  const Runs rs = runs(g);
  bool accumulate = false;
  for (int r = 0; r < rs.count; ++r) {
    const Run& run = rs.run[r];
    const int64_t a = std::max(k0, run.begin), b = std::min(k0 + n, run.end);
    if (a >= b) continue;
    const float* pa = p + (a - k0);
    if (run.codec) {
      packed_mix(*run.codec, *run.head, d, a - run.begin, b - run.begin, pa, m, ldp, o, accumulate);
    } else {
      gemm_nn(m, d, b - a, 1.0f, pa, ldp, tail_->v_at(g, a - run.begin), d, accumulate ? 1.0f : 0.0f, o, d);
    }
    accumulate = true;
  }
  if (!accumulate) std::fill(o, o + m * d, 0.0f);  // no entries in range
}

}  // namespace rkv::cpu
