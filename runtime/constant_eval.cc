// Constant evaluation through the CPU kernels (one node at a time), and run_pipeline.
#include "runtime/constant_eval.h"

#include "kernels/kernel.h"
#include "passes/pass_manager.h"

namespace otter {

std::optional<std::vector<Tensor>> CpuConstantEvaluator::evaluate(const Node& n,
                                                                  const std::vector<const Tensor*>& inputs) {
  const KernelDef* def = KernelRegistry::instance().find(n, DeviceType::kCpu);
  if (!def) return std::nullopt;
  auto kernel = def->create(n);
  std::vector<Tensor> results(n.num_outputs());
  std::vector<Tensor*> outs;
  for (int i = 0; i < n.num_outputs(); ++i) outs.push_back(n.output(i) ? &results[i] : nullptr);
  KernelContext ctx(n, inputs, outs, HostAllocator::instance());
  kernel->run(ctx);
  return results;
}

void run_pipeline(Graph& g, const std::string& text) {
  CpuConstantEvaluator evaluator;
  PassContext ctx;
  ctx.evaluator = &evaluator;
  PassManager pm(ctx);
  pm.add_pipeline(text);
  pm.run(g);
}

}  // namespace otter
