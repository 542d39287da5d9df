// What the phases of one `ripplekv run` share (runner/run/run.cpp runs them in order): the plan and options, the
// folder's identity, the model and backend, the scorers and what their shared prefill needs, the profiles and joint
// damage tables, and the evaluation examples (their tokens and task data; each is prefilled only while the cells run
// on it, runner/run/examples.hpp).
//
// Thread rules: one RunState per run, used from the run's thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "model/model.hpp"
#include "plugin/instance.hpp"
#include "runner/compress/joint.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/compress/scorers.hpp"
#include "runner/profile/profile.hpp"
#include "runner/records/output_folder.hpp"
#include "core/progress.hpp"
#include "runner/run/run.hpp"
#include "runner/tasks/task.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

/// One evaluation example of the run as its task built it (tokens and task data; no model state).
struct Example {
  const Task* task = nullptr;
  TaskExample data;
  int64_t prompt_tokens() const { return static_cast<int64_t>(data.prompt.size()); }  ///< T
};

struct RunState {
  RunState(const RunPlan& p, const RunOptions& o) : plan(p), opt(o), progress(o.quiet, o.progress) {}

  const RunPlan& plan;
  const RunOptions& opt;
  Progress progress;
  std::optional<Folder> out;  ///< the output folder, opened once; every file of the run is written through it
  std::unique_ptr<OutputFolderLock> lock;  ///< held for the whole run; check_held() before each result written
  RunIdentity id;
  std::vector<size_t> pending, complete;  ///< cell indices this invocation computes / finds complete (--resume)

  std::optional<Model> model;
  std::optional<Tokenizer> tok;
  std::unique_ptr<Backend> backend;
  HostServices host;
  std::unique_ptr<InstancePool> instances;
  std::unique_ptr<ScorerSet> scorers;  ///< every scorer of the pending cells
  std::vector<int64_t> layers_A;       ///< the compressible layers
  PrefillNeeds needs;                  ///< what every example's prefill computes for the scorers and decode policies

  std::map<std::string, SensitivityProfile> profiles;  ///< by "<signal key>|<scorer key>"
  std::vector<std::string> profile_order;              ///< written in this order (the first is profile.json)
  std::map<std::string, JointDamageTable> joint_tables;  ///< by joint_table_key
  std::vector<Example> examples;

  const ModelConfig& config() const { return model->config; }
  /// "<config>: cell '<label>'": how messages name cell `c`.
  std::string where(size_t c) const { return plan.config_path + ": cell '" + plan.cells[c].label + "'"; }
};

/// The key of the profile a cell reads: its signal's and its scorer's keys.
inline std::string profile_key(const CellConfig& cell) { return cell.signal->key() + "|" + cell.scorer->key(); }

}  // namespace rkv
