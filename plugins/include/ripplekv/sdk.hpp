// ripplekv plugin SDK: a C++17 convenience layer over the C ABI in <ripplekv/plugin.h>.
//
// A plugin is one class plus one registration macro:
//
//   class Uniform final : public rkv::sdk::Allocator {
//    public:
//     static rkv::sdk::Descriptor describe() {
//       return rkv::sdk::Descriptor("org.example.allocator.uniform", RKV_KIND_ALLOCATOR, "1.0.0", "b_l = B / |A|");
//     }
//     Uniform(const rkv::sdk::Params&, const rkv::sdk::Host&) {}
//     void allocate(const rkv::sdk::AllocationRequest& r, double* budgets, rkv::sdk::Diagnostics&) override {
//       for (int64_t l = 0; l < r.n_layers; ++l) budgets[l] = double(r.budget_total) / double(r.n_layers);
//     }
//   };
//   RKV_PLUGIN(Uniform)
//
// The SDK catches every exception at the ABI boundary and turns it into a status plus an error message on the
// caller's diagnostics sink: throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "...") for bad input, anything else
// becomes RKV_ERROR_INTERNAL. A library with several plugins uses RKV_REGISTER_PLUGIN(Class) once per class and
// RKV_PLUGIN_LIBRARY("name") once.
//
// Thread rules are the ABI's: descriptor data is immutable after the first call; one instance is never called
// concurrently; the registry is built during static initialization (before the host can call the entry point).
#pragma once

#include <ripplekv/plugin.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rkv::sdk {

// ---- Errors and diagnostics -------------------------------------------------------------------------------------

/// An error with an ABI status; the SDK reports its message to the caller's sink and returns the status.
class Error : public std::runtime_error {
 public:
  Error(rkv_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  rkv_status status() const noexcept { return status_; }

 private:
  rkv_status status_;
};

/// Wraps the caller-supplied sink of one call. Cheap to copy; valid only during that call.
class Diagnostics {
 public:
  explicit Diagnostics(const rkv_diagnostics* sink) : sink_(sink) {}
  void error(const std::string& m) const { send(RKV_DIAG_ERROR, m); }
  /// A warning reaches the run's records (e.g. "pyramid schedule infeasible, fell back to uniform").
  void warning(const std::string& m) const { send(RKV_DIAG_WARNING, m); }
  void info(const std::string& m) const { send(RKV_DIAG_INFO, m); }
  /// The caller's sink, to pass on to host services (their messages then reach the same caller).
  const rkv_diagnostics* raw() const { return sink_; }

 private:
  void send(rkv_diag_level level, const std::string& m) const {
    if (RKV_HAS_FIELD(sink_, rkv_diagnostics, report) && sink_->report) sink_->report(sink_->ctx, level, m.c_str());
  }
  const rkv_diagnostics* sink_;
};

// ---- Parameters -------------------------------------------------------------------------------------------------

/// Typed access to the validated parameters given to create(). Valid only inside the plugin's constructor.
class Params {
 public:
  explicit Params(const rkv_params* p) : p_(p) {}
  int64_t get_int(const char* name) const {
    int64_t v = 0;
    check(RKV_HAS_FIELD(p_, rkv_params, get_int) ? p_->get_int(p_->ctx, name, &v) : RKV_ERROR_UNSUPPORTED, name);
    return v;
  }
  double get_float(const char* name) const {
    double v = 0;
    check(RKV_HAS_FIELD(p_, rkv_params, get_float) ? p_->get_float(p_->ctx, name, &v) : RKV_ERROR_UNSUPPORTED, name);
    return v;
  }
  bool get_bool(const char* name) const {
    int32_t v = 0;
    check(RKV_HAS_FIELD(p_, rkv_params, get_bool) ? p_->get_bool(p_->ctx, name, &v) : RKV_ERROR_UNSUPPORTED, name);
    return v != 0;
  }
  /// Choice and string parameters; the result is a copy.
  std::string get_string(const char* name) const {
    const char* v = nullptr;
    check(RKV_HAS_FIELD(p_, rkv_params, get_string) ? p_->get_string(p_->ctx, name, &v) : RKV_ERROR_UNSUPPORTED,
          name);
    return v ? std::string(v) : std::string();
  }
  /// True when the user set the parameter explicitly (false: the default is in effect).
  bool is_set(const char* name) const {
    return RKV_HAS_FIELD(p_, rkv_params, is_set) && p_->is_set && p_->is_set(p_->ctx, name) != 0;
  }

