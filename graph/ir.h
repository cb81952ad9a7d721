// otter's graph IR: SSA Values with one producer, Nodes with typed attributes, and the Graph that
// owns both. Parameters are trainable initializers; other persistent tensors are state.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "graph/dtype.h"
#include "graph/tensor.h"

namespace otter {

class Graph;
class Node;

// One dimension: a static size (value >= 0) or a symbol ("N", "seq"); an empty symbol with value
// < 0 is an unknown dimension.
struct Dim {
  int64_t value = -1;
  std::string symbol;

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit for brevity in shape literals
  Dim(std::string s) : symbol(std::move(s)) {}  // NOLINT
  Dim(const char* s) : symbol(s) {}  // NOLINT
  bool is_static() const { return value >= 0; }
  bool is_symbolic() const { return value < 0 && !symbol.empty(); }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
  std::string to_string() const;
};

// A shape of known rank (dims) or of unknown rank (rank_known = false).
struct Shape {
  bool rank_known = true;
  std::vector<Dim> dims;

  Shape() = default;
  Shape(std::vector<Dim> d) : dims(std::move(d)) {}  // NOLINT
  static Shape unknown() { Shape s; s.rank_known = false; return s; }
  static Shape of(const std::vector<int64_t>& d);
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  bool is_static() const;
  // Static dims; fails unless is_static().
  std::vector<int64_t> static_dims() const;
  // Element count when static, else -1.
  int64_t numel() const;
  bool operator==(const Shape& o) const { return rank_known == o.rank_known && dims == o.dims; }
  std::string to_string() const;  // "[N,128]", "[?]" per unknown dim, "[...]" for unknown rank
};

// A value's role: who produces it and whether it persists across steps.
enum class ValueKind : uint8_t {
  kNode,         // produced by a node
  kInput,        // graph input fed per step
  kInitializer,  // constant or parameter with data (trainable flag below)
  kState,        // persistent tensor read at step start, written back at its end
};

class Value {
 public:
  const std::string& name() const { return name_; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  void set_dtype(DataType t) { dtype_ = t; }
  void set_shape(Shape s) { shape_ = std::move(s); }
  ValueKind kind() const { return kind_; }
  Node* producer() const { return producer_; }
  int producer_output() const { return producer_output_; }
  // Each use is (node, input index).
  const std::vector<std::pair<Node*, int>>& uses() const { return uses_; }
  bool has_data() const { return data_.defined(); }
  const Tensor& data() const { return data_; }
  void set_data(Tensor t);
  // Partially known contents of a small 1-D integer value (a shape under construction: Shape ->
  // Gather -> Concat chains), propagated by shape inference so Reshape can keep symbolic dims.
  const std::optional<std::vector<Dim>>& sym_data() const { return sym_data_; }
  void set_sym_data(std::optional<std::vector<Dim>> d) { sym_data_ = std::move(d); }
  bool trainable() const { return trainable_; }
  void set_trainable(bool t) { trainable_ = t; }
  bool is_graph_output() const;
  Graph* graph() const { return graph_; }
  std::string type_string() const;  // "f32[N,128]"

 private:
  friend class Graph;
  friend class Node;
  std::string name_;
  DataType dtype_ = DataType::kUndefined;
  Shape shape_ = Shape::unknown();
  ValueKind kind_ = ValueKind::kNode;
  Node* producer_ = nullptr;
  int producer_output_ = -1;
  std::vector<std::pair<Node*, int>> uses_;
  Tensor data_;
  std::optional<std::vector<Dim>> sym_data_;
  bool trainable_ = false;
  Graph* graph_ = nullptr;
};

// Typed attribute values. Tensor attributes are host tensors. Graph attributes (the branches of If,
// the bodies of Loop and Scan) are subgraphs shared between copies of the attribute: a subgraph
// reads values of its enclosing graph through its captures (Graph::captures), which the node
// that holds it takes as implicit inputs after its own (Node::num_formal_inputs).
class Attribute {
 public:
  enum class Kind : uint8_t { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings, kGraph, kGraphs };
  using GraphPtr = std::shared_ptr<Graph>;
  using Storage = std::variant<float, int64_t, std::string, Tensor, std::vector<float>,
                               std::vector<int64_t>, std::vector<std::string>, GraphPtr,
                               std::vector<GraphPtr>>;
  Attribute() : v_(int64_t{0}) {}
  Attribute(float f) : v_(f) {}  // NOLINT
  Attribute(int64_t i) : v_(i) {}  // NOLINT
  Attribute(int i) : v_(int64_t{i}) {}  // NOLINT
  Attribute(std::string s) : v_(std::move(s)) {}  // NOLINT
  Attribute(const char* s) : v_(std::string(s)) {}  // NOLINT
  Attribute(Tensor t) : v_(std::move(t)) {}  // NOLINT
  Attribute(std::vector<float> f) : v_(std::move(f)) {}  // NOLINT
  Attribute(std::vector<int64_t> i) : v_(std::move(i)) {}  // NOLINT
  Attribute(std::vector<std::string> s) : v_(std::move(s)) {}  // NOLINT
  Attribute(GraphPtr g) : v_(std::move(g)) {}  // NOLINT
  Attribute(std::vector<GraphPtr> g) : v_(std::move(g)) {}  // NOLINT
  Kind kind() const { return static_cast<Kind>(v_.index()); }
  float f() const;
  int64_t i() const;
  const std::string& s() const;
  const Tensor& t() const;
  const std::vector<float>& floats() const;
  const std::vector<int64_t>& ints() const;
  const std::vector<std::string>& strings() const;
  const GraphPtr& g() const;
  const std::vector<GraphPtr>& graphs() const;
  std::string to_string() const;
  bool operator==(const Attribute& o) const;

