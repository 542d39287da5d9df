// compact_layer keeps the right K/V rows, reallocates the storage at [H_kv, b_l, d] and frees the rest.
#include <gtest/gtest.h>

#include <vector>

#include "cache/compaction.hpp"
#include "cache/selection.hpp"
#include "core/errors.hpp"

namespace {

/// A layer with T positions and spare capacity; k = 1000 h + 10 p + x, v = -(1000 h + 10 p + x).
rkv::LayerKV make_layer(int64_t Hkv, int64_t T, int64_t d, int64_t capacity) {
  rkv::LayerKV l;
  l.n_kv_heads = Hkv;
  l.head_dim = d;
  l.capacity = capacity;
  l.length = T;
  l.k.assign(static_cast<size_t>(Hkv * capacity * d), -1.0f);
  l.v.assign(l.k.size(), -1.0f);
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t p = 0; p < T; ++p)
      for (int64_t x = 0; x < d; ++x) {
        l.k_at(h, p)[x] = float(1000 * h + 10 * p + x);
        l.v_at(h, p)[x] = -float(1000 * h + 10 * p + x);
      }
  return l;
}

rkv::Selection selection(int64_t Hkv, int64_t T, std::vector<std::vector<int64_t>> per_head) {
  rkv::Selection s;
  s.layer = 4;
  s.n_kv_heads = Hkv;
  s.prefix_tokens = T;
  s.kept = static_cast<int64_t>(per_head[0].size());
  s.budget = s.kept;
  for (auto& h : per_head) s.positions.insert(s.positions.end(), h.begin(), h.end());
  return s;
}

TEST(CompactLayer, KeepsTheSelectedRowsAndFreesMemory) {
  const int64_t Hkv = 3, T = 12, d = 4;
  rkv::LayerKV l = make_layer(Hkv, T, d, 20);  // capacity 20 > T: decode headroom is freed too
  const size_t before = l.bytes();
  EXPECT_EQ(before, size_t(2 * Hkv * 20 * d) * sizeof(float));
  const rkv::Selection sel = selection(Hkv, T, {{0, 3, 11}, {1, 2, 5}, {7, 10, 11}});
  const rkv::CompactionReport r = rkv::compact_layer(l, sel);
  EXPECT_FALSE(r.untouched);
  EXPECT_EQ(r.layer, 4);
  EXPECT_EQ(r.length_before, T);
  EXPECT_EQ(r.length_after, 3);
  EXPECT_EQ(r.bytes_before, before);
  EXPECT_EQ(r.bytes_after, size_t(2 * Hkv * 3 * d) * sizeof(float));
  EXPECT_EQ(l.bytes(), r.bytes_after);
  EXPECT_EQ(l.k.size(), size_t(Hkv * 3 * d));
  EXPECT_EQ(l.k.capacity(), size_t(Hkv * 3 * d));  // really reallocated, not just resized
  EXPECT_EQ(l.v.capacity(), size_t(Hkv * 3 * d));
  EXPECT_EQ(l.capacity, 3);
  EXPECT_EQ(l.length, 3);
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t p = sel.head_positions(h)[i];
      for (int64_t x = 0; x < d; ++x) {
        EXPECT_EQ(l.k_at(h, i)[x], float(1000 * h + 10 * p + x));
        EXPECT_EQ(l.v_at(h, i)[x], -float(1000 * h + 10 * p + x));
      }
    }
  // Decoding can grow the compacted layer again, keeping the kept rows.
  rkv::reserve_layer(l, 8);
  EXPECT_EQ(l.k_at(2, 2)[1], float(2000 + 110 + 1));
}

TEST(CompactLayer, KeepsTheUncompressedTailAfterTheSelection) {
  // 8 positions held, only T = 6 eligible (e.g. compress the context, keep the 2 question positions).
  rkv::LayerKV l = make_layer(2, 8, 2, 10);
  const rkv::CompactionReport r = rkv::compact_layer(l, selection(2, 6, {{1, 4}, {0, 5}}));
  EXPECT_EQ(r.length_before, 8);
  EXPECT_EQ(r.length_after, 4);
  EXPECT_EQ(l.length, 4);
  EXPECT_EQ(l.capacity, 4);
  EXPECT_EQ(r.bytes_after, size_t(2 * 2 * 4 * 2) * sizeof(float));
  const int64_t want[2][4] = {{1, 4, 6, 7}, {0, 5, 6, 7}};
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(l.k_at(h, i)[1], float(1000 * h + 10 * want[h][i] + 1));
      EXPECT_EQ(l.v_at(h, i)[0], -float(1000 * h + 10 * want[h][i]));
    }
  // A selected position inside the tail is rejected (only 0 .. T-1 are eligible).
  rkv::LayerKV m = make_layer(1, 8, 2, 8);
  EXPECT_THROW(rkv::compact_layer(m, selection(1, 6, {{6}})), rkv::InputError);
}