 private:
  static void check(rkv_status s, const char* name) {
    if (s != RKV_OK) throw Error(RKV_ERROR_INVALID_ARGUMENT, std::string("parameter '") + name + "' is not available");
  }
  const rkv_params* p_;
};

/// The host services an instance was created with; valid for the instance's life.
class Host {
 public:
  explicit Host(const rkv_host* h) : h_(h) {}
  /// True once the caller asked to stop; long loops poll it and throw Cancelled().
  bool is_cancelled() const {
    return RKV_HAS_FIELD(h_, rkv_host, is_cancelled) && h_->is_cancelled && h_->is_cancelled(h_->ctx) != 0;
  }
  /// Throws the cancellation error when the caller asked to stop.
  void throw_if_cancelled() const {
    if (is_cancelled()) throw Error(RKV_ERROR_CANCELLED, "cancelled by the host");
  }
  /// A host service table by id, or nullptr.
  const void* service(const char* id) const {
    return RKV_HAS_FIELD(h_, rkv_host, get_service) && h_->get_service ? h_->get_service(h_->ctx, id) : nullptr;
  }
  const rkv_host* raw() const { return h_; }

 private:
  const rkv_host* h_;
};

/// Turns a status returned by a host service (e.g. the profiler's functions) into an Error naming what failed on
/// which example and layer (layer < 0: none); RKV_ERROR_CANCELLED stays a cancellation.
inline void check_service_status(rkv_status st, const char* what, int64_t example, int64_t layer) {
  if (st == RKV_OK) return;
  if (st == RKV_ERROR_CANCELLED) throw Error(st, "cancelled");
  throw Error(st, std::string("profiler ") + what + " failed on example " + std::to_string(example) +
                      (layer >= 0 ? ", layer " + std::to_string(layer) : std::string()));
}

// ---- Param specs and descriptors ----------------------------------------------------------------------------------

/// One parameter, built fluently: Param::Float("alpha", 0.02, "noise scale").min(0).
class Param {
 public:
  static Param Bool(std::string name, bool def, std::string doc) {
    Param p(std::move(name), RKV_PARAM_BOOL, std::move(doc));
    p.bool_ = def;
    return p;
  }
  static Param Int(std::string name, int64_t def, std::string doc) {
    Param p(std::move(name), RKV_PARAM_INT, std::move(doc));
    p.int_ = def;
    return p;
  }
  static Param Float(std::string name, double def, std::string doc) {
    Param p(std::move(name), RKV_PARAM_FLOAT, std::move(doc));
    p.float_ = def;
    return p;
  }
  static Param Choice(std::string name, std::string def, std::vector<std::string> choices, std::string doc) {
    Param p(std::move(name), RKV_PARAM_CHOICE, std::move(doc));
    p.string_ = std::move(def);
    p.choices_ = std::move(choices);
    return p;
  }
  static Param String(std::string name, std::string def, std::string doc) {
    Param p(std::move(name), RKV_PARAM_STRING, std::move(doc));
    p.string_ = std::move(def);
    return p;
  }
  Param& min(double v) {
    has_min_ = true;
    min_ = v;
    return *this;
  }
  Param& max(double v) {
    has_max_ = true;
    max_ = v;
    return *this;
  }

 private:
  friend class Descriptor;
  Param(std::string name, rkv_param_type type, std::string doc)
      : name_(std::move(name)), doc_(std::move(doc)), type_(type) {}
  std::string name_, doc_, string_;
  rkv_param_type type_;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  bool has_min_ = false, has_max_ = false;
  double min_ = 0, max_ = 0;
  std::vector<std::string> choices_;
};

/// Owns a descriptor and its param specs; `get()` gives the ABI view, stable while this object lives (the SDK keeps
/// every registered Descriptor for the process lifetime, and it is never moved after finalize()).
class Descriptor {
 public:
  Descriptor(std::string id, rkv_plugin_kind kind, std::string version, std::string description)
      : id_(std::move(id)), version_(std::move(version)), description_(std::move(description)), kind_(kind) {}
  Descriptor& param(Param p) {
    params_.push_back(std::move(p));
    return *this;
  }
  Descriptor& flags(uint64_t f) {
    flags_ |= f;
    return *this;
  }
  const std::string& id() const { return id_; }

