// CPU kernels of the detection ops (graph/ops/detect.cc): NonMaxSuppression, RoiAlign and
// MaxUnpool. Unique and ReverseSequence are in kernels/cpu/unique.cc, TfIdfVectorizer in
// kernels/cpu/tfidf.cc. The CUDA backend runs these on host copies of their inputs
// (kernels/cuda/host_ops.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/shape_util.h"

namespace otter {
namespace {

// A box as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
struct Box {
  double y1, x1, y2, x2;
  double area() const { return (y2 - y1) * (x2 - x1); }
};

// center_point_box 0: any two opposite corners [y1, x1, y2, x2]; 1: [x_center, y_center, w, h].
Box read_box(const double* p, bool center) {
  if (center) return {p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
}

double iou(const Box& a, const Box& b) {
  const double h = std::min(a.y2, b.y2) - std::max(a.y1, b.y1), w = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (h <= 0 || w <= 0) return 0;
  const double inter = h * w, uni = a.area() + b.area() - inter;
  return uni > 0 ? inter / uni : 0;
}

// A scalar float input as double, or `dflt` where the input is absent.
double optional_scalar(const KernelContext& ctx, int i, const char* name, double dflt) {
  if (!ctx.has_input(i)) return dflt;
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) ctx.error(str_cat(name, " must hold one value, got ", t.describe()));
  return t.get_as_double(0);
}

class NonMaxSuppressionKernel : public Kernel {
 public:
  explicit NonMaxSuppressionKernel(const Node& n) : center_(n.attr_i("center_point_box", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const Tensor& boxes = ctx.input(0);
    const Tensor& scores = ctx.input(1);
    if (boxes.rank() != 3 || boxes.dims()[2] != 4)
      ctx.error(str_cat("boxes must be [num_batches, spatial_dimension, 4], got ", boxes.describe()));
    if (scores.rank() != 3 || scores.dims()[0] != boxes.dims()[0] || scores.dims()[2] != boxes.dims()[1])
      ctx.error(str_cat("scores must be [num_batches, num_classes, spatial_dimension] = [", boxes.dims()[0],
                        ", C, ", boxes.dims()[1], "] for boxes ", boxes.describe(), ", got ", scores.describe()));
    int64_t max_out = 0;
    if (ctx.has_input(2)) {
      const std::vector<int64_t> m = cpu::int_input(ctx, 2, "max_output_boxes_per_class");
      if (m.size() != 1) ctx.error(str_cat("max_output_boxes_per_class must hold one value, got ", m.size()));
      if (m[0] < 0) ctx.error(str_cat("max_output_boxes_per_class must not be negative, got ", m[0]));
      max_out = m[0];
    }
    const double iou_th = optional_scalar(ctx, 3, "iou_threshold", 0);
    if (!(iou_th >= 0 && iou_th <= 1)) ctx.error(str_cat("iou_threshold must be in [0, 1], got ", iou_th));
    const bool has_score_th = ctx.has_input(4);
    const double score_th = optional_scalar(ctx, 4, "score_threshold", 0);
    const int64_t nb = boxes.dims()[0], n = boxes.dims()[1], nc = scores.dims()[1];
    std::vector<double> bx(static_cast<size_t>(boxes.numel())), sc(static_cast<size_t>(scores.numel()));
    for (int64_t i = 0; i < boxes.numel(); ++i) bx[i] = boxes.get_as_double(i);
    for (int64_t i = 0; i < scores.numel(); ++i) sc[i] = scores.get_as_double(i);
    std::vector<int64_t> selected;  // (batch, class, box) triples
    std::vector<int64_t> order;
    std::vector<Box> kept;
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t c = 0; c < nc; ++c) {
        const double* s = sc.data() + (b * nc + c) * n;
        order.clear();
        for (int64_t i = 0; i < n; ++i)
          if (!has_score_th || s[i] > score_th) order.push_back(i);
        // Highest score first; equal scores keep the lower box index first.
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
        kept.clear();
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          const Box box = read_box(bx.data() + (b * n + i) * 4, center_);
          if (std::any_of(kept.begin(), kept.end(), [&](const Box& k) { return iou(k, box) > iou_th; })) continue;
          kept.push_back(box);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    }
    const int64_t ns = static_cast<int64_t>(selected.size()) / 3;
    Tensor& out = ctx.allocate_output(0, DataType::kInt64, {ns, 3});
    if (ns > 0) std::memcpy(out.raw(), selected.data(), selected.size() * sizeof(int64_t));
  }

