// Checked calls into the CUDA runtime, cuBLASLt and cuDNN: a failure throws otter::Error naming the
// call, the library's message, the source line and the node whose kernel was running.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "graph/ir.h"

namespace otter::cuda {

// The node whose CUDA kernel runs on this thread (null outside kernels); set by NodeScope.
const Node* current_node();

class NodeScope {
 public:
  explicit NodeScope(const Node* n);
  ~NodeScope();
  NodeScope(const NodeScope&) = delete;
  NodeScope& operator=(const NodeScope&) = delete;

 private:
  const Node* prev_;
};

// "Conv 'conv1': " inside a kernel, "CUDA device: " outside.
std::string where();

[[noreturn]] void fail_call(const char* call, const std::string& why, const char* file, int line);

}  // namespace otter::cuda

#define OTTER_CUDA_CHECK(call)                                                                        \
  do {                                                                                                \
    const cudaError_t otter_err_ = (call);                                                            \
    if (otter_err_ != cudaSuccess) {                                                                  \
      (void)cudaGetLastError(); /* reset the (non-sticky) last error */                             \
      ::otter::cuda::fail_call(#call, cudaGetErrorString(otter_err_), __FILE__, __LINE__);            \
    }                                                                                                 \
  } while (0)

#define OTTER_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                                \
    const cublasStatus_t otter_st_ = (call);                                                          \
    if (otter_st_ != CUBLAS_STATUS_SUCCESS)                                                           \
      ::otter::cuda::fail_call(#call, cublasLtGetStatusString(otter_st_), __FILE__, __LINE__);        \
  } while (0)

#define OTTER_CUDNN_CHECK(call)                                                                       \
  do {                                                                                                \
    const cudnnStatus_t otter_st_ = (call);                                                           \
    if (otter_st_ != CUDNN_STATUS_SUCCESS)                                                            \
      ::otter::cuda::fail_call(#call, cudnnGetErrorString(otter_st_), __FILE__, __LINE__);            \
  } while (0)

// After a kernel launch: reports launch failures (bad configuration, no kernel image for the GPU).
#define OTTER_CUDA_LAUNCH_CHECK() OTTER_CUDA_CHECK(cudaGetLastError())
