// Test helper: runs one op's CPU kernel directly on given tensors (no shape inference involved).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/ir.h"
#include "graph/op_table.h"
#include "kernels/kernel.h"

namespace otter::testing {

struct OpCall {
  std::string op;
  std::vector<Tensor> inputs;  // an undefined Tensor() is an omitted optional input
  std::map<std::string, Attribute> attrs;
  int num_outputs = 1;
  int opset = 17;
  std::string domain;
  uint64_t seed = 0;
  bool first_micro_step = true;  // what accumulating kernels see
  uint64_t omitted_outputs = 0;  // bit i set: output i is left out (unnamed, no tensor)
  bool infer = false;            // run shape inference on the node first
};

// Builds a one-node graph (inputs typed from the tensors), selects the CPU kernel through the
// registry and runs it. Fails the test (throws otter::Error) when no kernel is found.
inline std::vector<Tensor> run_op(const OpCall& c) {
  Graph g;
  g.opset_imports[""] = c.opset;
  if (!c.domain.empty()) g.opset_imports[c.domain] = 1;
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].defined()) { ins.push_back(nullptr); continue; }
    ins.push_back(g.add_input("in" + std::to_string(i), c.inputs[i].dtype(), Shape::of(c.inputs[i].dims())));
  }
  std::vector<std::string> outs;
  auto omitted = [&](int i) { return i < 64 && ((c.omitted_outputs >> i) & 1u); };
  for (int i = 0; i < c.num_outputs; ++i) outs.push_back(omitted(i) ? "" : "out" + std::to_string(i));
  Node* n = g.add_node(c.op, ins, outs, c.domain);
  for (const auto& [k, a] : c.attrs) n->set_attr(k, a);
  if (c.infer) infer_node(*n);
  std::string why;
  const KernelDef* def = KernelRegistry::instance().find(*n, DeviceType::kCpu, &why);
  if (!def) fail("no kernel: ", why);
  auto kernel = def->create(*n);
  std::vector<const Tensor*> in_ptrs;
  for (const Tensor& t : c.inputs) in_ptrs.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> results(c.num_outputs);
  std::vector<Tensor*> out_ptrs;
  for (int i = 0; i < c.num_outputs; ++i) out_ptrs.push_back(omitted(i) ? nullptr : &results[i]);
  KernelContext ctx(*n, in_ptrs, out_ptrs, HostAllocator::instance());
  std::mt19937_64 rng(c.seed);
  ctx.rng = &rng;
  ctx.first_micro_step = c.first_micro_step;
  kernel->run(ctx);
  return results;
}

// The message of the otter::Error `f` throws; fails the test when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

// The message of the Error running `c` throws, "no error" when it runs.
inline std::string run_error(const OpCall& c) {
  try {
    run_op(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// The error of shape inference on one node "the_node" whose graph inputs 'a', 'b', ... have the
// given dtypes and shapes (fails the test when inference accepts it).
inline std::string infer_error(const std::string& op, const std::vector<std::pair<DataType, std::vector<int64_t>>>& ins,
                               const std::map<std::string, Attribute>& attrs = {}, int num_outputs = 1,
                               int opset = 17) {
  Graph g;
  g.opset_imports[""] = opset;
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i)
    vs.push_back(g.add_input(std::string(1, static_cast<char>('a' + i)), ins[i].first, Shape::of(ins[i].second)));
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(str_cat("y", i));
  Node* n = g.add_node(op, vs, outs);
  n->set_name("the_node");
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  return error_of([&] { infer_node(*n); });
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

// Max |a-b| / max(max|b|, tiny), the relative measure the tests use.
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dims(), b.dims());
  double num = 0, den = 1e-30;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i) {
    num = std::max(num, std::abs(a.get_as_double(i) - b.get_as_double(i)));
    den = std::max(den, std::abs(b.get_as_double(i)));
  }
  return num / den;
}

}  // namespace otter::testing