 private:
  bool center_;
};

// Bilinear sampling of one plane at (y, x), ONNX RoiAlign's rule: 0 outside [-1, H] x [-1, W],
// coordinates clamped to the plane; `max_mode` returns the largest weighted corner instead of
// their sum (the max mode of ONNX's reference and ONNX Runtime).
double sample(const double* plane, int64_t h, int64_t w, double y, double x, bool max_mode) {
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return 0;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= h - 1) y = static_cast<double>(y0 = y1 = h - 1);
  if (x0 >= w - 1) x = static_cast<double>(x0 = x1 = w - 1);
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0), hy = 1 - ly, hx = 1 - lx;
  const double v[4] = {hy * hx * plane[y0 * w + x0], hy * lx * plane[y0 * w + x1], ly * hx * plane[y1 * w + x0],
                       ly * lx * plane[y1 * w + x1]};
  return max_mode ? std::max(std::max(v[0], v[1]), std::max(v[2], v[3])) : v[0] + v[1] + v[2] + v[3];
}

class RoiAlignKernel : public Kernel {
 public:
  explicit RoiAlignKernel(const Node& n)
      : max_mode_(n.attr_s("mode", "avg") == "max"),
        half_pixel_(n.attr_s("coordinate_transformation_mode", n.opset() >= 16 ? "half_pixel" : "output_half_pixel") ==
                    "half_pixel"),
        oh_(n.attr_i("output_height", 1)),
        ow_(n.attr_i("output_width", 1)),
        ratio_(n.attr_i("sampling_ratio", 0)),
        scale_(n.attr_f("spatial_scale", 1.0f)) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    if (x.rank() != 4) ctx.error(str_cat("X must be [N, C, H, W], got ", x.describe()));
    if (rois.rank() != 2 || rois.dims()[1] != 4) ctx.error(str_cat("rois must be [num_rois, 4], got ", rois.describe()));
    const std::vector<int64_t> bi = cpu::int_input(ctx, 2, "batch_indices");
    const int64_t nr = rois.dims()[0], c = x.dims()[1], h = x.dims()[2], w = x.dims()[3];
    if (static_cast<int64_t>(bi.size()) != nr)
      ctx.error(str_cat("batch_indices has ", bi.size(), " entries for ", nr, " rois ", rois.describe()));
    std::vector<double> xd(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) xd[i] = x.get_as_double(i);
    Tensor& out = ctx.allocate_output(0, x.dtype(), {nr, c, oh_, ow_});
    std::vector<double> res(static_cast<size_t>(out.numel()));
    for (int64_t r = 0; r < nr; ++r) {
      if (bi[r] < 0 || bi[r] >= x.dims()[0])
        ctx.error(str_cat("batch_indices[", r, "] = ", bi[r], " is out of range for X ", x.describe()));
      double box[4];
      for (int k = 0; k < 4; ++k) box[k] = rois.get_as_double(r * 4 + k) * scale_ - (half_pixel_ ? 0.5 : 0.0);
      double rh = box[3] - box[1], rw = box[2] - box[0];
      if (!half_pixel_) rh = std::max(rh, 1.0), rw = std::max(rw, 1.0);
      const double bh = rh / static_cast<double>(oh_), bw = rw / static_cast<double>(ow_);
      const int64_t gh = ratio_ > 0 ? ratio_ : static_cast<int64_t>(std::ceil(bh));
      const int64_t gw = ratio_ > 0 ? ratio_ : static_cast<int64_t>(std::ceil(bw));
      const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
      for (int64_t ch = 0; ch < c; ++ch) {
        const double* plane = xd.data() + (bi[r] * c + ch) * h * w;
        for (int64_t py = 0; py < oh_; ++py)
          for (int64_t px = 0; px < ow_; ++px) {
            double acc = 0;
            for (int64_t iy = 0; iy < gh; ++iy)
              for (int64_t ix = 0; ix < gw; ++ix) {
                const double yy = box[1] + static_cast<double>(py) * bh + (static_cast<double>(iy) + 0.5) * bh / gh;
                const double xx = box[0] + static_cast<double>(px) * bw + (static_cast<double>(ix) + 0.5) * bw / gw;
                const double v = sample(plane, h, w, yy, xx, max_mode_);
                acc = max_mode_ ? ((iy | ix) == 0 ? v : std::max(acc, v)) : acc + v;
              }
            res[((r * c + ch) * oh_ + py) * ow_ + px] = max_mode_ ? acc : acc / count;
          }
      }
    }
    cpu::visit_float(x.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      S* p = out.data<S>();
      for (int64_t i = 0; i < out.numel(); ++i) p[i] = cpu::store<S>(static_cast<cpu::compute_t<S>>(res[i]));
    });
  }

 private:
  bool max_mode_, half_pixel_;
  int64_t oh_, ow_, ratio_;
  double scale_;
};

