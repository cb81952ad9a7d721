// lora pass (see lora.h): adapter initializers, the adapter branches, freezing, merging.
#include "passes/lora.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

#include "graph/error.h"
#include "graph/op_table.h"
#include "passes/autodiff.h"

namespace otter {

const OptionTable<LoraOptions>& LoraOptions::table() {
  using S = LoraOptions;
  static const OptionTable<S> t{
      option("rank", &S::rank, "adapter rank r").at_least(1).always(),
      option("alpha", &S::alpha, "the adapter's output is scaled by alpha/r").above(0).always(),
      option("targets", &S::targets, "name globs of the MatMul/Gemm weights to adapt (';'-separated; required)")
          .always(),
      option("dropout", &S::dropout, "Dropout ratio on the adapter's input").at_least(0).below(1),
      option("seed", &S::seed, "seed of A's Kaiming-uniform initialisation"),
  };
  return t;
}

namespace {

constexpr const char* kSuffixA = ".lora_A";
constexpr const char* kSuffixB = ".lora_B";
constexpr const char* kFactsWeights = "otter.lora.weights";
constexpr const char* kFactsScale = "otter.lora.scale";

bool is_op(const Node* n, const char* op) { return n->domain().empty() && n->op_type() == op; }

// A Transpose that swaps the two axes of a 2-D value.
bool is_2d_swap(const Node* n) {
  if (!is_op(n, "Transpose")) return false;
  std::vector<int64_t> perm = n->attr_ints("perm", {1, 0});
  return perm == std::vector<int64_t>{1, 0};
}

// The MatMul/Gemm nodes that multiply by `w` (directly, or MatMul through a 2-D Transpose), each
// with the layout it reads w in; "" or the first reader that is none of these in `why_not`.
std::vector<std::pair<Node*, bool>> weight_readers(const Value& w, std::string* why_not) {
  std::vector<std::pair<Node*, bool>> out;  // (node, w read as [in, out])
  auto refuse = [&](const Node* n, int idx) {
    *why_not = str_cat("it is read by ", n->describe(), " (input ", idx, "), not as a MatMul/Gemm weight");
    return std::vector<std::pair<Node*, bool>>{};
  };
  why_not->clear();
  if (w.kind() != ValueKind::kInitializer || !is_float(w.dtype()) || !w.shape().rank_known || w.shape().rank() != 2)
    return *why_not = str_cat("it is ", w.type_string(), ", not a 2-D float initializer"), out;
  if (w.uses().empty()) return *why_not = "no node reads it", out;
  for (auto [user, idx] : w.uses()) {
    if (is_op(user, "Gemm") && idx == 1) {
      out.emplace_back(user, user->attr_i("transB", 0) == 0);
    } else if (is_op(user, "MatMul") && idx == 1) {
      out.emplace_back(user, true);
    } else if (is_2d_swap(user) && !user->output(0)->uses().empty() && !user->output(0)->is_graph_output()) {
      for (auto [mm, j] : user->output(0)->uses()) {
        if (!is_op(mm, "MatMul") || j != 1) return refuse(mm, j);
        out.emplace_back(mm, false);
      }
    } else {
      return refuse(user, idx);
    }
  }
  for (const auto& [n, in_out] : out)
    if (in_out != out[0].second)
      return *why_not = str_cat("its readers disagree on its layout ([in, out] for one, [out, in] for another)"),
             std::vector<std::pair<Node*, bool>>{};
  return out;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Adds the adapter branches to one graph; shared constants are made once.
class LoraRewriter {
 public:
  LoraRewriter(Graph& g, const LoraOptions& o) : g_(g), o_(o) {}

  // Adds (or takes over) W.lora_A and W.lora_B and a branch at every reader of W.
  LoraAdapter adapt(Value* w, const std::vector<std::pair<Node*, bool>>& readers) {
    LoraAdapter ad;
    ad.weight = w->name();
    const std::vector<int64_t> d = w->shape().static_dims();
    ad.layout.in_out = readers[0].second;
    ad.layout.in = ad.layout.in_out ? d[0] : d[1];
    ad.layout.out = ad.layout.in_out ? d[1] : d[0];
    OTTER_CHECK(o_.rank <= std::min(ad.layout.in, ad.layout.out), "lora: rank ", o_.rank, " is larger than weight '",
                w->name(), "' allows (", ad.layout.in, " in, ", ad.layout.out, " out features: at most ",
                std::min(ad.layout.in, ad.layout.out), ")");
    Value* a = adapter(w->name() + kSuffixA, {o_.rank, ad.layout.in}, w, true);
    Value* b = adapter(w->name() + kSuffixB, {ad.layout.out, o_.rank}, w, false);
    ad.a = a->name();
    ad.b = b->name();
    for (const auto& [mm, in_out] : readers) branch(mm, a, b);
    return ad;
  }

  int64_t branches() const { return branches_; }

 private:
  // The adapter initializer `name`: a given one (checked) or a new one (A seeded, B zero).
  Value* adapter(const std::string& name, std::vector<int64_t> dims, const Value* w, bool is_a) {
    Value* v = g_.find_value(name);
    if (v) {
      OTTER_CHECK(v->kind() == ValueKind::kInitializer && v->dtype() == w->dtype() && v->shape() == Shape::of(dims),
                  "lora: '", name, "' exists as ", v->type_string(), "; the adapter of '", w->name(), "' at rank ",
                  o_.rank, " must be ", dtype_name(w->dtype()), Shape::of(dims).to_string());
      v->set_trainable(true);
      return v;
    }
    Tensor t = is_a ? lora_init_a(w->name(), o_.rank, dims[1], w->dtype(), o_.seed) : Tensor(w->dtype(), dims);
    if (!is_a) std::fill_n(static_cast<char*>(t.raw()), t.nbytes(), 0);
    return g_.add_initializer(name, std::move(t), /*trainable=*/true);
  }

  Value* constant(Value*& slot, const std::string& base, Tensor t) {
    if (!slot) slot = g_.add_initializer(g_.unique_name(base), std::move(t), /*trainable=*/false);
    return slot;
  }

  Node* node(const std::string& op, const std::vector<Value*>& ins, const std::string& out) {
    Node* n = g_.add_node(op, ins, {g_.unique_name(out)}, "", before_);
    return n;
  }

  Value* finish(Node* n) {
    infer_node(*n);
    return n->output(0);
  }

  // y = mm(x, W) becomes y = mm(x, W) + scale * x A^T B^T, placed right after mm.
  void branch(Node* mm, Value* a, Value* b) {
    Value* y = mm->output(0);
    const std::string name = y->name();
    std::vector<Node*> order = g_.node_list();
    auto it = std::find(order.begin(), order.end(), mm);
    before_ = it + 1 == order.end() ? nullptr : *(it + 1);
    const std::vector<std::pair<Node*, int>> uses = y->uses();
    g_.rename_value(y, g_.unique_name(name + ".base"));
    Value* x = mm->input(0);
    const DataType t = a->dtype();
    if (o_.dropout > 0) {
      Value* ratio = constant(ratio_, "lora.dropout_ratio", Tensor::scalar<float>(static_cast<float>(o_.dropout)));
      Tensor on(DataType::kBool, {});
      *static_cast<uint8_t*>(on.raw()) = 1;
      Value* train = constant(train_, "lora.training_mode", on);
      // The mask output is what DropoutGrad reads.
      Node* drop =
          g_.add_node("Dropout", {x, ratio, train},
                      {g_.unique_name(name + ".lora_drop"), g_.unique_name(name + ".lora_drop_mask")}, "", before_);
      x = finish(drop);
    }
    Value* u = nullptr;
    if (is_op(mm, "Gemm")) {
      Node* xa = node("Gemm", {x, a}, name + ".lora_xa");
      if (mm->attr_i("transA", 0)) xa->set_attr("transA", Attribute(int64_t{1}));
      xa->set_attr("transB", Attribute(int64_t{1}));
      Node* xab = node("Gemm", {finish(xa), b}, name + ".lora");
      xab->set_attr("transB", Attribute(int64_t{1}));
      xab->set_attr("alpha", Attribute(static_cast<float>(mm->attr_f("alpha", 1.f) * o_.scale())));
      u = finish(xab);
    } else {
      Node* at = node("Transpose", {a}, a->name() + ".t");
      Node* bt = node("Transpose", {b}, b->name() + ".t");
      at->set_attr("perm", Attribute(std::vector<int64_t>{1, 0}));
      bt->set_attr("perm", Attribute(std::vector<int64_t>{1, 0}));
      Value* xa = finish(node("MatMul", {x, finish(at)}, name + ".lora_xa"));
      Tensor s = convert_scalar(o_.scale(), t);
      Value* scaled = finish(node("Mul", {xa, constant(scale_[t], "lora.scale", s)}, name + ".lora_xa_scaled"));
      u = finish(node("MatMul", {scaled, finish(bt)}, name + ".lora"));
    }
    Node* sum = g_.add_node("Add", {y, u}, {name}, "", before_);
    infer_node(*sum);
    Value* out = sum->output(0);
    for (auto [user, idx] : uses) user->set_input(idx, out);
    std::vector<Value*> outs = g_.outputs();
    std::replace(outs.begin(), outs.end(), y, out);
    g_.set_outputs(outs);
    ++branches_;
  }

  static Tensor convert_scalar(double v, DataType t) {
    if (t == DataType::kFloat64) return Tensor::scalar<double>(v);
    OTTER_CHECK(t == DataType::kFloat32, "lora: weights must be float32 or float64 (run lora before mixed-precision)");
    return Tensor::scalar<float>(static_cast<float>(v));
  }

  Graph& g_;
  const LoraOptions& o_;
  Node* before_ = nullptr;
  Value* ratio_ = nullptr;
  Value* train_ = nullptr;
  std::map<DataType, Value*> scale_;
  int64_t branches_ = 0;
};

void check_options(const LoraOptions& o) {
  OTTER_CHECK(o.rank >= 1, "lora: rank must be >= 1, got ", o.rank);
  OTTER_CHECK(o.alpha > 0 && std::isfinite(o.alpha), "lora: alpha must be positive, got ", o.alpha);
  OTTER_CHECK(o.dropout >= 0 && o.dropout < 1, "lora: dropout must be in [0, 1), got ", o.dropout);
  OTTER_CHECK(!o.targets.empty(),
              "lora: no targets: give name globs of the MatMul/Gemm weights to adapt (targets=*q*;*v*)");
}

// The weights the globs select, in initializer order, with their readers. Fails for a glob that
// matches no initializer, or only initializers that are not MatMul/Gemm weights.
std::vector<std::pair<Value*, std::vector<std::pair<Node*, bool>>>> select_targets(Graph& g, const LoraOptions& o,
                                                                                   int64_t* skipped) {
  std::vector<std::pair<Value*, std::vector<std::pair<Node*, bool>>>> out;
  std::map<std::string, std::string> refused;  // first refusal per glob
  std::set<std::string> matched_any, matched_weight;
  for (Value* v : g.initializers()) {
    if (is_lora_adapter_name(v->name())) continue;
    bool match = false;
    for (const std::string& p : o.targets)
      if (glob_match(p, v->name())) {
        match = true;
        matched_any.insert(p);
      }
    if (!match) continue;
    std::string why;
    auto readers = weight_readers(*v, &why);
    for (const std::string& p : o.targets) {
      if (!glob_match(p, v->name())) continue;
      if (why.empty())
        matched_weight.insert(p);
      else
        refused.emplace(p, str_cat("'", v->name(), "': ", why));
    }
    if (!why.empty()) {
      ++*skipped;
      continue;
    }
    out.emplace_back(v, std::move(readers));
  }
  for (const std::string& p : o.targets) {
    OTTER_CHECK(matched_any.count(p), "lora: target '", p, "' matches no initializer of the model");
    OTTER_CHECK(matched_weight.count(p), "lora: target '", p, "' matches no MatMul/Gemm weight (", refused[p], ")");
  }
  return out;
}

}  // namespace

LoraOptions parse_lora_spec(const std::string& spec, const std::string& flag) {
  LoraOptions o;
  std::string item;
  for (char c : spec + ",") {
    if (c != ',') {
      item += c;
      continue;
    }
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    OTTER_CHECK(eq != std::string::npos && eq > 0, flag, ": expected KEY=VALUE, got '", item, "'");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    char* end = nullptr;
    const double num = std::strtod(v.c_str(), &end);
    const bool is_num = !v.empty() && *end == 0 && std::isfinite(num);
    if (k == "rank") {
      OTTER_CHECK(is_num && num >= 1 && num == std::floor(num), flag, ": rank must be a positive integer, got '", v,
                  "'");
      o.rank = static_cast<int64_t>(num);
    } else if (k == "alpha") {
      OTTER_CHECK(is_num && num > 0, flag, ": alpha must be a positive number, got '", v, "'");
      o.alpha = num;
    } else if (k == "dropout") {
      OTTER_CHECK(is_num && num >= 0 && num < 1, flag, ": dropout must be in [0, 1), got '", v, "'");
      o.dropout = num;
    } else if (k == "targets") {
      const std::string err = option_codec::parse(v, o.targets);
      OTTER_CHECK(err.empty(), flag, ": targets ", err, ", got '", v, "'");
    } else {
      fail(flag, ": unknown key '", k, "' (keys: rank, alpha, targets, dropout)");
    }
    item.clear();
  }
  OTTER_CHECK(!o.targets.empty(), flag, ": targets=GLOB[;GLOB] is required (the MatMul/Gemm weights to adapt)");
  return o;
}

bool is_lora_adapter_name(const std::string& name, std::string* weight) {
  for (const char* suffix : {kSuffixA, kSuffixB}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      if (weight) *weight = name.substr(0, name.size() - s.size());
      return true;
    }
  }
  return false;
}

LoraLayout lora_layout(const Value& w, std::string* why_not) {
  LoraLayout l;
  auto readers = weight_readers(w, why_not);
  if (readers.empty()) return l;
  const std::vector<int64_t> d = w.shape().static_dims();
  l.in_out = readers[0].second;
  l.in = l.in_out ? d[0] : d[1];
  l.out = l.in_out ? d[1] : d[0];
  return l;
}

Tensor lora_init_a(const std::string& weight, int64_t rank, int64_t in, DataType t, int64_t seed) {
  // Kaiming-uniform with a = sqrt(5): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / in) = 1 / sqrt(in).
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  std::mt19937_64 gen(fnv1a(weight) ^ (static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull));
  Tensor a(t, {rank, in});
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;  // [0, 1), the same on every platform
    const double v = (2 * u - 1) * bound;
    if (t == DataType::kFloat64)
      a.data<double>()[i] = v;
    else
      a.data<float>()[i] = static_cast<float>(v);
  }
  return a;
}

