// NonFiniteMonitor (see nonfinite.h).
#include "runtime/nonfinite.h"

#include <cmath>

#include "graph/error.h"

namespace otter {

NonFinitePolicy parse_nonfinite_policy(const std::string& s) {
  if (s == "stop") return NonFinitePolicy::kStop;
  if (s == "skip") return NonFinitePolicy::kSkip;
  fail("--on-nonfinite must be stop or skip, got '", s, "'");
}

NonFiniteMonitor::NonFiniteMonitor(NonFinitePolicy policy, const TrainingSession& session)
    : policy_(policy), loss_scaling_(session.graph().loss_scale != nullptr) {}

void NonFiniteMonitor::observe(const StepResult& r) {
  const bool bad_loss = !std::isfinite(r.loss);
  if (!bad_loss && !(r.skipped && !loss_scaling_)) return;
  if (faulty_++ == 0) first_ = r.step;
  if (policy_ == NonFinitePolicy::kSkip) return;
  fail("step ", r.step, ": ", bad_loss ? str_cat("the loss is ", r.loss) : std::string("the gradients are not finite"),
       "; the update was not applied. Check the data and the learning rate, or pass --on-nonfinite skip to skip "
       "such steps");
}

std::string NonFiniteMonitor::summary(int64_t steps) const {
  if (faulty_ == 0) return "";
  return str_cat("skipped ", faulty_, " of ", steps, " steps with a non-finite loss or gradients (the first at step ",
                 first_, "; --on-nonfinite skip)");
}

}  // namespace otter
