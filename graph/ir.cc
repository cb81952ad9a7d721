// Graph IR implementation.
#include "graph/ir.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"

namespace otter {

// ---- Dim / Shape ---------------------------------------------------------------------------------

std::string Dim::to_string() const {
  if (is_static()) return std::to_string(value);
  return symbol.empty() ? "?" : symbol;
}

Shape Shape::of(const std::vector<int64_t>& d) {
  Shape s;
  for (int64_t x : d) s.dims.emplace_back(x);
  return s;
}

bool Shape::is_static() const {
  if (!rank_known) return false;
  for (const Dim& d : dims)
    if (!d.is_static()) return false;
  return true;
}

std::vector<int64_t> Shape::static_dims() const {
  OTTER_CHECK(is_static(), "shape ", to_string(), " is not static");
  std::vector<int64_t> out;
  for (const Dim& d : dims) out.push_back(d.value);
  return out;
}

int64_t Shape::numel() const {
  if (!is_static()) return -1;
  int64_t n = 1;
  bool overflow = false;
  for (const Dim& d : dims) overflow |= __builtin_mul_overflow(n, d.value, &n);
  if (overflow && n != 0) fail("shape ", to_string(), " has more elements than int64 can count");
  return n;
}

std::string Shape::to_string() const {
  if (!rank_known) return "[...]";
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += dims[i].to_string();
  }
  return s + "]";
}

// ---- Value ---------------------------------------------------------------------------------------

void Value::set_data(Tensor t) {
  dtype_ = t.dtype();
  shape_ = Shape::of(t.dims());
  data_ = std::move(t);
}

bool Value::is_graph_output() const {
  for (Value* o : graph_->outputs())
    if (o == this) return true;
  return false;
}

std::string Value::type_string() const {
  return str_cat(dtype_name(dtype_), shape_.to_string());
}

// ---- Attribute -----------------------------------------------------------------------------------

