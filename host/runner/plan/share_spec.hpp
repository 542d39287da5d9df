// [compression.share] of a cell: which layers read another layer's cache (runner/compress/share.hpp does the sharing).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rkv {

/// [compression.share] of a cell. At most one of groups > 1, map and count is set; all unset: no sharing.
struct ShareSpec {
  int64_t groups = 1;                                ///< CLA@g; 1 = no sharing
  std::vector<std::pair<int64_t, int64_t>> map;      ///< explicit (layer, source) pairs
  int64_t count = 0;                                 ///< chooser: layers to share by the cell's profile
  bool none() const { return groups <= 1 && map.empty() && count == 0; }
  /// "CLA@2", "map 3<-2 5<-4", "4 layers by profile"; "none".
  std::string label() const;
};

}  // namespace rkv
