// Op-table row of Einsum (opset 12+): inference of the output shape from the equation (explicit or
// implicit output, ellipsis broadcasting, repeated letters on one operand for diagonals, summed
// letters) and the gradient rule: the gradient of each operand is an Einsum of dY with the other
// operands, expanded over the letters only that operand has. Kernel: kernels/cpu/einsum.cc.
#include "graph/gradient.h"
#include "graph/op_table.h"
#include "graph/ops/einsum_equation.h"
#include "graph/ops/infer_util.h"

namespace otter {
namespace {

// The node's equation, parsed; fails naming the equation where it is malformed.
einsum::Equation equation_of(const Node& n, size_t operands, const std::function<void(const std::string&)>& error) {
  if (!n.has_attr("equation")) error("the required attribute 'equation' is missing");
  const std::string text = n.attr_s("equation", "");
  einsum::Equation e;
  const std::string err = einsum::parse(text, operands, &e);
  if (!err.empty()) error(str_cat("equation '", text, "': ", err));
  return e;
}

char letter_of(int index) { return static_cast<char>(index < 26 ? 'A' + index : 'a' + (index - 26)); }

void infer_einsum(InferContext& ctx) {
  const int n = ctx.num_inputs();
  if (n < 1) ctx.error("Einsum needs at least one operand");
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) ctx.error(str_cat("input ", i, " is missing"));
    infer::check_type(ctx, i, infer::Types::kNumeric);
    infer::check_same_type(ctx, 0, i);
  }
  auto err = [&](const std::string& m) { ctx.error(m); };
  const einsum::Equation e = equation_of(ctx.node(), n, err);
  std::vector<int64_t> ranks;
  for (int i = 0; i < n; ++i) {
    if (!ctx.in_shape(i).rank_known) {
      ctx.set_output(0, ctx.in_dtype(0), Shape::unknown());
      return;
    }
    ranks.push_back(ctx.in_shape(i).rank());
  }
  einsum::Axes axes;
  const std::string bad = einsum::expand(e, ranks, &axes);
  if (!bad.empty()) ctx.error(str_cat("equation '", ctx.node().attr_s("equation", ""), "': ", bad));
  // Ellipsis dims broadcast; a letter's dims must agree.
  const int E = axes.ellipsis_rank;
  std::vector<Shape> ell;
  std::vector<Dim> size(axes.num_labels(), Dim(int64_t{-2}));  // -2: not seen yet
  for (int i = 0; i < n; ++i) {
    std::vector<Dim> ed;
    for (size_t a = 0; a < axes.operands[i].size(); ++a) {
      const int l = axes.operands[i][a];
      const Dim& d = ctx.in_shape(i).dims[a];
      if (l < E) {
        ed.push_back(d);
        continue;
      }
      if (size[l].value == -2) {
        size[l] = d;
        continue;
      }
      infer::check_dims_match(ctx, size[l], d,
                              str_cat("letter '", letter_of(l - E), "' of equation '",
                                      ctx.node().attr_s("equation", ""), "' has two sizes"));
      if (!size[l].is_static() && d.is_static()) size[l] = d;  // a static size over a symbol
    }
    ell.push_back(Shape(ed));
  }
  const Shape eb = broadcast_shapes(ctx, ell);
  for (int l = 0; l < E; ++l) size[l] = eb.dims[l];
  std::vector<Dim> out;
  for (int l : axes.output) out.push_back(size[l]);
  ctx.set_output(0, ctx.in_dtype(0), Shape(out));
}

