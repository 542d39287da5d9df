// The joint allocator's damage table (docs/ARCHITECTURE.md "Compression damage"): for a cell with
// [compression.joint], D_l(o) of every option o of its grid (a kept fraction at a bit width, or sharing), each one
// profile of the builtin damage signal on the calibration split (cached like any profile), measured once per (scorer,
// grid). A lossless option (every entry kept in float32) does no damage and is not measured.
//
// Thread rules: runs on the backend it is given; not concurrently with other work on it.
#pragma once
#include <atomic>
#include <functional>
#include <string>

#include "backend/backend.hpp"
#include "model/model.hpp"
#include "runner/compress/joint.hpp"
#include "runner/plan/run_plan.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

/// The key of a joint cell's damage table: its scorer and its grid (the calibration split is the run's).
std::string joint_table_key(const CellConfig& cell);

/// The damage table of joint cell `cell` of `plan` on `backend` (its model `model`, tokenizer `tok`). `note` (may be
/// empty) is told which option is measured; `cancel` (may be null) is polled by the measurement. Errors as
/// compute_profile's; rkv::Cancelled between options.
JointDamageTable measure_joint_damage(const RunPlan& plan, const CellConfig& cell, const Model& model,
                                      const Tokenizer& tok, Backend& backend, const std::atomic<bool>* cancel,
                                      const std::function<void(const std::string&)>& note);

}  // namespace rkv
