// Keeping a chosen list of entries per KV head of one layer with a single compaction (Backend::compact_layer): what the
// window cut of sliding-window layers and every decode policy's eviction do.
//
// Thread rules: the backend's.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"

namespace rkv {

/// Entries each KV head of one layer keeps: keep[h] ascending cache indices of head h, each below its length.
using KeepLists = std::vector<std::vector<int64_t>>;

/// Keeps exactly `keep` in `layer` with one Backend::compact_layer (a uniform selection when every head keeps the same
/// count, per head otherwise). A no-op when every head keeps all it holds. rkv::InputError from the backend for an
/// index out of range.
void keep_entries(Backend& backend, BackendCache& cache, int64_t layer, const KeepLists& keep);

}  // namespace rkv
