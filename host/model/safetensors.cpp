#include "model/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/errors.hpp"
#include "model/half.hpp"

namespace rkv {

int64_t SafetensorsTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // overflow excluded at parse time
  return n;
}

int64_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : map_(path) {
  // A file truncated while its header is read reads as zeros past its new end (mapped_file.hpp): whatever error that
  // causes, report the truncation.
  try {
    parse();
  } catch (const InputError&) {
    map_.check_unchanged("reading the safetensors header");
    throw;
  }
  map_.check_unchanged("reading the safetensors header");
}

void SafetensorsFile::parse() {
  const std::string& p = map_.path();
  const uint64_t size = map_.size();
  if (size < 8) throw InputError(p + ": invalid safetensors: file is " + std::to_string(size) + " bytes, too short for the header size");
  uint64_t n;
  std::memcpy(&n, map_.data(), 8);
  if (n > size - 8) {
    throw InputError(p + ": invalid safetensors: header size " + std::to_string(n) + " points beyond the end of the file (" +
                     std::to_string(size) + " bytes)");
  }
  data_start_ = 8 + n;
  const uint64_t data_size = size - data_start_;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(map_.data() + 8),
                                   reinterpret_cast<const char*>(map_.data() + 8 + n));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(p + ": invalid safetensors: the JSON header does not parse: " + e.what());
  }
  if (!header.is_object()) throw InputError(p + ": invalid safetensors: the JSON header is not an object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw InputError(p + ": invalid safetensors: __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        metadata_[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      }
      continue;
    }
    const std::string where = p + ": invalid safetensors: tensor '" + name + "'";
    if (!v.is_object()) throw InputError(where + " is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) throw InputError(where + " has no string 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) throw InputError(where + " has no array 'shape'");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
      throw InputError(where + " has no 'data_offsets' pair");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = v["dtype"].get<std::string>();
    const int64_t es = safetensors_dtype_size(t.dtype);
    if (es == 0) throw InputError(where + " has unknown dtype '" + t.dtype + "'");
    int64_t n_elem = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw InputError(where + " has a shape entry that is not a non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (dim != 0 && n_elem > std::numeric_limits<int64_t>::max() / es / static_cast<int64_t>(dim))) {
        throw InputError(where + " has an impossible shape");
      }
      t.shape.push_back(static_cast<int64_t>(dim));
      n_elem *= static_cast<int64_t>(dim);
    }
    for (const auto& o : v["data_offsets"]) {
      if (!o.is_number_unsigned()) throw InputError(where + " has a data offset that is not a non-negative integer");
    }
    t.begin = v["data_offsets"][0].get<uint64_t>();
    t.end = v["data_offsets"][1].get<uint64_t>();
    if (t.begin > t.end) throw InputError(where + " has data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] with begin > end");
    if (t.end > data_size) {
      throw InputError(where + " data [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                       ") lies outside the data section of " + std::to_string(data_size) + " bytes");
    }
    const uint64_t expect = static_cast<uint64_t>(n_elem) * static_cast<uint64_t>(es);
    if (t.end - t.begin != expect) {
      std::string shape = "[";
      for (size_t k = 0; k < t.shape.size(); ++k) shape += (k ? ", " : "") + std::to_string(t.shape[k]);
      shape += "]";
      throw InputError(where + " has dtype " + t.dtype + " and shape " + shape + " (" + std::to_string(expect) +
                       " bytes) but its data range holds " + std::to_string(t.end - t.begin) + " bytes");
    }
    index_.emplace(name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  // No two tensors may share bytes.
  std::vector<const SafetensorsTensor*> by_begin;
  for (const auto& t : tensors_) {
    if (t.end > t.begin) by_begin.push_back(&t);
  }
  std::sort(by_begin.begin(), by_begin.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t k = 1; k < by_begin.size(); ++k) {
    if (by_begin[k]->begin < by_begin[k - 1]->end) {
      throw InputError(p + ": invalid safetensors: tensors '" + by_begin[k - 1]->name + "' and '" + by_begin[k]->name +
                       "' have overlapping data ranges");
    }
  }
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> safetensors_to_f32(const SafetensorsFile& f, const SafetensorsTensor& t) {
  const size_t n = static_cast<size_t>(t.n_elements());
  std::vector<float> out(n);
  const uint8_t* src = f.data(t);
  if (t.dtype == "F32") {
    if (n > 0) std::memcpy(out.data(), src, n * 4);  // an empty vector's data() may be null
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    const bool bf = t.dtype == "BF16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = bf ? bf16_to_fp32(h) : fp16_to_fp32(h);
    }
  } else {
    check_weight_dtype(f, t);
  }
  return out;
}

void check_weight_dtype(const SafetensorsFile& f, const SafetensorsTensor& t) {
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16") {
    throw InputError(f.path() + ": tensor '" + t.name + "' has dtype " + t.dtype +
                     "; model weights must be F32, F16 or BF16");
  }
}

}  // namespace rkv
