// Where an evaluation example's tokens came from, so a peer tool can replay exactly the same inputs (examples.jsonl
// "input", cell files). Each task fills it when it builds its examples (runner/tasks/task.hpp).
//
// Thread rules: plain data; pure functions.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rkv {

/// Where an evaluation example's tokens came from, so a peer tool can replay exactly the same inputs (examples.jsonl
/// "input"). `ids_sha256` is the sha256 of the token ids as 32-bit little-endian integers, in the order the model sees
/// them: for lm_fidelity the window (prefix then continuation), for needle and longbench the whole prompt after the
/// chat template (compressed part then question).
struct ExampleInput {
  std::string source;          ///< lm_fidelity: the text file; needle: "needle"; longbench: the dataset name
  int64_t token_offset = -1;   ///< lm_fidelity: the window's first token index in `source` (its own tokenization)
  int64_t tokens = 0;          ///< token ids hashed
  int64_t prompt_tokens = 0;   ///< prompt length fed before generation or teacher forcing (T plus any question)
  std::string id;              ///< needle: "context=1024,depth=0.5,trial=2"; longbench: the record's _id; else ""
  std::string ids_sha256;
  nlohmann::json to_json() const;
  /// Throws rkv::InputError naming a key of another type (cell files may be hand-edited).
  static ExampleInput from_json(const nlohmann::json& j);
};

/// sha256 (hex) of `ids` as 32-bit little-endian integers.
std::string token_ids_sha256(const std::vector<int32_t>& ids);

}  // namespace rkv