TEST(CompactLayer, UntouchedSelectionLeavesTheLayerAlone) {
  rkv::LayerKV l = make_layer(2, 6, 2, 9);
  const rkv::LayerKV orig = l;
  rkv::Selection s;
  s.n_kv_heads = 2;
  s.prefix_tokens = 6;
  s.budget = 6;
  s.kept = 6;
  s.untouched = true;
  const rkv::CompactionReport r = rkv::compact_layer(l, s);
  EXPECT_TRUE(r.untouched);
  EXPECT_EQ(r.bytes_after, r.bytes_before);
  EXPECT_EQ(l.capacity, 9);
  EXPECT_EQ(l.k, orig.k);
  EXPECT_EQ(l.v, orig.v);
}

TEST(CompactLayer, RejectsMismatchesAndLeavesTheLayerUnchanged) {
  rkv::LayerKV l = make_layer(2, 6, 2, 6);
  const rkv::LayerKV orig = l;
  EXPECT_THROW(rkv::compact_layer(l, selection(2, 7, {{0}, {1}})), rkv::InputError);      // T beyond the cache
  EXPECT_THROW(rkv::compact_layer(l, selection(1, 6, {{0}})), rkv::InputError);           // head count differs
  EXPECT_THROW(rkv::compact_layer(l, selection(2, 6, {{0}, {6}})), rkv::InputError);      // position out of range
  EXPECT_EQ(l.k, orig.k);
  EXPECT_EQ(l.capacity, 6);
}

}  // namespace

namespace {

// Per-head selection, worked by hand (SnapKV#31): T = 10, H_kv = 2, recent 2, b = 5; head 0 scores 10 - j, head 1 scores j. By
// hand: head 0 keeps the recent 8, 9 and its top scores 0, 1, 2; head 1 keeps 8, 9 and 5, 6, 7. The entries carry
// their original positions (here 100 + index: a prompt that started at position 100), ascending per head, and the
// bytes count them (4 bytes per entry and head).
TEST(CompactLayer, KeptEntriesKeepTheirPositionsAscendingPerHead) {
  const int64_t Hkv = 2, T = 10, d = 2;
  rkv::LayerKV l = make_layer(Hkv, T, d, T);
  l.pos.assign(static_cast<size_t>(Hkv * T), 0);
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < T; ++j) *l.pos_at(h, j) = static_cast<int32_t>(100 + j);
  EXPECT_EQ(l.bytes(), size_t(2 * Hkv * T * d) * sizeof(float) + size_t(Hkv * T) * sizeof(int32_t));
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (int64_t j = 0; j < T; ++j) {
    scores[static_cast<size_t>(j)] = float(10 - j);
    scores[static_cast<size_t>(T + j)] = float(j);
  }
  const rkv::Selection sel = rkv::select_positions(scores.data(), Hkv, T, 5, rkv::ProtectedSpec{0, 2}, 0);
  rkv::compact_layer(l, sel);
  const std::vector<int32_t> want0 = {100, 101, 102, 108, 109}, want1 = {105, 106, 107, 108, 109};
  EXPECT_EQ(std::vector<int32_t>(l.pos_at(0, 0), l.pos_at(0, 0) + 5), want0);
  EXPECT_EQ(std::vector<int32_t>(l.pos_at(1, 0), l.pos_at(1, 0) + 5), want1);
  EXPECT_EQ(l.k_at(1, 0)[0], float(1000 + 10 * 5));  // the key of index 5 came with position 105
  EXPECT_EQ(l.bytes(), size_t(2 * Hkv * 5 * d) * sizeof(float) + size_t(Hkv * 5) * sizeof(int32_t));
  // Growing for decode keeps them.
  rkv::reserve_layer(l, 8);
  EXPECT_EQ(*l.pos_at(1, 4), 109);
}

}  // namespace

