// The libraries kernels/cuda/lazy_libs.cc opens on first use: this process maps NCCL only once it
// calls an NCCL function (ncclGetErrorString needs no GPU, so this runs on any machine where the
// build found NCCL). The executables' NEEDED lists are checked by tests/tools/lazy_cuda_libs.sh.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#ifdef OTTER_HAVE_NCCL
#include <nccl.h>
#endif

namespace otter {
namespace {

// Whether a file whose name contains `name` is mapped into this process.
[[maybe_unused]] bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(name) != std::string::npos) return true;
  return false;
}

TEST(LazyLibs, NcclIsMappedAtItsFirstCallOnly) {
#ifndef OTTER_HAVE_NCCL
  GTEST_SKIP() << "this build has no NCCL (it needs CUDA, MPI and nccl.h: CMakeLists.txt, OTTER_HAVE_NCCL)";
#else
  ASSERT_TRUE(std::ifstream("/proc/self/maps").good()) << "no /proc/self/maps";
  EXPECT_FALSE(mapped("libnccl")) << "NCCL is mapped before any NCCL call";
  const std::string message = ncclGetErrorString(ncclInvalidArgument);
  EXPECT_NE(message.find("invalid argument"), std::string::npos) << message;
  EXPECT_TRUE(mapped("libnccl")) << "the first NCCL call did not open the library";
#endif
}

}  // namespace
}  // namespace otter