// Why Einsum's gradient rule cannot handle the equation, or "" (repeated letters on one operand
// take diagonals; ellipsis dims that broadcast or are summed would need unbroadcasting).
std::string unsupported_gradient(const einsum::Equation& e, GradContext& c) {
  for (const einsum::Term& t : e.inputs)
    for (size_t i = 0; i < t.letters.size(); ++i)
      if (t.letters.find(t.letters[i], i + 1) != std::string::npos)
        return str_cat("term '", t.text(), "' repeats letter '", t.letters[i], "' (a diagonal)");
  const Shape& ys = c.output(0)->shape();
  for (size_t k = 0; k < e.inputs.size(); ++k) {
    const einsum::Term& t = e.inputs[k];
    if (!t.has_ellipsis()) continue;
    if (!e.output.has_ellipsis()) return str_cat("term '", t.text(), "' sums its ellipsis dims");
    const Shape& xs = c.input(static_cast<int>(k))->shape();
    const int64_t er = xs.rank() - static_cast<int64_t>(t.letters.size());
    const int64_t oe = ys.rank() - static_cast<int64_t>(e.output.letters.size());
    bool same = xs.is_static() && ys.is_static() && er == oe;
    for (int64_t j = 0; same && j < er; ++j)
      same = xs.dims[t.ellipsis + j].value == ys.dims[e.output.ellipsis + j].value;
    if (!same) return str_cat("operand ", k, "'s ellipsis dims are not statically those of the output");
  }
  return "";
}

// dX_k = Einsum("<out>,<other terms>-><term_k less its own letters>", dY, others...), with the letters
// only X_k has (summed in the forward pass) put back by Unsqueeze and Expand.
void grad_einsum(GradContext& c) {
  const int n = c.node().num_inputs();
  const einsum::Equation e =
      equation_of(c.node(), n, [&](const std::string& m) { fail(c.node().describe(), ": ", m); });
  const std::string why = unsupported_gradient(e, c);
  if (!why.empty()) fail(c.node().describe(), ": no gradient for this equation: ", why);
  for (int k = 0; k < n; ++k) {
    if (!c.needs_grad(k)) continue;
    std::string lhs = e.output.text();
    std::vector<Value*> ins = {c.grad_output(0)};
    std::string seen = e.output.letters;
    for (int j = 0; j < n; ++j) {
      if (j == k) continue;
      lhs += ',';
      lhs += e.inputs[j].text();
      ins.push_back(c.input(j));
      seen += e.inputs[j].letters;
    }
    const einsum::Term& t = e.inputs[k];
    einsum::Term kept;
    kept.ellipsis = -1;
    std::vector<int64_t> dropped;  // axes of X_k whose letter is nowhere else
    const int64_t er = t.has_ellipsis() ? c.rank_of(c.input(k)) - static_cast<int64_t>(t.letters.size()) : 0;
    for (size_t i = 0; i < t.letters.size(); ++i) {
      if (static_cast<int>(i) == t.ellipsis) kept.ellipsis = static_cast<int>(kept.letters.size());
      const int64_t axis = static_cast<int64_t>(i) + (t.has_ellipsis() && static_cast<int>(i) >= t.ellipsis ? er : 0);
      if (seen.find(t.letters[i]) == std::string::npos) dropped.push_back(axis);
      else kept.letters += t.letters[i];
    }
    if (t.ellipsis == static_cast<int>(t.letters.size())) kept.ellipsis = static_cast<int>(kept.letters.size());
    Value* g = c.emit("Einsum", ins, {{"equation", Attribute(lhs + "->" + kept.text())}});
    if (!dropped.empty()) g = c.expand_like(c.emit("Unsqueeze", {g, c.ints(dropped)}), c.input(k));
    c.set_grad_input(k, g);
  }
}

}  // namespace

void register_einsum_ops(OpTable& t) {
  t.add({.domain = "",
         .op_type = "Einsum",
         .since_version = 12,
         .until_version = kMaxOnnxOpset,
         .infer = infer_einsum,
         .precision = PrecisionClass::kLow,
         .grad_kind = GradKind::kRule,
         .grad = grad_einsum,
         .summary = "Einstein summation over the operands by the equation (diagonals, ellipsis, implicit output)"});
}

}  // namespace otter
