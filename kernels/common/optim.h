// Optimizer, learning-rate and loss-scale arithmetic shared by the CPU and CUDA backends
// (torch.optim's formulas; see docs/ops.md). Everything is per element or per scalar.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/half.h"

namespace otter {

struct AdamParams {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2_sqrt;  // 1 - beta1^t, sqrt(1 - beta2^t)
  bool decoupled;                                 // AdamW
};

// One element of torch.optim.Adam/AdamW (non-amsgrad, maximize=False):
//   Adam:  g += wd * p
//   AdamW: p *= 1 - lr * wd
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
OTTER_HD void adam_element(float& p, float g, float& m, float& v, const AdamParams& a) {
  if (a.weight_decay != 0.f) {
    if (a.decoupled) p *= 1.f - a.lr * a.weight_decay;
    else g += a.weight_decay * p;
  }
  m = a.beta1 * m + (1.f - a.beta1) * g;
  v = a.beta2 * v + (1.f - a.beta2) * g * g;
  float denom = sqrtf(v) / a.bias_correction2_sqrt + a.eps;
  p -= (a.lr / a.bias_correction1) * (m / denom);
}

struct SgdParams {
  float lr, momentum, weight_decay;
  bool nesterov;
};

// One element of torch.optim.SGD with dampening 0. The momentum buffer starts at zero, which
// equals torch's "buffer = d_p on the first step" when dampening is 0.
OTTER_HD void sgd_element(float& p, float g, float* mom, const SgdParams& s) {
  float d = g;
  if (s.weight_decay != 0.f) d += s.weight_decay * p;
  if (mom) {
    float b = s.momentum * (*mom) + d;
    *mom = b;
    d = s.nesterov ? d + s.momentum * b : b;
  }
  p -= s.lr * d;
}

enum class LrSchedule : int { kConstant = 0, kLinearWarmup = 1, kCosine = 2 };

// Learning rate of the update that follows `step` completed updates (step = 0 for the first):
//   warmup (W > 0): lr * (step + 1) / W while step < W;
//   then constant; or linear decay to min_lr at `total`; or cosine decay to min_lr at `total`.
OTTER_HD float learning_rate(LrSchedule kind, float lr, int64_t step, int64_t warmup, int64_t total, float min_lr) {
  if (warmup > 0 && step < warmup) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup);
  if (kind == LrSchedule::kConstant || total <= warmup) return lr;
  double t = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
  if (t > 1.0) t = 1.0;
  double f = kind == LrSchedule::kLinearWarmup ? 1.0 - t : 0.5 * (1.0 + cos(3.14159265358979323846 * t));
  return static_cast<float>(min_lr + (lr - min_lr) * f);
}

// torch.nn.utils.clip_grad_norm_'s coefficient for the unscaled gradient norm.
OTTER_HD float clip_coefficient(float norm, float max_norm) {
  if (max_norm <= 0.f) return 1.f;
  float c = max_norm / (norm + 1e-6f);
  return c < 1.f ? c : 1.f;
}

struct LossScaleParams {
  float growth, backoff, min_scale, max_scale;
  int64_t interval;
};

// GradScaler.update(): on overflow scale *= backoff and the good-step count resets; else the count
// grows and, when it reaches `interval`, scale *= growth and the count resets. Clamped.
OTTER_HD void loss_scale_update(float& scale, int64_t& good, bool finite, const LossScaleParams& p) {
  if (!finite) {
    scale *= p.backoff;
    good = 0;
  } else if (++good >= p.interval) {
    scale *= p.growth;
    good = 0;
  }
  if (scale < p.min_scale) scale = p.min_scale;
  if (scale > p.max_scale) scale = p.max_scale;
}

}  // namespace otter
