// ggml tensor element types as they appear in GGUF tensor infos, with their block geometry.
//
// Source: ggml/include/ggml.h (enum ggml_type) and ggml/src/ggml.c (type_traits: blck_size, type_size) of llama.cpp.
// A quantized type stores a row of n elements as n / block_size blocks of type_size bytes each.
#pragma once
#include <cstdint>
#include <string>

namespace rkv {

/// The ggml_type ids (values fixed by the GGUF format; gaps are ids ggml has retired).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};

/// Block geometry of one ggml type: `block_size` elements are stored in `type_size` bytes.
struct GgmlTypeInfo {
  const char* name;    ///< ggml's name, e.g. "q4_1"
  int64_t block_size;  ///< elements per block (1 for plain types)
  int64_t type_size;   ///< bytes per block
};

/// Geometry of type id `type`, or nullptr when the id is not a ggml type this reader knows.
/// Thread-safe (static table).
const GgmlTypeInfo* ggml_type_info(uint32_t type);

/// ggml's name of a type id ("q4_1"), or "type<id>" when unknown.
std::string ggml_type_name(uint32_t type);

}  // namespace rkv
