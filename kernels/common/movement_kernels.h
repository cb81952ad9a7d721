// Concat, Split and Slice kernels shared by the CPU (kernels/cpu/movement.cc) and CUDA
// (kernels/cuda/shape.cu) backends: the host side (attributes, parameter resolution by
// kernels/common/shape_params.h, output allocation) is here; the backend `B` reads integer inputs
// and moves the bytes:
//   B::ints(ctx, i, what)                                   input i read on the host as int64
//   B::copy_rows(ctx, t, outer, len, dst, dst_row, src, src_row)
//       `outer` rows of `len` elements of dtype t, rows dst_row / src_row elements apart
//   B::copy_view(ctx, t, dst, src, view)                    Slice's strided view into contiguous dst
#pragma once

#include <vector>

#include "kernels/common/shape_params.h"
#include "kernels/kernel.h"

namespace otter::params {

template <typename B>
class ConcatKernelT : public Kernel {
 public:
  explicit ConcatKernelT(const Node& n) : axis_(n.attr_i("axis", 0)) {}
  void run(KernelContext& ctx) override {
    std::vector<int64_t> od;
    const RowBlocks c = resolve_concat(ctx, axis_, &od);
    const DataType t = ctx.input(0).dtype();
    Tensor& out = ctx.allocate_output(0, t, od);
    if (out.numel() == 0) return;
    for (int i = 0; i < ctx.num_inputs(); ++i)
      if (c.lens[i] > 0)
        B::copy_rows(ctx, t, c.outer, c.lens[i], element_at(out, c.cols[i]), c.row, ctx.input(i).raw(), c.lens[i]);
  }

 private:
  int64_t axis_;
};

template <typename B>
class SplitKernelT : public Kernel {
 public:
  explicit SplitKernelT(const Node& n)
      : axis_(n.attr_i("axis", 0)), num_outputs_(n.attr_i("num_outputs", 0)), split_attr_(n.attr_ints("split")) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const RowBlocks s =
        resolve_split(ctx, axis_, ctx.has_input(1) ? B::ints(ctx, 1, "split") : split_attr_, num_outputs_);
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      if (!ctx.has_output(i)) continue;
      Tensor& out = ctx.allocate_output(i, x.dtype(), s.part_dims[i]);
      if (out.numel() > 0)
        B::copy_rows(ctx, x.dtype(), s.outer, s.lens[i], out.raw(), s.lens[i], element_at(x, s.cols[i]), s.row);
    }
  }

 private:
  int64_t axis_, num_outputs_;
  std::vector<int64_t> split_attr_;
};

// Slice(x, starts, ends, axes?, steps?).
template <typename B>
class SliceKernelT : public Kernel {
 public:
  explicit SliceKernelT(const Node&) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const SliceView v = resolve_slice(ctx, x.dims(), B::ints(ctx, 1, "starts"), B::ints(ctx, 2, "ends"),
                                      ctx.has_input(3) ? B::ints(ctx, 3, "axes") : std::vector<int64_t>{},
                                      ctx.has_input(4) ? B::ints(ctx, 4, "steps") : std::vector<int64_t>{});
    Tensor& out = ctx.allocate_output(0, x.dtype(), v.out_dims);
    if (out.numel() > 0) B::copy_view(ctx, x.dtype(), out.raw(), element_at(x, v.offset), v);
  }
};

}  // namespace otter::params
