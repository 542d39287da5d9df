#include "model/ggml_types.hpp"

namespace rkv {

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  // Values from llama.cpp ggml/src/ggml.c type_traits[] (QK_K = 256, QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = 32).
  static const GgmlTypeInfo f32{"f32", 1, 4}, f16{"f16", 1, 2}, q4_0{"q4_0", 32, 18}, q4_1{"q4_1", 32, 20},
      q5_0{"q5_0", 32, 22}, q5_1{"q5_1", 32, 24}, q8_0{"q8_0", 32, 34}, q8_1{"q8_1", 32, 36}, q2_k{"q2_K", 256, 84},
      q3_k{"q3_K", 256, 110}, q4_k{"q4_K", 256, 144}, q5_k{"q5_K", 256, 176}, q6_k{"q6_K", 256, 210},
      q8_k{"q8_K", 256, 292}, iq2_xxs{"iq2_xxs", 256, 66}, iq2_xs{"iq2_xs", 256, 74}, iq3_xxs{"iq3_xxs", 256, 98},
      iq1_s{"iq1_s", 256, 50}, iq4_nl{"iq4_nl", 32, 18}, iq3_s{"iq3_s", 256, 110}, iq2_s{"iq2_s", 256, 82},
      iq4_xs{"iq4_xs", 256, 136}, i8{"i8", 1, 1}, i16{"i16", 1, 2}, i32{"i32", 1, 4}, i64{"i64", 1, 8},
      f64{"f64", 1, 8}, iq1_m{"iq1_m", 256, 56}, bf16{"bf16", 1, 2}, tq1_0{"tq1_0", 256, 54},
      tq2_0{"tq2_0", 256, 66};
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: return &f32;
    case GgmlType::F16: return &f16;
    case GgmlType::Q4_0: return &q4_0;
    case GgmlType::Q4_1: return &q4_1;
    case GgmlType::Q5_0: return &q5_0;
    case GgmlType::Q5_1: return &q5_1;
    case GgmlType::Q8_0: return &q8_0;
    case GgmlType::Q8_1: return &q8_1;
    case GgmlType::Q2_K: return &q2_k;
    case GgmlType::Q3_K: return &q3_k;
    case GgmlType::Q4_K: return &q4_k;
    case GgmlType::Q5_K: return &q5_k;
    case GgmlType::Q6_K: return &q6_k;
    case GgmlType::Q8_K: return &q8_k;
    case GgmlType::IQ2_XXS: return &iq2_xxs;
    case GgmlType::IQ2_XS: return &iq2_xs;
    case GgmlType::IQ3_XXS: return &iq3_xxs;
    case GgmlType::IQ1_S: return &iq1_s;
    case GgmlType::IQ4_NL: return &iq4_nl;
    case GgmlType::IQ3_S: return &iq3_s;
    case GgmlType::IQ2_S: return &iq2_s;
    case GgmlType::IQ4_XS: return &iq4_xs;
    case GgmlType::I8: return &i8;
    case GgmlType::I16: return &i16;
    case GgmlType::I32: return &i32;
    case GgmlType::I64: return &i64;
    case GgmlType::F64: return &f64;
    case GgmlType::IQ1_M: return &iq1_m;
    case GgmlType::BF16: return &bf16;
    case GgmlType::TQ1_0: return &tq1_0;
    case GgmlType::TQ2_0: return &tq2_0;
  }
  return nullptr;
}

std::string ggml_type_name(uint32_t type) {
  const GgmlTypeInfo* t = ggml_type_info(type);
  return t ? std::string(t->name) : "type" + std::to_string(type);
}

}  // namespace rkv