  /// Builds the ABI structs; call once, after which the object must not move (the registry heap-allocates it).
  void finalize() {
    specs_.resize(params_.size());
    choice_ptrs_.resize(params_.size());
    spec_ptrs_.clear();
    for (size_t i = 0; i < params_.size(); ++i) {
      const Param& p = params_[i];
      rkv_param_spec& s = specs_[i];
      std::memset(&s, 0, sizeof s);
      s.struct_size = sizeof(rkv_param_spec);
      s.name = p.name_.c_str();
      s.type = p.type_;
      s.doc = p.doc_.c_str();
      s.default_bool = p.bool_ ? 1 : 0;
      s.default_int = p.int_;
      s.default_float = p.float_;
      s.default_string = (p.type_ == RKV_PARAM_CHOICE || p.type_ == RKV_PARAM_STRING) ? p.string_.c_str() : nullptr;
      s.has_min = p.has_min_;
      s.has_max = p.has_max_;
      s.min = p.min_;
      s.max = p.max_;
      if (p.type_ == RKV_PARAM_CHOICE) {
        for (const auto& c : p.choices_) choice_ptrs_[i].push_back(c.c_str());
        choice_ptrs_[i].push_back(nullptr);
        s.choices = choice_ptrs_[i].data();
      }
    }
    for (auto& s : specs_) spec_ptrs_.push_back(&s);
    spec_ptrs_.push_back(nullptr);
    std::memset(&desc_, 0, sizeof desc_);
    desc_.struct_size = sizeof(rkv_plugin_descriptor);
    desc_.id = id_.c_str();
    desc_.kind = kind_;
    desc_.version = version_.c_str();
    desc_.description = description_.c_str();
    desc_.params = spec_ptrs_.data();
    desc_.flags = flags_;
  }
  const rkv_plugin_descriptor* get() const { return &desc_; }

