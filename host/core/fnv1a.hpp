// FNV-1a, the 64-bit variant (Fowler, Noll and Vo; offset basis 0xcbf29ce484222325, prime 0x100000001b3): a fast,
// stable hash of a string for ids and seeds derived from names (cell ids, bootstrap seeds). Not cryptographic; use
// core/sha256.hpp for content hashes.
// Thread rules: pure function.
#pragma once
#include <cstdint>
#include <string>

namespace rkv {

/// The 64-bit FNV-1a hash of the bytes of `text`.
uint64_t fnv1a64(const std::string& text);

}  // namespace rkv