namespace {
const char* kind_name(Attribute::Kind k) {
  static const char* kNames[] = {"float", "int", "string", "tensor", "floats", "ints", "strings", "graph", "graphs"};
  return kNames[static_cast<int>(k)];
}
std::string format_float(float f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os << std::setprecision(9) << f;
  std::string s = os.str();
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

#define OTTER_ATTR_GET(fn, type, kind_enum)                                                    \
  type Attribute::fn() const {                                                                 \
    OTTER_CHECK(kind() == Kind::kind_enum, "attribute is ", kind_name(kind()), ", not ",     \
                kind_name(Kind::kind_enum));                                                   \
    return std::get<static_cast<size_t>(Kind::kind_enum)>(v_);                                 \
  }
OTTER_ATTR_GET(f, float, kFloat)
OTTER_ATTR_GET(i, int64_t, kInt)
OTTER_ATTR_GET(s, const std::string&, kString)
OTTER_ATTR_GET(t, const Tensor&, kTensor)
OTTER_ATTR_GET(floats, const std::vector<float>&, kFloats)
OTTER_ATTR_GET(ints, const std::vector<int64_t>&, kInts)
OTTER_ATTR_GET(strings, const std::vector<std::string>&, kStrings)
OTTER_ATTR_GET(g, const Attribute::GraphPtr&, kGraph)
OTTER_ATTR_GET(graphs, const std::vector<Attribute::GraphPtr>&, kGraphs)
#undef OTTER_ATTR_GET

std::string Attribute::to_string() const {
  std::ostringstream os;
  switch (kind()) {
    case Kind::kFloat: os << format_float(f()); break;
    case Kind::kInt: os << i(); break;
    case Kind::kString: os << '"' << s() << '"'; break;
    case Kind::kTensor: {
      const Tensor& x = t();
      os << "tensor<" << x.describe();
      if (x.numel() <= 8) {
        os << ": ";
        for (int64_t k = 0; k < x.numel(); ++k) {
          if (k) os << ",";
          if (is_float(x.dtype())) os << format_float(static_cast<float>(x.get_as_double(k)));
          else os << static_cast<int64_t>(x.get_as_double(k));
        }
      }
      os << ">";
      break;
    }
    case Kind::kFloats: {
      os << '[';
      for (size_t k = 0; k < floats().size(); ++k) os << (k ? "," : "") << format_float(floats()[k]);
      os << ']';
      break;
    }
    case Kind::kInts: {
      os << '[';
      for (size_t k = 0; k < ints().size(); ++k) os << (k ? "," : "") << ints()[k];
      os << ']';
      break;
    }
    case Kind::kStrings: {
      os << '[';
      for (size_t k = 0; k < strings().size(); ++k) os << (k ? "," : "") << '"' << strings()[k] << '"';
      os << ']';
      break;
    }
    case Kind::kGraph: os << "graph " << g()->name; break;
    case Kind::kGraphs: {
      os << '[';
      for (size_t k = 0; k < graphs().size(); ++k) os << (k ? "," : "") << "graph " << graphs()[k]->name;
      os << ']';
      break;
    }
  }
  return os.str();
}

bool Attribute::operator==(const Attribute& o) const {
  if (kind() != o.kind()) return false;
  switch (kind()) {
    case Kind::kFloat: return f() == o.f() || (std::isnan(f()) && std::isnan(o.f()));
    case Kind::kInt: return i() == o.i();
    case Kind::kString: return s() == o.s();
    case Kind::kTensor: return t().bitwise_equal(o.t());
    case Kind::kFloats: return floats() == o.floats();
    case Kind::kInts: return ints() == o.ints();
    case Kind::kStrings: return strings() == o.strings();
    case Kind::kGraph: return g() == o.g();  // the same subgraph, not an equal one
    case Kind::kGraphs: return graphs() == o.graphs();
  }
  return false;
}

// ---- Node ----------------------------------------------------------------------------------------

std::string Node::describe() const {
  std::string d = domain_.empty() ? op_type_ : domain_ + "." + op_type_;
  if (!name_.empty()) return str_cat(d, " '", name_, "'");
  for (Value* o : outputs_)
    if (o) return str_cat(d, " (output '", o->name(), "')");
  return d + " (unnamed)";
}

void Node::set_input(int i, Value* v) {
  OTTER_CHECK(i >= 0, "negative input index");
  if (i >= static_cast<int>(inputs_.size())) inputs_.resize(i + 1, nullptr);
  if (Value* old = inputs_[i]) {
    auto& u = old->uses_;
    auto it = std::find(u.begin(), u.end(), std::make_pair(this, i));
    if (it != u.end()) u.erase(it);
  }
  inputs_[i] = v;
  if (v) v->uses_.emplace_back(this, i);
}

void Node::add_input(Value* v) { set_input(static_cast<int>(inputs_.size()), v); }

std::vector<Graph*> Node::subgraphs() const {
  std::vector<Graph*> out;
  for (const auto& [k, a] : attrs_) {
    if (a.kind() == Attribute::Kind::kGraph) out.push_back(a.g().get());
    if (a.kind() == Attribute::Kind::kGraphs)
      for (const auto& g : a.graphs()) out.push_back(g.get());
  }
  return out;
}

int Node::num_formal_inputs() const {
  int n = num_inputs();
  for (const Graph* g : subgraphs()) n -= static_cast<int>(g->captures().size());
  OTTER_CHECK(n >= 0, describe(), ": fewer inputs than its subgraphs capture");
  return n;
}

const Attribute* Node::find_attr(const std::string& k) const {
  auto it = attrs_.find(k);
  return it == attrs_.end() ? nullptr : &it->second;
}

int64_t Node::attr_i(const std::string& k, int64_t dflt) const {
  const Attribute* a = find_attr(k);
  if (!a) return dflt;
  OTTER_CHECK(a->kind() == Attribute::Kind::kInt, describe(), ": attribute '", k, "' must be an int");
  return a->i();
}

float Node::attr_f(const std::string& k, float dflt) const {
  const Attribute* a = find_attr(k);
  if (!a) return dflt;
  if (a->kind() == Attribute::Kind::kInt) return static_cast<float>(a->i());
  OTTER_CHECK(a->kind() == Attribute::Kind::kFloat, describe(), ": attribute '", k, "' must be a float");
  return a->f();
}

std::string Node::attr_s(const std::string& k, const std::string& dflt) const {
  const Attribute* a = find_attr(k);
  if (!a) return dflt;
  OTTER_CHECK(a->kind() == Attribute::Kind::kString, describe(), ": attribute '", k, "' must be a string");
  return a->s();
}

std::vector<int64_t> Node::attr_ints(const std::string& k, std::vector<int64_t> dflt) const {
  const Attribute* a = find_attr(k);
  if (!a) return dflt;
  OTTER_CHECK(a->kind() == Attribute::Kind::kInts, describe(), ": attribute '", k, "' must be a list of ints");
  return a->ints();
}

std::vector<float> Node::attr_floats(const std::string& k, std::vector<float> dflt) const {
  const Attribute* a = find_attr(k);
  if (!a) return dflt;
  OTTER_CHECK(a->kind() == Attribute::Kind::kFloats, describe(), ": attribute '", k, "' must be a list of floats");
  return a->floats();
}

// ---- Graph ---------------------------------------------------------------------------------------

Value* Graph::new_value(const std::string& name) {
  OTTER_CHECK(!name.empty(), "values must be named");
  OTTER_CHECK(!by_name_.count(name), "value '", name, "' is defined twice");
  auto v = std::make_unique<Value>();
  v->name_ = name;
  v->graph_ = this;
  Value* raw = v.get();
  values_.push_back(std::move(v));
  by_name_[name] = raw;
  return raw;
}

Value* Graph::add_input(const std::string& name, DataType t, Shape s) {
  Value* v = new_typed_input(name, t, std::move(s));
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_capture(const std::string& name, DataType t, Shape s) {
  Value* v = new_typed_input(name, t, std::move(s));
  captures_.push_back(v);
  return v;
}

Value* Graph::new_typed_input(const std::string& name, DataType t, Shape s) {
  Value* v = new_value(name);
  v->kind_ = ValueKind::kInput;
  v->dtype_ = t;
  v->shape_ = std::move(s);
  return v;
}

Value* Graph::add_initializer(const std::string& name, Tensor data, bool trainable) {
  Value* v = new_value(name);
  v->kind_ = ValueKind::kInitializer;
  v->set_data(std::move(data));
  v->trainable_ = trainable;
  return v;
}

Value* Graph::add_state(const std::string& name, Tensor initial) {
  Value* v = new_value(name);
  v->kind_ = ValueKind::kState;
  v->set_data(std::move(initial));
  return v;
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                      const std::vector<std::string>& output_names, const std::string& domain,
                      Node* before) {
  auto n = std::make_unique<Node>();
  n->op_type_ = op_type;
  n->domain_ = domain;
  n->graph_ = this;
  auto it = opset_imports.find(domain);
  n->opset_ = it == opset_imports.end() ? 1 : it->second;
  Node* raw = n.get();
  auto pos = before ? before->self_ : nodes_.end();
  raw->self_ = nodes_.insert(pos, std::move(n));
  for (Value* in : inputs) raw->add_input(in);
  for (size_t i = 0; i < output_names.size(); ++i) {
    if (output_names[i].empty()) {
      raw->outputs_.push_back(nullptr);
      continue;
    }
    Value* v = new_value(output_names[i]);
    v->kind_ = ValueKind::kNode;
    v->producer_ = raw;
    v->producer_output_ = static_cast<int>(i);
    raw->outputs_.push_back(v);
  }
  return raw;
}

void Graph::add_output(Value* v) { outputs_.push_back(v); }

std::vector<Node*> Graph::node_list() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v.get());
  return out;
}

std::vector<Value*> Graph::initializers() const {
  std::vector<Value*> out;
  for (const auto& v : values_)
    if (v->kind_ == ValueKind::kInitializer) out.push_back(v.get());
  return out;
}

std::vector<Value*> Graph::state() const {
  std::vector<Value*> out;
  for (const auto& v : values_)
    if (v->kind_ == ValueKind::kState) out.push_back(v.get());
  return out;
}

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Value* Graph::value(const std::string& name) const {
  Value* v = find_value(name);
  OTTER_CHECK(v, "no value named '", name, "' in graph '", this->name, "'");
  return v;
}

std::string Graph::unique_name(const std::string& base) const {
  if (!by_name_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = str_cat(base, ".", i);
    if (!by_name_.count(n)) return n;
  }
}

void Graph::replace_all_uses(Value* from, Value* to) {
  auto uses = from->uses_;
  for (auto [n, i] : uses) n->set_input(i, to);
  for (Value*& o : outputs_)
    if (o == from) o = to;
  for (auto& [s, upd] : state_updates)
    if (upd == from) upd = to;
  for (auto& [p, gr] : gradients)
    if (gr == from) gr = to;
  if (loss_seed == from) loss_seed = to;
}

void Graph::remove_node(Node* n) {
  for (Value* o : n->outputs_) {
    if (!o) continue;
    OTTER_CHECK(o->uses_.empty() && !o->is_graph_output(), "cannot remove ", n->describe(),
                ": output '", o->name(), "' is still used");
    for (auto& [s, upd] : state_updates)
      OTTER_CHECK(upd != o, "cannot remove ", n->describe(), ": it produces a state update");
  }
  for (int i = 0; i < n->num_inputs(); ++i) n->set_input(i, nullptr);
  for (Value* o : n->outputs_) {
    if (!o) continue;
    by_name_.erase(o->name_);
    auto it = std::find_if(values_.begin(), values_.end(), [&](const auto& p) { return p.get() == o; });
    values_.erase(it);
  }
  nodes_.erase(n->self_);
}

void Graph::remove_value(Value* v) {
  OTTER_CHECK(v->producer_ == nullptr, "remove_value: '", v->name(), "' has a producer node");
  OTTER_CHECK(v->uses_.empty() && !v->is_graph_output(), "remove_value: '", v->name(), "' is still used");
  state_updates.erase(v);
  if (loss_seed == v) loss_seed = nullptr;
  if (loss_scale == v) loss_scale = nullptr;
  inputs_.erase(std::remove(inputs_.begin(), inputs_.end(), v), inputs_.end());
  captures_.erase(std::remove(captures_.begin(), captures_.end(), v), captures_.end());
  by_name_.erase(v->name_);
  auto it = std::find_if(values_.begin(), values_.end(), [&](const auto& p) { return p.get() == v; });
  values_.erase(it);
}

void Graph::move_before(Node* n, Node* before) {
  auto pos = before ? before->self_ : nodes_.end();
  nodes_.splice(pos, nodes_, n->self_);
}

void Graph::set_kind(Value* v, ValueKind k) {
  OTTER_CHECK(v->producer_ == nullptr && k != ValueKind::kNode, "set_kind: '", v->name(),
              "' is produced by a node");
  if (v->kind_ == ValueKind::kInput && k != ValueKind::kInput)
    inputs_.erase(std::remove(inputs_.begin(), inputs_.end(), v), inputs_.end());
  if (k == ValueKind::kInput && v->kind_ != ValueKind::kInput) inputs_.push_back(v);
  if (k != ValueKind::kState) state_updates.erase(v);
  if (k == ValueKind::kInput) v->data_ = Tensor();
  v->kind_ = k;
}

void Graph::rename_value(Value* v, const std::string& new_name) {
  if (v->name_ == new_name) return;
  OTTER_CHECK(!by_name_.count(new_name), "rename: value '", new_name, "' already exists");
  by_name_.erase(v->name_);
  v->name_ = new_name;
  by_name_[new_name] = v;
}

void Graph::topo_sort() {
  // Kahn's algorithm, always taking the earliest ready node in the current order.
  std::vector<Node*> order = node_list();
  std::unordered_map<Node*, size_t> index;
  for (size_t i = 0; i < order.size(); ++i) index[order[i]] = i;
  std::vector<int> pending(order.size(), 0);
  std::vector<std::vector<size_t>> users(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    std::set<Node*> deps;
    for (Value* in : order[i]->inputs_)
      if (in && in->producer_) deps.insert(in->producer_);
    for (Node* d : deps) {
      users[index.at(d)].push_back(i);
      ++pending[i];
    }
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < order.size(); ++i)
    if (pending[i] == 0) ready.insert(i);
  std::vector<Node*> sorted;
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    sorted.push_back(order[i]);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.insert(u);
  }
  OTTER_CHECK(sorted.size() == order.size(), "graph '", name, "' has a cycle");
  for (Node* n : sorted) nodes_.splice(nodes_.end(), nodes_, n->self_);
}