 private:
  std::string id_, version_, description_;
  rkv_plugin_kind kind_;
  uint64_t flags_ = 0;
  std::vector<Param> params_;
  std::vector<rkv_param_spec> specs_;
  std::vector<std::vector<const char*>> choice_ptrs_;
  std::vector<const rkv_param_spec*> spec_ptrs_;
  rkv_plugin_descriptor desc_{};
};

// ---- Tensor helpers -----------------------------------------------------------------------------------------------

/// Checks that `t` is a contiguous CPU tensor of `code`/`bits` with exactly `shape`; throws Error naming `what`.
inline void require_tensor(const DLTensor* t, const char* what, uint8_t code, uint8_t bits,
                           std::initializer_list<int64_t> shape) {
  auto fail = [&](const std::string& why) {
    throw Error(RKV_ERROR_INVALID_ARGUMENT, std::string("tensor '") + what + "': " + why);
  };
  if (!t || !t->data) fail("missing");
  if (t->device.device_type != kDLCPU) fail("expected a CPU tensor");
  if (t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1) fail("wrong dtype");
  if (t->ndim != static_cast<int32_t>(shape.size())) fail("wrong number of dimensions");
  int64_t i = 0, expected_stride = 1;
  for (int64_t d : shape) {
    if (t->shape[i] != d) fail("wrong shape");
    ++i;
  }
  if (t->strides) {
    for (int32_t k = t->ndim - 1; k >= 0; --k) {
      if (t->shape[k] != 1 && t->strides[k] != expected_stride) fail("expected a contiguous row-major tensor");
      expected_stride *= t->shape[k];
    }
  }
}

/// The typed data pointer of a tensor (byte_offset applied).
template <typename T>
T* tensor_data(const DLTensor* t) {
  return reinterpret_cast<T*>(static_cast<char*>(t->data) + t->byte_offset);
}

/// The positions each KV head keeps, for a budget-dependent scorer (rkv_scorer_inputs.head_budgets, ABI minor 6):
/// int64 [n_kv_heads] on the CPU, borrowed for the call, or nullptr when the host passed none (the scorer's
/// budget-free ranking is asked for) or predates the field. Throws Error naming the tensor when it is misshaped.
inline const int64_t* head_budgets(const rkv_scorer_inputs& in, int64_t n_kv_heads) {
  if (!RKV_HAS_FIELD(&in, rkv_scorer_inputs, head_budgets) || in.head_budgets == nullptr) return nullptr;
  require_tensor(in.head_budgets, "head_budgets", kDLInt, 64, {n_kv_heads});
  return tensor_data<const int64_t>(in.head_budgets);
}

// ---- Plugin base classes ------------------------------------------------------------------------------------------

/// Base of every SDK plugin.
class Plugin {
 public:
  virtual ~Plugin() = default;
};

/// rkv_allocation_request in C++ terms. `profile` is nullptr unless the descriptor set RKV_FLAG_NEEDS_PROFILE.
struct AllocationRequest {
  const double* profile = nullptr;  ///< [n_layers], over the compressible layers A
  int64_t budget_total = 0;         ///< B
  int64_t prefix_tokens = 0;        ///< T
  int64_t n_layers = 0;             ///< |A|
  int64_t protected_count = -1;     ///< scorer's protected count, -1 in standalone allocate
  const int64_t* layer_spans = nullptr;  ///< [n_layers] entries layer l can hold (ABI minor 3); nullptr: all T
  /// span_l: min(T, window) for a sliding-window layer, T otherwise (T when the host sent no spans).
  int64_t span(int64_t l) const { return layer_spans ? layer_spans[l] : prefix_tokens; }
};

/// Base class of allocators ("rkv.allocator/1"). allocate() writes n_layers finite non-negative reals summing to B.
class Allocator : public Plugin {
 public:
  virtual void allocate(const AllocationRequest& request, double* budgets, Diagnostics& diag) = 0;
};

/// rkv_head_allocation_request in C++ terms (rkv.allocator/2). Budgets are in entries: b[l, h] kept by KV head h of
/// layer l; budget_total = H_kv x B.
struct HeadAllocationRequest {
  const double* profile = nullptr;        ///< [n_layers] unless the descriptor did not set RKV_FLAG_NEEDS_PROFILE
  const float* scores = nullptr;          ///< [n_layers, n_kv_heads, prefix_tokens] when RKV_FLAG_NEEDS_SCORES
  const uint8_t* protected_mask = nullptr;///< [prefix_tokens], 1 = kept by every head; nullptr with no scorer
  const int64_t* layer_budgets = nullptr; ///< [n_layers]: row l must sum to n_kv_heads x b_l; nullptr: split it all
  int64_t budget_total = 0;               ///< H_kv x B
  int64_t prefix_tokens = 0;              ///< T
  int64_t n_layers = 0;                   ///< |A|
  int64_t n_kv_heads = 0;                 ///< H_kv
  int64_t protected_count = -1;           ///< per head; -1 with no scorer
  const int64_t* layer_spans = nullptr;   ///< [n_layers] entries each head of layer l can hold (ABI minor 3); nullptr: T
  /// span_l: each head of layer l holds at most this many entries, its last span_l positions (T without windows).
  int64_t span(int64_t l) const { return layer_spans ? layer_spans[l] : prefix_tokens; }
};

/// Base class of per-head allocators ("rkv.allocator/2"). allocate_heads() writes n_layers x n_kv_heads finite
/// non-negative reals (row-major) summing to budget_total (each row to n_kv_heads x layer_budgets[l] when given).
class HeadAllocator : public Plugin {
 public:
  virtual void allocate_heads(const HeadAllocationRequest& request, double* budgets, Diagnostics& diag) = 0;
};

/// Base class of scorers ("rkv.scorer/1").
class Scorer : public Plugin {
 public:
  /// What this scorer needs for a model of `shape` (window, protected positions, statistics).
  virtual rkv_scorer_requirements requirements(const rkv_attention_shape& shape) = 0;
  /// Fills scores [H_kv, T] (float32, row-major, CPU unless RKV_FLAG_SUPPORTS_CUDA) for one layer.
  virtual void score(const rkv_scorer_inputs& inputs, float* scores, int64_t n_kv_heads, int64_t prefix_tokens,
                     Diagnostics& diag) = 0;
};

/// Base class of signals ("rkv.signal/1").
class Signal : public Plugin {
 public:
  /// Fills s [n_layers] and per_example [n_examples, n_layers] (float64, row-major).
  virtual void profile(const rkv_signal_request& request, double* s, double* per_example, Diagnostics& diag) = 0;
};

/// Base class of per-prompt signals ("rkv.prompt_signal/1", ABI minor 7). The descriptor must set RKV_FLAG_PER_PROMPT.
class PromptSignal : public Plugin {
 public:
  /// The prefill statistics this signal reads for a model of `shape` (stats, window, query_skip; no decode fields).
  virtual rkv_scorer_requirements requirements(const rkv_attention_shape& shape) = 0;
  /// s_l of one layer of the prompt being compressed (finite; larger = more sensitive).
  virtual double layer_value(const rkv_scorer_inputs& inputs, Diagnostics& diag) = 0;
};

// ---- Registry and the ABI glue --------------------------------------------------------------------------------------

namespace detail {

struct Entry {
  std::unique_ptr<Descriptor> descriptor;
  Plugin* (*create)(const Params&, const Host&);
};

inline std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

template <typename T>
Plugin* create_plugin(const Params& params, const Host& host) {
  return new T(params, host);
}

template <typename T>
bool register_plugin() {
  auto d = std::make_unique<Descriptor>(T::describe());
  d->finalize();
  registry().push_back(Entry{std::move(d), &create_plugin<T>});
  return true;
}

/// Runs `body`, mapping exceptions to a status and an error message on `diag`.
template <typename F>
rkv_status guarded(const rkv_diagnostics* diag, F&& body) noexcept {
  Diagnostics d(diag);
  try {
    body(d);
    return RKV_OK;
  } catch (const Error& e) {
    d.error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    d.error("out of memory");
    return RKV_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    d.error(std::string("exception: ") + e.what());
    return RKV_ERROR_INTERNAL;
  } catch (...) {
    d.error("unknown exception");
    return RKV_ERROR_INTERNAL;
  }
}

/// The instance the host holds: the ABI struct followed by the C++ plugin it owns.
struct Instance {
  rkv_plugin_instance abi;
  std::unique_ptr<Plugin> plugin;
  rkv_allocator_v1 allocator_vtable;
  rkv_allocator_v2 head_allocator_vtable;
  rkv_scorer_v1 scorer_vtable;
  rkv_signal_v1 signal_vtable;
  rkv_prompt_signal_v1 prompt_signal_vtable;
};

inline Plugin* plugin_of(rkv_plugin_instance* self) { return static_cast<Instance*>(self->plugin_data)->plugin.get(); }

inline rkv_status allocator_allocate(rkv_plugin_instance* self, const rkv_allocation_request* r, DLTensor* out,
                                     const rkv_diagnostics* diag) {
  return guarded(diag, [&](Diagnostics& d) {
    if (!r || !RKV_HAS_FIELD(r, rkv_allocation_request, protected_count))
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "allocation request missing or too old");
    require_tensor(out, "budgets", kDLFloat, 64, {r->n_layers});
    AllocationRequest req;
    if (r->profile) {
      require_tensor(r->profile, "profile", kDLFloat, 64, {r->n_layers});
      req.profile = tensor_data<const double>(r->profile);
    }
    req.budget_total = r->budget_total;
    req.prefix_tokens = r->prefix_tokens;
    req.n_layers = r->n_layers;
    req.protected_count = r->protected_count;
    if (RKV_HAS_FIELD(r, rkv_allocation_request, layer_spans) && r->layer_spans) {
      require_tensor(r->layer_spans, "layer_spans", kDLInt, 64, {r->n_layers});
      req.layer_spans = tensor_data<const int64_t>(r->layer_spans);
    }
    static_cast<Allocator*>(plugin_of(self))->allocate(req, tensor_data<double>(out), d);
  });
}

inline rkv_status head_allocator_allocate(rkv_plugin_instance* self, const rkv_head_allocation_request* r,
                                          DLTensor* out, const rkv_diagnostics* diag) {
  return guarded(diag, [&](Diagnostics& d) {
    if (!r || !RKV_HAS_FIELD(r, rkv_head_allocation_request, protected_count))
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "head allocation request missing or too old");
    if (r->n_layers < 1 || r->n_kv_heads < 1 || r->prefix_tokens < 1)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "head allocation request: n_layers, n_kv_heads and T must be >= 1");
    require_tensor(out, "budgets", kDLFloat, 64, {r->n_layers, r->n_kv_heads});
    HeadAllocationRequest req;
    if (r->profile) {
      require_tensor(r->profile, "profile", kDLFloat, 64, {r->n_layers});
      req.profile = tensor_data<const double>(r->profile);
    }
    if (r->scores) {
      require_tensor(r->scores, "scores", kDLFloat, 32, {r->n_layers, r->n_kv_heads, r->prefix_tokens});
      req.scores = tensor_data<const float>(r->scores);
    }
    if (r->protected_mask) {
      require_tensor(r->protected_mask, "protected_mask", kDLUInt, 8, {r->prefix_tokens});
      req.protected_mask = tensor_data<const uint8_t>(r->protected_mask);
    }
    if (r->layer_budgets) {
      require_tensor(r->layer_budgets, "layer_budgets", kDLInt, 64, {r->n_layers});
      req.layer_budgets = tensor_data<const int64_t>(r->layer_budgets);
    }
    req.budget_total = r->budget_total;
    req.prefix_tokens = r->prefix_tokens;
    req.n_layers = r->n_layers;
    req.n_kv_heads = r->n_kv_heads;
    req.protected_count = r->protected_count;
    if (RKV_HAS_FIELD(r, rkv_head_allocation_request, layer_spans) && r->layer_spans) {
      require_tensor(r->layer_spans, "layer_spans", kDLInt, 64, {r->n_layers});
      req.layer_spans = tensor_data<const int64_t>(r->layer_spans);
    }
    static_cast<HeadAllocator*>(plugin_of(self))->allocate_heads(req, tensor_data<double>(out), d);
  });
}

