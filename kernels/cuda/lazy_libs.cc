// cuBLASLt, cuDNN and NCCL, opened on first use. The CUDA backend calls these libraries through the
// functions below, which have the libraries' own names and signatures: the first call of any of
// them dlopen()s the library and looks the function up, so a process that never runs a CUDA kernel
// (every CPU run) maps none of them, and NCCL is mapped only by a data-parallel CUDA run
// (docs/performance.md, "Start-up"). The CUDA runtime itself is linked statically and loads the
// driver only on its first call. A function the backend starts to use must get one OTTER_LAZY line
// here (the link fails naming it otherwise).
#include <cublasLt.h>
#include <cudnn.h>
#include <dlfcn.h>
#ifdef OTTER_HAVE_NCCL
#include <nccl.h>
#endif

#include <mutex>
#include <string>

#include "graph/error.h"

namespace otter::cuda {
namespace {

struct LazyLib {
  const char *soname;    // found on the loader's search path (LD_LIBRARY_PATH, ld.so.cache)
  const char *fallback;  // the file the build linked against
  void *handle = nullptr;
  std::once_flag once;
};

LazyLib kCublasLt{OTTER_CUBLASLT_SONAME, OTTER_CUBLASLT_PATH};
LazyLib kCudnn{OTTER_CUDNN_SONAME, OTTER_CUDNN_PATH};
#ifdef OTTER_HAVE_NCCL
LazyLib kNccl{OTTER_NCCL_SONAME, OTTER_NCCL_PATH};  // kernels/cuda/nccl.cc, data parallelism on CUDA
#endif

void *lazy_symbol(LazyLib &lib, const char *name) {
  std::call_once(lib.once, [&] {
    lib.handle = dlopen(lib.soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib.handle) lib.handle = dlopen(lib.fallback, RTLD_NOW | RTLD_LOCAL);
  });
  if (!lib.handle) fail("CUDA backend: cannot load ", lib.soname, " (nor ", lib.fallback, "): ", dlerror());
  void *f = dlsym(lib.handle, name);
  if (!f) fail("CUDA backend: ", lib.soname, " has no function ", name, ": ", dlerror());
  return f;
}

}  // namespace
}  // namespace otter::cuda

// Defines `name` with the library's signature; the first call resolves the real function.
#define OTTER_LAZY(lib, ret, name, params, args)                                                  \
  extern "C" ret name params {                                                                    \
    using Fn = ret(*) params;                                                                     \
    static const Fn fn = reinterpret_cast<Fn>(otter::cuda::lazy_symbol(otter::cuda::lib, #name)); \
    return fn args;                                                                               \
  }

OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * lightHandle), (lightHandle))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t lightHandle), (lightHandle))
OTTER_LAZY(kCublasLt, const char *, cublasLtGetStatusString, (cublasStatus_t status), (status))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatmul,
           (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha, const void *A,
            cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
            cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
            void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream),
           (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
            workspaceSizeInBytes, stream))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
           (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
            cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
            cublasLtMatmulPreference_t preference, int requestedAlgoCount,
            cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount),
           (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
            heuristicResultsArray, returnAlgoCount))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatmulDescCreate,
           (cublasLtMatmulDesc_t * matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType),
           (matmulDesc, computeType, scaleType))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
           (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void *buf, size_t sizeInBytes),
           (matmulDesc, attr, buf, sizeInBytes))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
           (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
            size_t sizeInBytes),
           (pref, attr, buf, sizeInBytes))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatrixLayoutCreate,
           (cublasLtMatrixLayout_t * matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
           (matLayout, type, rows, cols, ld))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout), (matLayout))