int Graph::remove_dead_nodes() {
  std::unordered_set<Node*> live;
  std::vector<Node*> work;
  auto mark = [&](Value* v) {
    if (v && v->producer_ && live.insert(v->producer_).second) work.push_back(v->producer_);
  };
  for (Value* o : outputs_) mark(o);
  for (auto& [s, upd] : state_updates) mark(upd);
  for (auto& [p, gr] : gradients) mark(gr);
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    for (Value* in : n->inputs_) mark(in);
  }
  int removed = 0;
  std::vector<Node*> all = node_list();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (live.count(*it)) continue;
    remove_node(*it);
    ++removed;
  }
  return removed;
}

int Graph::opset(const std::string& domain) const {
  auto it = opset_imports.find(domain);
  return it == opset_imports.end() ? 0 : it->second;
}

namespace {
constexpr const char* kFactSteps = "otter.training.accumulation_steps";
constexpr const char* kFactLoss = "otter.training.loss";
constexpr const char* kFactLr = "otter.training.learning_rate";
constexpr const char* kFactFinite = "otter.training.finite";
}  // namespace

TrainingFacts Graph::training_facts() const {
  TrainingFacts f;
  auto text = [&](const char* k) {
    auto it = metadata.find(k);
    return it == metadata.end() ? std::string() : it->second;
  };
  if (std::string k = text(kFactSteps); !k.empty()) {
    char* end = nullptr;
    f.accumulation_steps = std::strtoll(k.c_str(), &end, 10);
    OTTER_CHECK(*end == 0 && f.accumulation_steps >= 1, "graph metadata ", kFactSteps, ": '", k,
                "' is not a positive integer");
  }
  f.loss = text(kFactLoss);
  f.learning_rate = text(kFactLr);
  f.finite = text(kFactFinite);
  return f;
}

void Graph::set_training_facts(const TrainingFacts& f) {
  metadata[kFactSteps] = std::to_string(f.accumulation_steps);
  for (auto [k, v] : {std::pair{kFactLoss, &f.loss}, std::pair{kFactLr, &f.learning_rate},
                      std::pair{kFactFinite, &f.finite}}) {
    if (v->empty()) metadata.erase(k);
    else metadata[k] = *v;
  }
}

}  // namespace otter