LoraResult add_lora(Graph& g, const LoraOptions& o) {
  check_options(o);
  OTTER_CHECK(g.gradients.empty() && !g.loss_seed,
              "lora: the graph already has a backward graph; run lora before autodiff");
  LoraResult r;
  auto targets = select_targets(g, o, &r.skipped);
  LoraRewriter rw(g, o);
  std::set<std::string> adapters;
  for (auto& [w, readers] : targets) {
    OTTER_CHECK(w->trainable(), "lora: target '", w->name(), "' is a constant of the model, not a parameter");
    r.adapters.push_back(rw.adapt(w, readers));
    adapters.insert(r.adapters.back().a);
    adapters.insert(r.adapters.back().b);
    r.adapter_params += o.rank * (r.adapters.back().layout.in + r.adapters.back().layout.out);
  }
  r.branches = rw.branches();
  std::string weights;
  for (const LoraAdapter& ad : r.adapters) weights += (weights.empty() ? "" : ",") + ad.weight;
  char scale[32];
  std::snprintf(scale, sizeof scale, "%.17g", o.scale());
  g.metadata[kFactsWeights] = weights;
  g.metadata[kFactsScale] = scale;
  for (Value* v : g.initializers())
    if (v->trainable() && !adapters.count(v->name())) {
      v->set_trainable(false);
      ++r.frozen;
    }
  return r;
}

