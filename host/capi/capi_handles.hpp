// The C API's handle structs and the guard that turns exceptions into rkv_status plus a message on the handle.
#pragma once
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <ripplekv/ripplekv.h>

#include <memory>

#include "backend/backend.hpp"
#include "core/errors.hpp"
#include "model/model.hpp"
#include "tokenizer/tokenizer.hpp"

struct rkv_context {
  std::string last_error;
};

struct rkv_model {
  rkv::Model model;
  rkv::Tokenizer tokenizer;
  std::string last_error;
  std::unique_ptr<rkv::Backend> backend;  ///< made on `model` after the struct holds it (the model must not move)
};

namespace rkv::capi {

/// Runs `body` (returning void) and maps its exceptions to a status, storing the message in `err`:
/// InputError -> RKV_ERROR_INVALID_ARGUMENT, Cancelled -> RKV_ERROR_CANCELLED, bad_alloc -> RKV_ERROR_OUT_OF_MEMORY,
/// anything else -> RKV_ERROR_INTERNAL. Clears `err` on success.
template <class F>
rkv_status guarded(std::string& err, F&& body) noexcept {
  try {
    body();
    err.clear();
    return RKV_OK;
  } catch (const InputError& e) {
    err = e.what();
    return RKV_ERROR_INVALID_ARGUMENT;
  } catch (const Cancelled& e) {
    err = e.what();
    return RKV_ERROR_CANCELLED;
  } catch (const std::bad_alloc&) {
    err = "out of memory";
    return RKV_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    err = e.what();
    return RKV_ERROR_INTERNAL;
  } catch (...) {
    err = "unknown exception";
    return RKV_ERROR_INTERNAL;
  }
}

/// A malloc'ed NUL-terminated copy of s (freed by rkv_string_free). Throws std::bad_alloc.
inline char* copy_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

/// Throws InputError naming `what` when p is NULL.
template <class T>
void require(const T* p, const char* what) {
  if (!p) throw InputError(std::string(what) + " is NULL");
}

}  // namespace rkv::capi
