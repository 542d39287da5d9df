// Internal to the conformance kit (conformance/conformance*.cpp): the tally of one rule over many inputs.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "conformance/conformance.hpp"

namespace rkv::conformance {

/// Counts the inputs a rule was checked on and keeps the first violation.
class RuleTally {
 public:
  explicit RuleTally(std::string name) : name_(std::move(name)) {}

  void pass() { ++checked_; }
  /// A violation (`why` names the input and what went wrong); only the first one is kept, the others are counted.
  void fail(const std::string& why) {
    ++checked_;
    ++failures_;
    if (first_failure_.empty()) first_failure_ = why;
  }
  /// An input the rule could not be checked on because an earlier rule rejected it.
  void skip() { ++skipped_; }
  bool failed() const { return failures_ > 0; }
  int64_t checked() const { return checked_; }

  /// The case: failed with the first violation (and how many more); failed when every input was skipped; passed with
  /// `covered` (what was checked) otherwise, or with `not_applicable` when the rule never applied.
  ConformanceCase result(const std::string& covered, const std::string& not_applicable = "not applicable") const {
    ConformanceCase c;
    c.name = name_;
    if (failures_ > 0) {
      c.passed = false;
      c.detail = first_failure_;
      if (failures_ > 1) c.detail += " (and " + std::to_string(failures_ - 1) + " more)";
    } else if (checked_ == 0 && skipped_ > 0) {
      c.passed = false;
      c.detail = "no input could be checked: every one was rejected by an earlier rule";
    } else if (checked_ == 0) {
      c.passed = true;
      c.detail = not_applicable;
    } else {
      c.passed = true;
      c.detail = covered;
    }
    if (skipped_ > 0 && checked_ > 0) c.detail += " [" + std::to_string(skipped_) + " input(s) skipped: rejected earlier]";
    return c;
  }

 private:
  std::string name_, first_failure_;
  int64_t checked_ = 0, failures_ = 0, skipped_ = 0;
};

}  // namespace rkv::conformance