namespace {

// Per-head budgets (rkv.allocator/2): head 0 keeps 3, head 1 keeps 6 of T = 10 with recent 2, head 0 scoring 10 - j
// and head 1 scoring j. By hand: head 0 keeps the recent 8, 9 and its top score 0 -> [0, 8, 9]; head 1 keeps 8, 9
// and its top four 7, 6, 5, 4 -> [4, 5, 6, 7, 8, 9]. The layer becomes ragged: 3 + 6 rows, no padding, and the bytes
// are exactly (3 + 6) x (2 d floats + one int32 position).
TEST(CompactLayer, PerHeadBudgetsGiveARaggedLayerWithoutPadding) {
  const int64_t Hkv = 2, T = 10, d = 2;
  rkv::LayerKV l = make_layer(Hkv, T, d, T);
  l.pos.assign(static_cast<size_t>(Hkv * T), 0);
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < T; ++j) *l.pos_at(h, j) = static_cast<int32_t>(j);
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (int64_t j = 0; j < T; ++j) {
    scores[static_cast<size_t>(j)] = float(10 - j);
    scores[static_cast<size_t>(T + j)] = float(j);
  }
  const rkv::Selection sel = rkv::select_positions_per_head(scores.data(), Hkv, T, {3, 6}, rkv::ProtectedSpec{0, 2}, 0);
  ASSERT_TRUE(sel.per_head());
  EXPECT_EQ(sel.budget, 9);
  const std::vector<int64_t> want0 = {0, 8, 9}, want1 = {4, 5, 6, 7, 8, 9};
  EXPECT_EQ(std::vector<int64_t>(sel.head_positions(0), sel.head_positions(0) + 3), want0);
  EXPECT_EQ(std::vector<int64_t>(sel.head_positions(1), sel.head_positions(1) + 6), want1);
  const rkv::CompactionReport rep = rkv::compact_layer(l, sel);
  ASSERT_TRUE(l.per_head());
  EXPECT_EQ(l.head_length(0), 3);
  EXPECT_EQ(l.head_length(1), 6);
  EXPECT_EQ(l.length, 6);
  EXPECT_EQ(rep.length_after, 6);
  EXPECT_EQ(std::vector<int32_t>(l.pos_at(0, 0), l.pos_at(0, 0) + 3), std::vector<int32_t>({0, 8, 9}));
  EXPECT_EQ(std::vector<int32_t>(l.pos_at(1, 0), l.pos_at(1, 0) + 6), std::vector<int32_t>({4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(l.k_at(0, 1)[1], float(10 * 8 + 1));         // head 0's second entry is position 8
  EXPECT_EQ(l.v_at(1, 0)[0], -float(1000 + 10 * 4 + 0));  // head 1's first entry is position 4
  const size_t want_bytes = size_t(3 + 6) * (2 * d * sizeof(float) + sizeof(int32_t));
  EXPECT_EQ(l.bytes(), want_bytes);
  EXPECT_EQ(l.bytes_in_use(), want_bytes);
  EXPECT_EQ(rep.bytes_after, want_bytes);
  // Growing for decode gives every head room for the same count and keeps every entry where it was.
  rkv::reserve_extra(l, 4);
  EXPECT_GE(l.head_capacity(0), 3 + 4);
  EXPECT_GE(l.head_capacity(1), 6 + 4);
  EXPECT_EQ(l.head_length(0), 3);
  EXPECT_EQ(*l.pos_at(1, 5), 9);
  EXPECT_EQ(l.k_at(1, 5)[0], float(1000 + 90));
  EXPECT_EQ(l.bytes_in_use(), want_bytes);  // the room reserved is not in use
}

TEST(CompactLayer, EqualPerHeadBudgetsStayUniform) {
  const int64_t Hkv = 2, T = 10, d = 2;
  rkv::LayerKV l = make_layer(Hkv, T, d, T);
  std::vector<float> scores(static_cast<size_t>(Hkv * T), 1.0f);
  const rkv::Selection sel = rkv::select_positions_per_head(scores.data(), Hkv, T, {4, 4}, rkv::ProtectedSpec{}, 0);
  EXPECT_FALSE(sel.per_head());
  rkv::compact_layer(l, sel);
  EXPECT_FALSE(l.per_head());
  EXPECT_EQ(l.length, 4);
  EXPECT_EQ(l.capacity, 4);
  // A head budget of T or more keeps that head whole while the other is compacted.
  rkv::LayerKV m = make_layer(Hkv, T, d, T);
  const rkv::Selection whole = rkv::select_positions_per_head(scores.data(), Hkv, T, {2, 50}, rkv::ProtectedSpec{}, 0);
  ASSERT_TRUE(whole.per_head());
  EXPECT_EQ(whole.head_kept_count(1), T);
  rkv::compact_layer(m, whole);
  EXPECT_EQ(m.head_length(0), 2);
  EXPECT_EQ(m.head_length(1), T);
  EXPECT_EQ(m.k_at(1, 7)[0], float(1000 + 70));
}

TEST(CompactLayer, PerHeadSelectionsAreCheckedAgainstEachHead) {
  const int64_t Hkv = 2, T = 6, d = 2;
  rkv::LayerKV l = make_layer(Hkv, T, d, T);
  rkv::Selection s = selection(Hkv, T, {{0, 1}, {2, 3, 4}});
  s.head_kept = {2, 3};
  s.positions = {0, 1, 2, 3, 9};  // 9 is outside [0, T)
  EXPECT_THROW(rkv::compact_layer(l, s), rkv::InputError);
  s.positions = {1, 0, 2, 3, 4};  // not ascending
  EXPECT_THROW(rkv::compact_layer(l, s), rkv::InputError);
  s.positions = {0, 1, 2, 3};  // one short of 2 + 3
  EXPECT_THROW(rkv::compact_layer(l, s), rkv::InputError);
  EXPECT_EQ(l.length, T);  // unchanged by the failures
  EXPECT_FALSE(l.per_head());
  EXPECT_THROW(rkv::select_positions_per_head(nullptr, Hkv, T, {2}, rkv::ProtectedSpec{}, 0), rkv::InputError);
  EXPECT_THROW(rkv::select_positions_per_head(nullptr, Hkv, T, {2, 0}, rkv::ProtectedSpec{}, 0), rkv::InputError);
}

}  // namespace
