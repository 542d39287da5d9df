#include "runner/tasks/example_input.hpp"

#include "core/errors.hpp"
#include "core/sha256.hpp"

namespace rkv {

namespace {

/// `key` of `j` as an integer (a hand-edited cell file may hold anything: a JSON integer only, never a cast 1e300).
int64_t integer_of(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j.at(key).is_number_integer())
    throw InputError(std::string("'input.") + key + "' is not an integer");
  return j.at(key).get<int64_t>();
}

}  // namespace

nlohmann::json ExampleInput::to_json() const {
  return {{"source", source}, {"token_offset", token_offset}, {"tokens", tokens},
          {"prompt_tokens", prompt_tokens}, {"id", id}, {"ids_sha256", ids_sha256}};
}

std::string token_ids_sha256(const std::vector<int32_t>& ids) {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((u >> (8 * k)) & 0xffu));
  }
  return sha256_hex(bytes.data(), bytes.size());
}

ExampleInput ExampleInput::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw InputError("'input' is not an object");
  auto text = [&](const char* key) {
    if (!j.contains(key) || !j.at(key).is_string()) throw InputError(std::string("'input.") + key + "' is not a string");
    return j.at(key).get<std::string>();
  };
  ExampleInput in;
  in.source = text("source");
  in.id = text("id");
  in.ids_sha256 = text("ids_sha256");
  in.token_offset = integer_of(j, "token_offset");
  in.tokens = integer_of(j, "tokens");
  in.prompt_tokens = integer_of(j, "prompt_tokens");
  return in;
}

}  // namespace rkv
