// What training does when a step's loss or gradients are not finite (otter-train train
// --on-nonfinite). Without loss scaling, a non-finite step is a fault in the data or the
// hyperparameters: `stop` fails naming the step, `skip` lets the graph skip the update (as it does
// anyway) and counts it for a summary at the end. With loss scaling, skipped overflow steps are the
// scaler's normal work; only a non-finite loss is a fault there.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/training_session.h"

namespace otter {

enum class NonFinitePolicy { kStop, kSkip };

// "stop" or "skip"; fails naming --on-nonfinite otherwise.
NonFinitePolicy parse_nonfinite_policy(const std::string& s);

class NonFiniteMonitor {
 public:
  NonFiniteMonitor(NonFinitePolicy policy, const TrainingSession& session);
  // After each step: fails under kStop when the step was non-finite, else counts it.
  void observe(const StepResult& r);
  int64_t faulty_steps() const { return faulty_; }
  // "" when no step was non-finite, else a line saying how many were skipped and the first one.
  std::string summary(int64_t steps) const;

 private:
  NonFinitePolicy policy_;
  bool loss_scaling_;
  int64_t faulty_ = 0, first_ = 0;
};

}  // namespace otter