/// requirements() of a Scorer or a PromptSignal, copied into the host's struct up to the smaller of the two sizes.
template <typename P>
inline rkv_status requirements_of(rkv_plugin_instance* self, const rkv_attention_shape* shape,
                                  rkv_scorer_requirements* out, const rkv_diagnostics* diag) {
  return guarded(diag, [&](Diagnostics&) {
    if (!shape || !out) throw Error(RKV_ERROR_INVALID_ARGUMENT, "requirements: null argument");
    rkv_scorer_requirements r = static_cast<P*>(plugin_of(self))->requirements(*shape);
    r.struct_size = sizeof(rkv_scorer_requirements);
    const uint32_t n = out->struct_size < sizeof r ? out->struct_size : static_cast<uint32_t>(sizeof r);
    const uint32_t host_size = out->struct_size;
    std::memcpy(out, &r, n);
    out->struct_size = host_size;
  });
}

inline rkv_status prompt_signal_layer_value(rkv_plugin_instance* self, const rkv_scorer_inputs* in, double* out,
                                            const rkv_diagnostics* diag) {
  return guarded(diag, [&](Diagnostics& d) {
    if (!in || !out) throw Error(RKV_ERROR_INVALID_ARGUMENT, "layer_value: null argument");
    *out = static_cast<PromptSignal*>(plugin_of(self))->layer_value(*in, d);
  });
}