OTTER_LAZY(kCublasLt, cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
           (cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr, const void *buf,
            size_t sizeInBytes),
           (matLayout, attr, buf, sizeInBytes))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnAddTensor,
           (cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t aDesc, const void *A,
            const void *beta, const cudnnTensorDescriptor_t cDesc, void *C),
           (handle, alpha, aDesc, A, beta, cDesc, C))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnConvolutionBackwardData,
           (cudnnHandle_t handle, const void *alpha, const cudnnFilterDescriptor_t wDesc, const void *w,
            const cudnnTensorDescriptor_t dyDesc, const void *dy, const cudnnConvolutionDescriptor_t convDesc,
            cudnnConvolutionBwdDataAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
            const cudnnTensorDescriptor_t dxDesc, void *dx),
           (handle, alpha, wDesc, w, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, dxDesc, dx))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnConvolutionBackwardFilter,
           (cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc, const void *x,
            const cudnnTensorDescriptor_t dyDesc, const void *dy, const cudnnConvolutionDescriptor_t convDesc,
            cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
            const cudnnFilterDescriptor_t dwDesc, void *dw),
           (handle, alpha, xDesc, x, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, dwDesc, dw))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnConvolutionForward,
           (cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc, const void *x,
            const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
            cudnnConvolutionFwdAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
            const cudnnTensorDescriptor_t yDesc, void *y),
           (handle, alpha, xDesc, x, wDesc, w, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, yDesc, y))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnCreate, (cudnnHandle_t * handle), (handle))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t * convDesc),
           (convDesc))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t * filterDesc), (filterDesc))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t * tensorDesc), (tensorDesc))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle), (handle))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t convDesc),
           (convDesc))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t filterDesc), (filterDesc))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t tensorDesc), (tensorDesc))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataAlgorithm_v7,
           (cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc, const cudnnTensorDescriptor_t diffDesc,
            const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t gradDesc,
            const int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults),
           (handle, filterDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterAlgorithm_v7,
           (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnTensorDescriptor_t diffDesc,
            const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
            const int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults),
           (handle, srcDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnGetConvolutionForwardAlgorithm_v7,
           (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnFilterDescriptor_t filterDesc,
            const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t destDesc,
            const int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults),
           (handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnGetConvolutionNdForwardOutputDim,
           (const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t inputTensorDesc,
            const cudnnFilterDescriptor_t filterDesc, int nbDims, int tensorOuputDimA[]),
           (convDesc, inputTensorDesc, filterDesc, nbDims, tensorOuputDimA))
OTTER_LAZY(kCudnn, const char *, cudnnGetErrorString, (cudnnStatus_t status), (status))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnSetConvolutionGroupCount,
           (cudnnConvolutionDescriptor_t convDesc, int groupCount), (convDesc, groupCount))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnSetConvolutionMathType,
           (cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType), (convDesc, mathType))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnSetConvolutionNdDescriptor,
           (cudnnConvolutionDescriptor_t convDesc, int arrayLength, const int padA[], const int filterStrideA[],
            const int dilationA[], cudnnConvolutionMode_t mode, cudnnDataType_t computeType),
           (convDesc, arrayLength, padA, filterStrideA, dilationA, mode, computeType))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnSetFilterNdDescriptor,
           (cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType, cudnnTensorFormat_t format, int nbDims,
            const int filterDimA[]),
           (filterDesc, dataType, format, nbDims, filterDimA))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnSetStream, (cudnnHandle_t handle, cudaStream_t streamId), (handle, streamId))
OTTER_LAZY(kCudnn, cudnnStatus_t, cudnnSetTensorNdDescriptor,
           (cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType, int nbDims, const int dimA[],
            const int strideA[]),
           (tensorDesc, dataType, nbDims, dimA, strideA))
#ifdef OTTER_HAVE_NCCL
OTTER_LAZY(kNccl, ncclResult_t, ncclAllGather,
           (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
            cudaStream_t stream),
           (sendbuff, recvbuff, sendcount, datatype, comm, stream))
OTTER_LAZY(kNccl, ncclResult_t, ncclAllReduce,
           (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
            ncclComm_t comm, cudaStream_t stream),
           (sendbuff, recvbuff, count, datatype, op, comm, stream))
OTTER_LAZY(kNccl, ncclResult_t, ncclBroadcast,
           (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
            cudaStream_t stream),
           (sendbuff, recvbuff, count, datatype, root, comm, stream))
OTTER_LAZY(kNccl, ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
OTTER_LAZY(kNccl, ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
OTTER_LAZY(kNccl, ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError), (comm, asyncError))
OTTER_LAZY(kNccl, ncclResult_t, ncclCommInitRankConfig,
           (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config),
           (comm, nranks, commId, rank, config))
OTTER_LAZY(kNccl, const char *, ncclGetErrorString, (ncclResult_t result), (result))
OTTER_LAZY(kNccl, ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId), (uniqueId))
OTTER_LAZY(kNccl, ncclResult_t, ncclGroupEnd, (), ())
OTTER_LAZY(kNccl, ncclResult_t, ncclGroupStart, (), ())
OTTER_LAZY(kNccl, ncclResult_t, ncclReduceScatter,
           (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
            ncclComm_t comm, cudaStream_t stream),
           (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))
#endif
