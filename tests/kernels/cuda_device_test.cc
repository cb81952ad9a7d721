// Tests of the CUDA device layer: the availability probe, the allocator's size classes and cache,
// host/device copies and bad-input reports, plus the host-side pieces of the CUDA kernels (strided
// indexers, the Philox generator of Dropout). Tests that need a GPU skip visibly without one.
#include <gtest/gtest.h>

#include <random>

#include "graph/op_table.h"
#include "kernels/common/philox.h"
#include "kernels/device.h"
#include "runtime/executor.h"

#ifdef OTTER_HAVE_CUDA
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/indexer.h"
#endif

namespace otter {
namespace {

// Why a test that needs a GPU skips ("no CUDA device: <driver message>").
std::string no_device() {
  const std::string r = cuda_unavailable_reason();
  return r.rfind("no CUDA device", 0) == 0 ? r : "no CUDA device: " + r;
}

#define SKIP_WITHOUT_DEVICE() \
  if (!cuda_available()) GTEST_SKIP() << no_device()

TEST(CudaAvailable, ProbeNeverThrowsAndExplainsItself) {
  bool available = false;
  ASSERT_NO_THROW(available = cuda_available());
  if (available) {
    EXPECT_TRUE(cuda_unavailable_reason().empty());
    auto dev = make_cuda_device();
    EXPECT_EQ(dev->type(), DeviceType::kCuda);
    EXPECT_NE(dev->describe().find("sm_"), std::string::npos) << dev->describe();
  } else {
    const std::string why = cuda_unavailable_reason();
    EXPECT_TRUE(why.rfind("no CUDA device", 0) == 0 || why.rfind("this build", 0) == 0) << why;
    try {
      make_cuda_device();
      ADD_FAILURE() << "make_cuda_device succeeded without a device";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

TEST(Philox, RandomKnownAnswerVectors) {
  // Random123's tests/kat_vectors, the three "philox4x32 10" lines: counter, key, result.
  struct Kat {
    Philox4 ctr;
    uint32_t k0, k1;
    Philox4 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const Philox4 got = philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.w[i], k.want.w[i]) << "word " << i;
  }
}

#ifdef OTTER_HAVE_CUDA

using cuda::CachingAllocator;

TEST(CudaAllocator, SizeClassesCoverRequestsWithBoundedWaste) {
  size_t prev = 0;
  for (size_t bytes = 1; bytes < (size_t{1} << 30); bytes = bytes * 5 / 4 + 1) {
    const size_t cls = CachingAllocator::size_class(bytes);
    EXPECT_GE(cls, bytes);
    EXPECT_GE(cls, prev) << "classes must grow with the request";
    EXPECT_LE(cls, std::max<size_t>(512, bytes + bytes / 4 + 512)) << bytes;
    EXPECT_EQ(cls % 512, 0u);
    EXPECT_EQ(CachingAllocator::size_class(cls), cls) << "a class is its own class";
    prev = cls;
  }
}

// Flat index -> offsets computed the slow way: per operand, sum of index * stride over all dims.
template <int K>
void expect_indexer_matches(const std::vector<int64_t>& dims, const std::array<std::vector<int64_t>, K>& strides) {
  const auto ix = cuda::make_indexer<K>(dims, strides);
  const int64_t n = num_elements(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off[K];
    ix.offsets(i, off);
    for (int k = 0; k < K; ++k) {
      int64_t want = 0;
      for (size_t d = 0; d < dims.size(); ++d) want += idx[d] * strides[k][d];
      ASSERT_EQ(off[k], want) << "operand " << k << " at flat index " << i << " of " << dims_to_string(dims);
    }
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

TEST(CudaIndexer, BroadcastOffsetsMatchTheDefinition) {
  const std::vector<int64_t> out = {2, 3, 4, 5};
  expect_indexer_matches<2>(out, {cuda::broadcast_strides({3, 1, 5}, out), cuda::broadcast_strides({2, 1, 4, 1}, out)});
  expect_indexer_matches<2>(out, {cuda::broadcast_strides({}, out), cuda::broadcast_strides(out, out)});
  expect_indexer_matches<1>({7}, {cuda::broadcast_strides({1}, {7})});
}

TEST(CudaIndexer, MergesDimsWhereEveryOperandStaysLinear) {
  const std::vector<int64_t> out = {2, 3, 4, 5};
  const auto same = cuda::make_indexer<2>(out, {cuda::contiguous_strides(out), cuda::contiguous_strides(out)});
  EXPECT_EQ(same.rank, 1);
  EXPECT_EQ(same.dims[0], 120);
  // A [4,5] operand broadcast over [2,3]: two blocks, [6] (stride 0) and [20].
  const auto bias = cuda::make_indexer<2>(out, {cuda::contiguous_strides(out), cuda::broadcast_strides({4, 5}, out)});
  EXPECT_EQ(bias.rank, 2);
  expect_indexer_matches<2>(out, {cuda::contiguous_strides(out), cuda::broadcast_strides({4, 5}, out)});
  // Transposed and negative (reversed) strides.
  expect_indexer_matches<2>({4, 3, 2}, {std::vector<int64_t>{6, 2, 1}, std::vector<int64_t>{1, 8, 4}});
  expect_indexer_matches<2>({5, 3}, {std::vector<int64_t>{3, 1}, std::vector<int64_t>{-3, -1}});
  EXPECT_EQ(cuda::make_indexer<1>({1, 1}, {std::vector<int64_t>{0, 0}}).rank, 0);
}

TEST(CudaIndexer, RandomShapesMatchTheDefinition) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = static_cast<int>(rng() % 6);
    std::vector<int64_t> out, a, b;
    for (int d = 0; d < rank; ++d) {
      out.push_back(1 + static_cast<int64_t>(rng() % 4));
      a.push_back(rng() % 3 == 0 ? 1 : out.back());
      b.push_back(rng() % 3 == 0 ? 1 : out.back());
    }
    a.erase(a.begin(), a.begin() + static_cast<int64_t>(rng() % (a.size() + 1)));
    expect_indexer_matches<2>(out, {cuda::broadcast_strides(a, out), cuda::broadcast_strides(b, out)});
  }
}

// ---- with a device -----------------------------------------------------------------------------

cuda::CudaDevice& device() {
  static std::unique_ptr<Device> d = make_cuda_device();
  return static_cast<cuda::CudaDevice&>(*d);
}

TEST(CudaAllocator, ReturnedBlocksAreReusedWithoutCudaMalloc) {
  SKIP_WITHOUT_DEVICE();
  CachingAllocator& a = device().caching_allocator();
  void* first = nullptr;
  {
    Tensor t = a.allocate(DataType::kFloat32, {1000, 37});
    first = t.raw();
  }
  const auto before = a.stats();
  Tensor again = a.allocate(DataType::kFloat32, {1000, 37});
  EXPECT_EQ(again.raw(), first) << "the freed block of the same class is handed out again";
  EXPECT_EQ(a.stats().device_mallocs, before.device_mallocs);
  EXPECT_EQ(again.device(), DeviceType::kCuda);
}

TEST(CudaAllocator, TracksInUseAndPeak) {
  SKIP_WITHOUT_DEVICE();
  CachingAllocator& a = device().caching_allocator();
  const auto base = a.stats();
  const size_t bytes = CachingAllocator::size_class(size_t{3} << 20);
  {
    Tensor x = a.allocate(DataType::kUInt8, {3 << 20});
    Tensor y = a.allocate(DataType::kUInt8, {3 << 20});
    EXPECT_EQ(a.stats().in_use, base.in_use + 2 * bytes);
    EXPECT_GE(a.stats().peak_in_use, base.in_use + 2 * bytes);
    EXPECT_GE(a.stats().reserved, a.stats().in_use);
    EXPECT_EQ(device().peak_bytes(), a.stats().peak_reserved);
    EXPECT_GE(device().peak_bytes(), a.stats().reserved);
  }
  EXPECT_EQ(a.stats().in_use, base.in_use) << "both blocks went back to the cache";
  EXPECT_GE(a.stats().reserved, 2 * bytes) << "and stay reserved for reuse";
}

TEST(CudaAllocator, RepeatedRunsOfAGraphAllocateNoNewDeviceMemory) {
  SKIP_WITHOUT_DEVICE();
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({64, 128}));
  Value* w = g.add_initializer("w", Tensor(DataType::kFloat32, {128, 32}), false);
  Node* mm = g.add_node("MatMul", {x, w}, {"h"});
  Node* relu = g.add_node("Relu", {mm->output(0)}, {"y"});
  g.add_output(relu->output(0));
  infer_graph(g);
  ExecutorOptions o;
  o.device = &device();
  Executor ex(g, o);
  const std::map<std::string, Tensor> feeds = {{"x", Tensor(DataType::kFloat32, {64, 128})}};
  device().to_host(ex.run(feeds).at("y"));
  const int64_t mallocs = device().caching_allocator().stats().device_mallocs;
  for (int step = 0; step < 5; ++step) device().to_host(ex.run(feeds).at("y"));
  EXPECT_EQ(device().caching_allocator().stats().device_mallocs, mallocs);
}

TEST(CudaDevice, CopiesRoundTripBitExactly) {
  SKIP_WITHOUT_DEVICE();
  std::vector<float> v(1001);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.37f - 11.f;
  const Tensor host = Tensor::from_vector<float>({7, 11, 13}, v);
  const Tensor dev = device().to_device(host);
  EXPECT_EQ(dev.device(), DeviceType::kCuda);
  EXPECT_TRUE(device().to_host(dev).bitwise_equal(host));
  const Tensor empty = device().to_device(Tensor(DataType::kInt64, {0, 3}));
  EXPECT_EQ(device().to_host(empty).dims(), (std::vector<int64_t>{0, 3}));
}

TEST(CudaDevice, OutOfRangeIndexIsReportedNamingTheNode) {
  SKIP_WITHOUT_DEVICE();
  Graph g;
  g.opset_imports[""] = 17;
  Value* data = g.add_input("data", DataType::kFloat32, Shape::of({4, 3}));
  Value* idx = g.add_input("idx", DataType::kInt64, Shape::of({2}));
  Node* n = g.add_node("Gather", {data, idx}, {"y"});
  n->set_name("the_gather");
  g.add_output(n->output(0));
  infer_graph(g);
  ExecutorOptions o;
  o.device = &device();
  Executor ex(g, o);
  const std::map<std::string, Tensor> feeds = {{"data", Tensor(DataType::kFloat32, {4, 3})},
                                               {"idx", Tensor::from_vector<int64_t>({2}, {1, 9})}};
  try {
    device().to_host(ex.run(feeds).at("y"));
    ADD_FAILURE() << "an index of 9 into an axis of 4 was not reported";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the_gather"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index 9"), std::string::npos) << msg;
  }
  // The report is consumed: a good run afterwards succeeds.
  const std::map<std::string, Tensor> good = {{"data", Tensor(DataType::kFloat32, {4, 3})},
                                              {"idx", Tensor::from_vector<int64_t>({2}, {1, -4})}};
  EXPECT_NO_THROW(device().to_host(ex.run(good).at("y")));
}

TEST(CudaDevice, KernelGivenAHostTensorFailsClearly) {
  SKIP_WITHOUT_DEVICE();
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({3}));
  Node* n = g.add_node("Relu", {x}, {"y"});
  infer_graph(g);
  const KernelDef* def = KernelRegistry::instance().find(*n, DeviceType::kCuda);
  ASSERT_NE(def, nullptr);
  auto k = def->create(*n);
  const Tensor host(DataType::kFloat32, {3});
  Tensor out;
  KernelContext ctx(*n, {&host}, {&out}, device().allocator());
  ctx.device = &device();
  try {
    k->run(ctx);
    ADD_FAILURE() << "a host tensor reached a CUDA kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lives on the host"), std::string::npos) << e.what();
  }
}

#endif  // OTTER_HAVE_CUDA

}  // namespace
}  // namespace otter