 private:
  Storage v_;
};

// Which compiled program a node belongs to in a training graph: the micro-step program (forward,
// backward, gradient accumulation; run K times per optimizer step) or the apply program (finite
// check, unscale, clipping, optimizer update, loss-scale update; run once per step).
enum class Program : uint8_t { kMicroStep = 0, kApply = 1 };

class Node {
 public:
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }  // "" is the default ONNX domain
  int opset() const { return opset_; }
  void set_opset(int v) { opset_ = v; }
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  // "Gemm 'fc1/Gemm'" or "Gemm (unnamed, output 'y')": how errors name a node.
  std::string describe() const;

  // Inputs may be nullptr where an optional input is omitted; likewise outputs.
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(int i) const { return i < static_cast<int>(inputs_.size()) ? inputs_[i] : nullptr; }
  Value* output(int i) const { return i < static_cast<int>(outputs_.size()) ? outputs_[i] : nullptr; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  bool has_input(int i) const { return input(i) != nullptr; }
  void set_input(int i, Value* v);
  void add_input(Value* v);
  // The subgraphs of the node's graph attributes, in attribute-name order (a GRAPHS attribute's
  // graphs in their order); their captures, in the same order, are the node's last inputs.
  std::vector<Graph*> subgraphs() const;
  // The inputs ONNX gives the op: all but the implicit (captured) ones.
  int num_formal_inputs() const;

  const std::map<std::string, Attribute>& attrs() const { return attrs_; }
  bool has_attr(const std::string& k) const { return attrs_.count(k) != 0; }
  const Attribute* find_attr(const std::string& k) const;
  void set_attr(const std::string& k, Attribute a) { attrs_[k] = std::move(a); }
  void remove_attr(const std::string& k) { attrs_.erase(k); }
  int64_t attr_i(const std::string& k, int64_t dflt) const;
  float attr_f(const std::string& k, float dflt) const;
  std::string attr_s(const std::string& k, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& k, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(const std::string& k, std::vector<float> dflt = {}) const;

  Graph* graph() const { return graph_; }
  Program program() const { return program_; }
  void set_program(Program p) { program_ = p; }

 private:
  friend class Graph;
  std::string op_type_, domain_, name_;
  int opset_ = 0;
  Program program_ = Program::kMicroStep;
  std::vector<Value*> inputs_, outputs_;
  std::map<std::string, Attribute> attrs_;
  Graph* graph_ = nullptr;
  std::list<std::unique_ptr<Node>>::iterator self_;
};

// Where the node-produced values of one program live: offsets into one arena, computed by the
// memory-plan pass from static shapes and liveness. Values not planned (graph outputs, state
// updates, views of other values, dynamic shapes) are allocated when they are produced.
struct MemoryPlan {
  struct Buffer {
    int64_t offset = 0;   // bytes from the arena's start (aligned)
    int64_t bytes = 0;    // the value's size
    int first = 0;        // index (in the program's node order) of the node that writes it
    int last = 0;         // index of the last node that reads it or a view of it
    std::string reuses;   // the value whose buffer this one takes over in place ("" if none)
  };
  int64_t arena_bytes = 0;
  // The peak of the same values' bytes when each is allocated when produced and freed after its
  // last use (the executor without a plan): what the plan is measured against.
  int64_t unplanned_peak_bytes = 0;
  std::map<std::string, Buffer> buffers;  // by value name
};

// A graph owns values and nodes. Nodes are kept in a list whose order is topological.
// What the training passes established about a graph, for the passes after them and the runtime:
// K (grad-accumulation), the loss (autodiff), the apply program's learning rate and finite flag
// (optimizer), values by name. The backward seed and the loss-scale state S are Graph::loss_seed
// and Graph::loss_scale. Kept in Graph::metadata (keys otter.training.*), so a graph exported to
// ONNX mid-pipeline and imported again still has them.
struct TrainingFacts {
  int64_t accumulation_steps = 1;  // K: micro-batches per optimizer step
  std::string loss;                // the scalar loss value ("" before autodiff)
  std::string learning_rate;       // the learning rate the apply program outputs ("" before optimizer)
  std::string finite;              // the apply program's all-finite flag ("" before optimizer)
  bool operator==(const TrainingFacts&) const = default;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // ---- construction -------------------------------------------------------------------------
  Value* add_input(const std::string& name, DataType t, Shape s);
  Value* add_initializer(const std::string& name, Tensor data, bool trainable);
  Value* add_state(const std::string& name, Tensor initial);
  // Appends a node at the end (or before `before` when given). Output names must be fresh.
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                 const std::vector<std::string>& output_names, const std::string& domain = "",
                 Node* before = nullptr);
  void add_output(Value* v);
  void set_outputs(std::vector<Value*> outs) { outputs_ = std::move(outs); }

  // ---- queries --------------------------------------------------------------------------------
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::vector<Node*> node_list() const;
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // A subgraph's reads of values of the enclosing graph: inputs (kind kInput) that are neither
  // fed nor listed in inputs(); the node holding the subgraph passes the outer values in.
  const std::vector<Value*>& captures() const { return captures_; }
  Value* add_capture(const std::string& name, DataType t, Shape s);
  std::vector<Value*> values() const;  // all live values in creation order
  std::vector<Value*> initializers() const;  // kInitializer values in creation order
  std::vector<Value*> state() const;  // kState values in creation order
  Value* find_value(const std::string& name) const;
  Value* value(const std::string& name) const;  // fails if missing
  bool has_value(const std::string& name) const { return find_value(name) != nullptr; }
  // A fresh value name derived from `base` ("x", "x.1", "x.2", ...).
  std::string unique_name(const std::string& base) const;

  // ---- mutation -------------------------------------------------------------------------------
  // Redirects every use of `from` (and graph outputs) to `to`.
  void replace_all_uses(Value* from, Value* to);
  // Removes a node; its outputs must be unused (unless `force`, which leaves them dangling).
  void remove_node(Node* n);
  // Removes a value with no producer node and no uses (an input, initializer or state).
  void remove_value(Value* v);
  void move_before(Node* n, Node* before);
  // Turns an initializer into a graph input or state, etc.
  void set_kind(Value* v, ValueKind k);
  void rename_value(Value* v, const std::string& new_name);
  // Reorders nodes into a topological order that keeps the current order where it already is one.
  void topo_sort();
  // Removes nodes whose outputs reach no graph output or state update; returns how many.
  int remove_dead_nodes();

  // ---- model-level metadata -------------------------------------------------------------------
  std::string name = "main";
  std::map<std::string, int> opset_imports;  // domain -> version ("" is ai.onnx)
  int upgraded_from_opset = 0;  // the model's ai.onnx opset before import upgraded it (0: not upgraded)
  std::map<std::string, std::string> metadata;
  int64_t ir_version = 8;
  std::string producer_name, producer_version, doc_string;
  // State updates: state value (or parameter) -> value holding its new contents after a run of
  // the program that produces it.
  std::map<Value*, Value*> state_updates;
  // Training facts recorded by the passes: each trainable parameter with the value holding its
  // gradient (after grad-accumulation: its fp32 accumulator), in parameter order, and the
  // constant or value that seeds the backward pass (1, then 1/K, then S/K).
  std::vector<std::pair<Value*, Value*>> gradients;
  Value* loss_seed = nullptr;
  Value* loss_scale = nullptr;  // the dynamic or static loss-scale state S, when scaling is on
  // Arena plans per program (memory-plan pass); any later rewrite must clear them.
  std::map<Program, MemoryPlan> memory_plans;

  int opset(const std::string& domain = "") const;
  // The training facts recorded so far (defaults where none is), and recording them.
  TrainingFacts training_facts() const;
  void set_training_facts(const TrainingFacts& f);

 private:
  Value* new_value(const std::string& name);
  // A new value of kind input with this type, in neither list (add_input and add_capture file it).
  Value* new_typed_input(const std::string& name, DataType t, Shape s);
  std::list<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::map<std::string, Value*> by_name_;
  std::vector<Value*> inputs_, outputs_, captures_;
};

}  // namespace otter