inline rkv_status scorer_score(rkv_plugin_instance* self, const rkv_scorer_inputs* in, DLTensor* out,
                               const rkv_diagnostics* diag) {
  return guarded(diag, [&](Diagnostics& d) {
    if (!in || !out || out->ndim != 2) throw Error(RKV_ERROR_INVALID_ARGUMENT, "score: bad arguments");
    const int64_t h_kv = out->shape[0], t = out->shape[1];
    require_tensor(out, "scores", kDLFloat, 32, {h_kv, t});
    static_cast<Scorer*>(plugin_of(self))->score(*in, tensor_data<float>(out), h_kv, t, d);
  });
}

inline rkv_status signal_profile(rkv_plugin_instance* self, const rkv_signal_request* r, DLTensor* s,
                                 DLTensor* per_example, const rkv_diagnostics* diag) {
  return guarded(diag, [&](Diagnostics& d) {
    if (!r) throw Error(RKV_ERROR_INVALID_ARGUMENT, "profile: null request");
    require_tensor(s, "s", kDLFloat, 64, {r->n_layers});
    require_tensor(per_example, "per_example", kDLFloat, 64, {r->n_examples, r->n_layers});
    static_cast<Signal*>(plugin_of(self))->profile(*r, tensor_data<double>(s), tensor_data<double>(per_example), d);
  });
}

