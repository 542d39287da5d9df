// The decode policy a cell asks for ([compression.decode] of a run config) and the table of decode policies: each
// one's name and traits, without the machinery (runner/decode/policy.hpp holds a session factory per name), so the
// config reader and the checks before a run never depend on the backends. docs/ARCHITECTURE.md "Decode policies".
//
//   name      evicts  per-entry state  re-scores  accumulates attention  params it reads
//   none      no      no               no         no                     -
//   rolling   yes     no               no         no                     sinks
//   h2o       yes     yes              no         yes                    recent
//   periodic  yes     yes              yes        when its scorer does   interval, target
//
// Thread rules: plain data; the table is static and immutable.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rkv {

struct DecodeSpec;

/// What the plan and the checks before a run need to know of a decode policy.
struct DecodePolicyTraits {
  std::string name;
  /// False for "none": every appended entry is kept, so tokens may be fed all at once and any budget serves (a shared
  /// layer's budget of 0 included); a policy that evicts cannot follow a packed (codec) or shared layer.
  bool evicts = false;
  /// Keeps state per held entry (accumulated attention, decode-time statistics), which a sliding-window layer's cut
  /// after every token would have to follow: refused on models with sliding-window layers.
  bool per_entry_state = false;
  /// Re-scores every layer with the cell's [scorer] while decoding: the scorer must declare decode-time scoring
  /// (rkv_scorer_requirements.decode_scoring), and a route (several scorers) is refused.
  bool rescores = false;
  /// Accumulates every entry's attention (seeded from the prefill's cumulative attention). A re-scoring policy does
  /// so when its scorer reads cumulative attention at decode time (runner/decode/policy.hpp
  /// decode_needs_prompt_cumulative).
  bool accumulates_attention = false;
  /// The policy with the parameters it reads, e.g. "rolling(sinks=4)": what labels, effective keys and records show.
  std::string (*describe)(const DecodeSpec& spec) = nullptr;
};

/// Every decode policy, in the order messages list them: none, rolling, h2o, periodic.
const std::vector<DecodePolicyTraits>& decode_policies();

/// The traits of policy `name`, or null when there is no such policy.
const DecodePolicyTraits* find_decode_policy(const std::string& name);

/// The names of decode_policies(), in order.
const std::vector<std::string>& decode_policy_names();

/// The names of the policies for which `keep(traits)` holds, quoted and joined for a message: "\"none\", \"rolling\",
/// \"h2o\" or \"periodic\"" for every policy (the default).
std::string quoted_decode_policies(bool (*keep)(const DecodePolicyTraits&) = nullptr);

/// [compression.decode] as a cell sets it. Integers are range-checked by the config reader.
struct DecodeSpec {
  std::string policy = "none";  ///< a name of decode_policies()
  int64_t sinks = 4;            ///< rolling: leading entries of each head never evicted
  int64_t recent = -1;          ///< h2o: most recent entries each head always keeps; -1: half its budget (floor)
  int64_t interval = 16;        ///< periodic: decoded tokens between two compressions (>= 1)
  int64_t target = 0;           ///< periodic: entries each head is compressed to; 0: its budget

  /// The policy's traits; rkv::InputError naming the valid policies when `policy` is none of them.
  const DecodePolicyTraits& traits() const;

  /// The policy with its parameters, e.g. "none", "rolling(sinks=4)", "h2o(recent=half)",
  /// "periodic(interval=16,target=budget)": what labels, effective keys and results record.
  std::string describe() const;
};

}  // namespace rkv
