// [compression.joint] of a cell: one byte budget split across tokens kept x bits x layers shared by the joint
// allocator (cache/joint_plan.hpp chooses; runner/compress/joint.hpp runs it for a prompt).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cache/codec.hpp"

namespace rkv {

/// [compression.joint] of a cell. plan = "none": the cell is not a joint cell (the other keys are unused).
struct JointSpec {
  std::string plan = "none";                            ///< "none" | "damage" (D_l(o) measured on calibration)
  std::vector<double> fractions = {1.0, 0.5, 0.25, 0.125};  ///< of each layer's span, each in (0, 1]
  std::vector<int> bits = {32, 8, 4, 2};                ///< 32: float32; 8, 4, 2: the integer codec
  bool share = false;                                   ///< a layer may also share (hold no cache)
  int64_t group = 32;                                   ///< integer codec: channels per scale
  bool symmetric = false;                               ///< integer codec: symmetric codes

  bool none() const { return plan == "none"; }
  /// The integer codec at `bits` (none for 32): format "int", this group and symmetry, no residual window.
  CodecSpec codec(int bits) const {
    CodecSpec c;
    if (bits == 32) return c;
    c.format = CodecFormat::integer;
    c.bits = bits;
    c.group = group;
    c.symmetric = symmetric;
    return c;
  }
  /// "f 1/0.5/0.25/0.125 x bits 32/8/4/2 + share" ("int4-sym-g32"-style codec details when not the defaults).
  std::string label() const;
};

}  // namespace rkv
