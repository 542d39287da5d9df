#include "runner/profile/joint_damage.hpp"

#include "core/cancel.hpp"
#include "runner/profile/profile.hpp"

namespace rkv {

std::string joint_table_key(const CellConfig& cell) { return cell.scorer->key() + "|" + cell.joint.label(); }

JointDamageTable measure_joint_damage(const RunPlan& plan, const CellConfig& cc, const Model& model,
                                      const Tokenizer& tok, Backend& backend, const std::atomic<bool>* cancel,
                                      const std::function<void(const std::string&)>& note) {
  JointDamageTable table;
  table.options = joint_options(cc.joint.fractions, cc.joint.bits, cc.joint.share);
  for (const JointOption& o : table.options) {
    throw_if_cancelled();
    if (joint_option_is_lossless(o)) {
      table.damage.emplace_back(static_cast<size_t>(model.config.n_layers), 0.0);
      continue;
    }
    if (note) note("run: joint plan: damage of " + o.label() + " per layer (base scorer " + cc.scorer->id + ")");
    ProfileRequest req = make_profile_request(plan, cc, model, tok, "damage");
    req.signal.params = joint_option_damage_params(cc.joint, o);
    req.backend = &backend;
    req.cancel = cancel;
    table.damage.push_back(compute_profile(req).s);
  }
  return table;
}

}  // namespace rkv