// MaxUnpool: X's values written at the flat (whole-tensor) indices I of the output, zeros
// elsewhere. The output has output_shape when given, and I indexes it directly (onnxruntime's
// rule, under which MaxUnpool inverts MaxPool on inputs the window does not tile); ONNX's reference
// instead unpools into the inferred shape and zero-pads it at the end (onnx/onnx#2398), which
// test_maxunpool_export_with_output_shape encodes (a known failure).
class MaxUnpoolKernel : public Kernel {
 public:
  explicit MaxUnpoolKernel(const Node& n)
      : kernel_(n.attr_ints("kernel_shape")),
        strides_(n.attr_ints("strides", std::vector<int64_t>(kernel_.size(), 1))),
        pads_(n.attr_ints("pads", std::vector<int64_t>(2 * kernel_.size(), 0))) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    const size_t n = kernel_.size();
    if (x.rank() != static_cast<int64_t>(n) + 2)
      ctx.error(str_cat("X ", x.describe(), " must have rank ", n + 2, " for a kernel_shape of ", n, " axes"));
    if (idx.dims() != x.dims()) ctx.error(str_cat("I ", idx.describe(), " must have X's shape ", x.describe()));
    std::vector<int64_t> od = x.dims();
    if (ctx.has_input(2)) {
      od = cpu::int_input(ctx, 2, "output_shape");
      if (od.size() != n + 2 || od[0] != x.dims()[0] || od[1] != x.dims()[1])
        ctx.error(str_cat("output_shape ", dims_to_string(od), " must be [N, C, ...] of rank ", n + 2, " for X ",
                          x.describe()));
    } else {
      for (size_t i = 0; i < n; ++i)
        od[i + 2] = (x.dims()[i + 2] - 1) * strides_[i] + kernel_[i] - pads_[i] - pads_[i + n];
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), od);
    std::memset(out.raw(), 0, out.nbytes());
    const std::vector<int64_t> ind = idx.to_int64_vector();
    const int64_t total = out.numel();
    const size_t es = dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out.raw());
    for (size_t i = 0; i < ind.size(); ++i) {
      if (ind[i] < 0 || ind[i] >= total)
        ctx.error(str_cat("I holds index ", ind[i], " at element ", i, ", out of range for the output ",
                          dims_to_string(od), " (", total, " elements)"));
      std::memcpy(dst + ind[i] * es, src + i * es, es);
    }
  }

 private:
  std::vector<int64_t> kernel_, strides_, pads_;
};

}  // namespace

void register_cpu_unique_kernels(KernelRegistry& r);  // kernels/cpu/unique.cc
void register_cpu_tfidf_kernels(KernelRegistry& r);   // kernels/cpu/tfidf.cc

// Called by register_cpu_select_kernels (kernels/cpu/select.cc).
void register_cpu_detect_kernels(KernelRegistry& r) {
  cpu::add_any_type(r, "NonMaxSuppression", node_kernel<NonMaxSuppressionKernel>());
  cpu::add_any_type(r, "RoiAlign", node_kernel<RoiAlignKernel>());
  cpu::add_any_type(r, "MaxUnpool", node_kernel<MaxUnpoolKernel>());
  register_cpu_unique_kernels(r);
  register_cpu_tfidf_kernels(r);
}

}  // namespace otter
