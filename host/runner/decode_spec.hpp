// The decode policy a cell asks for ([compression.decode] of a run config): its name and parameters, without the
// machinery (runner/decode_policy.hpp), so the config reader does not depend on the backends.
//
// Thread rules: plain data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rkv {

/// [compression.decode] as a cell sets it. Integers are range-checked by the config reader.
struct DecodeSpec {
  std::string policy = "none";  ///< "none" | "rolling" | "h2o" | "periodic"
  int64_t sinks = 4;            ///< rolling: leading entries of each head never evicted
  int64_t recent = -1;          ///< h2o: most recent entries each head always keeps; -1: half its budget (floor)
  int64_t interval = 16;        ///< periodic: decoded tokens between two compressions (>= 1)
  int64_t target = 0;           ///< periodic: entries each head is compressed to; 0: its budget

  /// The policy with its parameters, e.g. "none", "rolling(sinks=4)", "h2o(recent=half)",
  /// "periodic(interval=16,target=budget)": what labels, effective keys and results record.
  std::string describe() const;
};

/// The names DecodeSpec::policy accepts, in order.
const std::vector<std::string>& decode_policy_names();

}  // namespace rkv
