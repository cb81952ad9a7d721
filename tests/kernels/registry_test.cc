// Tests of the kernel registry against the op table (graph/op_table.h): every kernel's opsets are
// the op table's (the ranges are not repeated in the backends), an op the table does not know is
// refused, and the built-in registry covers every op of each backend over the table's range.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "graph/op_table.h"
#include "kernels/kernel.h"

namespace otter {
namespace {

using Range = std::pair<int, int>;

// The union of the opsets the op table defines (domain, op) over.
Range table_range(const std::string& domain, const std::string& op) {
  Range r{0, 0};
  for (const OpDef* d : OpTable::instance().all()) {
    if (d->domain != domain || d->op_type != op) continue;
    r.first = r.first == 0 ? d->since_version : std::min(r.first, d->since_version);
    r.second = std::max(r.second, d->until_version);
  }
  return r;
}

TEST(KernelRegistry, OpsetsComeFromTheOpTable) {
  KernelRegistry r;
  KernelDef d;
  d.op_type = "MatMul";
  d.create = simple_kernel([](KernelContext&) {});
  r.add(d);
  ASSERT_EQ(r.all().size(), 1u);
  EXPECT_EQ(r.all()[0].since_version, 13);  // the table's MatMul, not the schema's first version (1)
  EXPECT_EQ(r.all()[0].until_version, kMaxOnnxOpset);
  // Ops defined in two forms span both (ReduceMean: axes attribute 13-17, axes input 18-).
  d.op_type = "ReduceMean";
  r.add(d);
  EXPECT_EQ(r.all()[1].since_version, 13);
  EXPECT_EQ(r.all()[1].until_version, kMaxOnnxOpset);
  // Explicit numbers stay as given.
  d.since_version = 18;
  d.until_version = 19;
  r.add(d);
  EXPECT_EQ(r.all()[2].since_version, 18);
  EXPECT_EQ(r.all()[2].until_version, 19);
}

TEST(KernelRegistry, UnknownOpIsRefusedByName) {
  KernelRegistry r;
  KernelDef d;
  d.domain = "test.domain";
  d.op_type = "NoSuchOp";
  d.device = DeviceType::kCuda;
  try {
    r.add(d);
    FAIL() << "registered a kernel for an op the table does not know";
  } catch (const std::exception& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("test.domain::NoSuchOp"), std::string::npos) << m;
    EXPECT_NE(m.find("op table"), std::string::npos) << m;
  }
}

// Per backend and op, the kernels' opsets together are exactly the op table's range; Softmax and
// LogSoftmax start at their opset-11 form (kSoftmaxKernelSince, kernels/common/nn_params.h).
TEST(KernelRegistry, BuiltInKernelsSpanTheOpTableRange) {
  std::map<std::tuple<DeviceType, std::string, std::string>, Range> spans;
  for (const KernelDef& d : KernelRegistry::instance().all()) {
    Range& s = spans[{d.device, d.domain, d.op_type}];
    s.first = s.first == 0 ? d.since_version : std::min(s.first, d.since_version);
    s.second = std::max(s.second, d.until_version);
  }
  ASSERT_FALSE(spans.empty());
  for (const auto& [key, span] : spans) {
    const auto& [device, domain, op] = key;
    Range table = table_range(domain, op);
    if (domain.empty() && (op == "Softmax" || op == "LogSoftmax")) table.first = 11;
    EXPECT_NE(table.first, 0) << op << ": a " << device_name(device) << " kernel for an op the table lacks";
    EXPECT_EQ(span, table) << device_name(device) << " kernels of " << op << " span opsets " << span.first << "-"
                           << span.second << ", the op table " << table.first << "-" << table.second;
  }
}

}  // namespace
}  // namespace otter