inline const void* instance_get_interface(const rkv_plugin_instance* self, const char* id) {
  if (!self || !id) return nullptr;
  auto* inst = static_cast<Instance*>(self->plugin_data);
  Plugin* p = inst->plugin.get();
  if (std::strcmp(id, RKV_INTERFACE_ALLOCATOR_V1) == 0 && dynamic_cast<Allocator*>(p)) return &inst->allocator_vtable;
  if (std::strcmp(id, RKV_INTERFACE_ALLOCATOR_V2) == 0 && dynamic_cast<HeadAllocator*>(p))
    return &inst->head_allocator_vtable;
  if (std::strcmp(id, RKV_INTERFACE_SCORER_V1) == 0 && dynamic_cast<Scorer*>(p)) return &inst->scorer_vtable;
  if (std::strcmp(id, RKV_INTERFACE_SIGNAL_V1) == 0 && dynamic_cast<Signal*>(p)) return &inst->signal_vtable;
  if (std::strcmp(id, RKV_INTERFACE_PROMPT_SIGNAL_V1) == 0 && dynamic_cast<PromptSignal*>(p))
    return &inst->prompt_signal_vtable;
  return nullptr;
}

inline void instance_destroy(rkv_plugin_instance* self) {
  if (self) delete static_cast<Instance*>(self->plugin_data);
}

inline uint32_t library_descriptor_count() { return static_cast<uint32_t>(registry().size()); }

inline const rkv_plugin_descriptor* library_descriptor_at(uint32_t i) {
  return i < registry().size() ? registry()[i].descriptor->get() : nullptr;
}

inline rkv_status library_create(const char* plugin_id, const rkv_host* host, const rkv_params* params,
                                 const rkv_diagnostics* diag, rkv_plugin_instance** out) {
  return guarded(diag, [&](Diagnostics&) {
    if (!plugin_id || !out) throw Error(RKV_ERROR_INVALID_ARGUMENT, "create: null argument");
    for (const Entry& e : registry()) {
      if (e.descriptor->id() != plugin_id) continue;
      auto inst = std::make_unique<Instance>();
      inst->plugin.reset(e.create(Params(params), Host(host)));
      inst->abi.struct_size = sizeof(rkv_plugin_instance);
      inst->abi.plugin_data = inst.get();
      inst->abi.get_interface = &instance_get_interface;
      inst->abi.destroy = &instance_destroy;
      inst->allocator_vtable = rkv_allocator_v1{sizeof(rkv_allocator_v1), &allocator_allocate};
      inst->head_allocator_vtable = rkv_allocator_v2{sizeof(rkv_allocator_v2), &head_allocator_allocate};
      inst->scorer_vtable = rkv_scorer_v1{sizeof(rkv_scorer_v1), &requirements_of<Scorer>, &scorer_score};
      inst->signal_vtable = rkv_signal_v1{sizeof(rkv_signal_v1), &signal_profile};
      inst->prompt_signal_vtable = rkv_prompt_signal_v1{sizeof(rkv_prompt_signal_v1), &requirements_of<PromptSignal>,
                                                        &prompt_signal_layer_value};
      *out = &inst.release()->abi;
      return;
    }
    throw Error(RKV_ERROR_INVALID_ARGUMENT, std::string("no plugin with id '") + plugin_id + "' in this library");
  });
}

inline const rkv_plugin_library* library(const char* name) {
  static const rkv_plugin_library lib = {sizeof(rkv_plugin_library), RKV_ABI_VERSION_MAJOR, RKV_ABI_VERSION_MINOR,
                                         name, &library_descriptor_count, &library_descriptor_at, &library_create};
  return &lib;
}

}  // namespace detail
}  // namespace rkv::sdk

#define RKV_SDK_CONCAT2(a, b) a##b
#define RKV_SDK_CONCAT(a, b) RKV_SDK_CONCAT2(a, b)

/// Registers plugin class `Class` (static describe(), constructor (const Params&, const Host&)) in this library.
#define RKV_REGISTER_PLUGIN(Class)                                  \
  namespace {                                                       \
  const bool RKV_SDK_CONCAT(rkv_sdk_registered_, __LINE__) =        \
      ::rkv::sdk::detail::register_plugin<Class>();                 \
  }

/// Defines the library's one exported entry point. Use once per library.
#define RKV_PLUGIN_LIBRARY(name)                                                                        \
  extern "C" RKV_PLUGIN_EXPORT const rkv_plugin_library* rkv_plugin_library_get(uint32_t, uint32_t) {   \
    return ::rkv::sdk::detail::library(name);                                                           \
  }

/// A library with exactly one plugin: register it and define the entry point.
#define RKV_PLUGIN(Class)     \
  RKV_REGISTER_PLUGIN(Class)  \
  RKV_PLUGIN_LIBRARY(#Class)