LoraFacts lora_facts(const Graph& g) {
  LoraFacts f;
  auto w = g.metadata.find(kFactsWeights);
  auto s = g.metadata.find(kFactsScale);
  if (w == g.metadata.end() || s == g.metadata.end()) return f;
  std::string cur;
  for (char c : w->second + ",") {
    if (c != ',') {
      cur += c;
      continue;
    }
    if (!cur.empty()) f.weights.push_back(cur);
    cur.clear();
  }
  f.scale = std::strtod(s->second.c_str(), nullptr);
  return f;
}

int64_t merge_lora(Graph& g, const std::map<std::string, Tensor>& adapters, double scale) {
  int64_t merged = 0;
  for (const auto& [name, a] : adapters) {
    std::string wname;
    OTTER_CHECK(is_lora_adapter_name(name, &wname), "merge_lora: '", name,
                "' is not an adapter (W.lora_A or W.lora_B)");
    if (name != wname + kSuffixA) continue;
    auto bit = adapters.find(wname + kSuffixB);
    OTTER_CHECK(bit != adapters.end(), "merge_lora: '", name, "' has no '", wname, kSuffixB, "'");
    Value* w = g.find_value(wname);
    OTTER_CHECK(w && w->has_data(), "merge_lora: the model has no weight '", wname, "' for adapter '", name, "'");
    std::string why;
    LoraLayout l = lora_layout(*w, &why);
    OTTER_CHECK(why.empty(), "merge_lora: '", wname, "' is not a MatMul/Gemm weight: ", why);
    const Tensor& b = bit->second;
    const int64_t r = a.rank() == 2 ? a.dim(0) : -1;
    OTTER_CHECK(a.rank() == 2 && a.dim(1) == l.in && b.rank() == 2 && b.dim(0) == l.out && b.dim(1) == r,
                "merge_lora: adapters of '", wname, "' are ", a.describe(), " and ", b.describe(), "; ", l.in,
                " in and ", l.out, " out features need [r,", l.in, "] and [", l.out, ",r]");
    Tensor out = w->data().clone();
    for (int64_t o = 0; o < l.out; ++o)
      for (int64_t i = 0; i < l.in; ++i) {
        double d = 0;
        for (int64_t k = 0; k < r; ++k) d += b.get_as_double(o * r + k) * a.get_as_double(k * l.in + i);
        const int64_t at = l.in_out ? i * l.out + o : o * l.in + i;
        if (out.dtype() == DataType::kFloat64)
          out.data<double>()[at] += scale * d;
        else
          out.data<float>()[at] += static_cast<float>(scale * d);
      }
    w->set_data(out);
    ++merged;
  }
  return merged;
}

std::string LoraPass::summary() const {
  return "add trainable low-rank adapters (LoRA) to the MatMul/Gemm weights matching globs; freeze the rest";
}

std::string LoraPass::unmet_precondition(const Graph& g) const { return before_autodiff(g); }

void LoraPass::run(Graph& g, PassContext&) {
  LoraResult r = add_lora(g, opts_);
  set_counters({{"adapters", static_cast<int64_t>(r.adapters.size())},
                {"branches", r.branches},
                {"adapter_params", r.adapter_params},
                {"frozen", r.frozen}});
  if (r.skipped) count("skipped_non_weights", r.skipped);
}

}  // namespace otter
