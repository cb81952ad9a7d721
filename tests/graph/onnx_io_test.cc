// Tests of ONNX import/export: round trips, initializer encodings, external data, state, and bad input.
#include <gtest/gtest.h>

#include <onnx/checker.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <set>
#include <unistd.h>

#include "graph/error.h"
#include "graph/ir.h"
#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/printer.h"

namespace otter {
namespace {

namespace fs = std::filesystem;

// Skips the calling test while the op table lacks an op the test's model uses.
#define REQUIRE_OPS(...)                                                                    \
  do {                                                                                      \
    for (const char* op_ : {__VA_ARGS__})                                                   \
      if (!OpTable::instance().find("", op_, 17)) GTEST_SKIP() << "op table has no " << op_; \
  } while (0)

// A fresh folder under the system temp dir, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("otter_onnx_io_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

onnx::ModelProto parse_text(const char* text) {
  onnx::ModelProto m;
  auto status = onnx::OnnxParser::Parse(m, text);
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  return m;
}

std::string serialize(const onnx::ModelProto& m) {
  std::string s;
  EXPECT_TRUE(m.SerializeToString(&s));
  return s;
}

// A model without nodes, at opset 17; tests add initializers and outputs.
onnx::ModelProto empty_model(int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void add_output(onnx::ModelProto& m, const std::string& name) { m.mutable_graph()->add_output()->set_name(name); }

onnx::TensorProto* add_init(onnx::ModelProto& m, const std::string& name, int onnx_type, std::vector<int64_t> dims) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx_type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

std::unique_ptr<Graph> import_proto(const onnx::ModelProto& m, const std::string& base_dir = "",
                                    const ImportOptions& opts = {}) {
  return import_onnx_bytes(serialize(m), base_dir, opts, "test model");
}

// Runs `f`, requiring an otter::Error whose message holds every one of `parts`; returns the message.
template <typename F>
std::string expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected otter::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected an otter::Error, but nothing was thrown";
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kMlpText = R"(
<ir_version: 8, opset_import: ["" : 17], producer_name: "otter-test", producer_version: "0.1">
mlp (float[N, 4] x) => (float[N, 3] y)
  <float[3, 4] w = {0.5, -1.0, 2.0, 0.25, 1.0, 1.0, 1.0, 1.0, -0.5, 0.0, 3.0, 2.0},
   float[3] b = {0.1, 0.2, 0.3}, int64[2] shape = {-1, 3}>
{
  h = Gemm<transB = 1>(x, w, b)
  r = Relu(h)
  c = Constant<value = float[1] {2.0}>()
  m = Mul(r, c)
  y = Reshape(m, shape)
}
)";

// ---- round trip and export ------------------------------------------------------------------------

TEST(OnnxIoTest, TextImportExportImportPrintsIdentically) {
  REQUIRE_OPS("Gemm", "Relu", "Constant", "Mul", "Reshape");
  auto g1 = import_onnx_text(kMlpText);
  std::string p1 = graph_to_string(*g1);
  // What the text says, independent of the importer's own output.
  EXPECT_TRUE(contains(p1, "graph mlp (ai.onnx 17) {\n")) << p1;
  EXPECT_TRUE(contains(p1, "  input %x: f32[N,4]\n")) << p1;
  EXPECT_TRUE(contains(p1, "  param %w: f32[3,4]\n")) << p1;
  EXPECT_TRUE(contains(p1, "  param %b: f32[3]\n")) << p1;
  EXPECT_TRUE(contains(p1, "  const %shape: i64[2] = [-1,3]\n")) << p1;
  EXPECT_TRUE(contains(p1, "= Gemm(%x, %w, %b) {transB=1}\n")) << p1;
  EXPECT_TRUE(contains(p1, "%c: f32[1] = Constant() {value=tensor<f32[1]: 2.0>}\n")) << p1;
  EXPECT_TRUE(contains(p1, "  output %y\n")) << p1;
  EXPECT_EQ(g1->value("y")->dtype(), DataType::kFloat32);
  EXPECT_EQ(g1->producer_name, "otter-test");
  EXPECT_EQ(g1->producer_version, "0.1");
  for (const auto& n : g1->nodes()) EXPECT_EQ(n->opset(), 17) << n->describe();

  std::string bytes1 = export_onnx_bytes(*g1);
  auto g2 = import_onnx_bytes(bytes1, "");
  EXPECT_EQ(graph_to_string(*g2), p1);
  // A second trip changes nothing at all, not even bytes.
  EXPECT_EQ(export_onnx_bytes(*g2), bytes1);
}

TEST(OnnxIoTest, ExportedModelPassesOnnxChecker) {
  REQUIRE_OPS("Gemm", "Relu", "Constant", "Mul", "Reshape");
  auto g = import_onnx_text(kMlpText);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(export_onnx_bytes(*g)));
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    FAIL() << "checker rejected the export: " << e.what();
  }
  EXPECT_EQ(m.ir_version(), 8);
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).domain(), "");
  EXPECT_EQ(m.opset_import(0).version(), 17);
  // value_info for every value that is neither graph input nor output, with its type.
  std::set<std::string> infos;
  for (const auto& vi : m.graph().value_info()) {
    infos.insert(vi.name());
    EXPECT_EQ(vi.type().tensor_type().elem_type(), onnx::TensorProto::FLOAT) << vi.name();
    EXPECT_TRUE(vi.type().tensor_type().has_shape()) << vi.name();
  }
  EXPECT_EQ(infos, (std::set<std::string>{"h", "r", "c", "m"}));
  // Initializers keep their bits, as raw_data.
  const float w[12] = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 1.0f, 1.0f, 1.0f, -0.5f, 0.0f, 3.0f, 2.0f};
  bool found = false;
  for (const auto& t : m.graph().initializer())
    if (t.name() == "w") {
      found = true;
      EXPECT_EQ(t.raw_data(), std::string(reinterpret_cast<const char*>(w), sizeof(w)));
      EXPECT_EQ(t.float_data_size(), 0);
    }
  EXPECT_TRUE(found);
  // The symbolic input dim stays a dim_param.
  EXPECT_EQ(m.graph().input(0).type().tensor_type().shape().dim(0).dim_param(), "N");
}

TEST(OnnxIoTest, ExportOfCodeBuiltGraphWithStateAndInternalOps) {
  Graph g;
  g.name = "train";
  g.opset_imports[""] = 17;  // ai.otter is not listed: export must add it
  Value* x = g.add_input("x", DataType::kFloat32, Shape({Dim(), Dim("S")}));
  Value* s = g.add_state("s", Tensor::from_vector<float>({2}, {0, 0}));
  Value* frozen = g.add_initializer("frozen", Tensor::from_vector<float>({2}, {1, 2}), false);
  Node* n = g.add_node("Add", {s, frozen}, {"s.new"});
  n->output(0)->set_dtype(DataType::kFloat32);
  n->output(0)->set_shape(Shape::of({2}));
  Node* k = g.add_node("Fancy", {x}, {"z"}, "ai.otter");
  k->output(0)->set_dtype(DataType::kFloat32);
  k->output(0)->set_shape(Shape({Dim(), Dim("S")}));
  g.state_updates[s] = n->output(0);
  g.add_output(k->output(0));
  g.metadata["author"] = "me";

  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(export_onnx_bytes(g)));
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    FAIL() << "checker rejected the export: " << e.what();
  }
  std::map<std::string, int64_t> opsets;
  for (const auto& o : m.opset_import()) opsets[o.domain()] = o.version();
  EXPECT_EQ(opsets, (std::map<std::string, int64_t>{{"", 17}, {"ai.otter", 1}}));
  std::map<std::string, std::string> meta;
  for (const auto& p : m.metadata_props()) meta[p.key()] = p.value();
  EXPECT_EQ(meta["otter.state"], "s");
  EXPECT_EQ(meta["otter.state_updates"], "s=s.new");
  EXPECT_EQ(meta["otter.frozen"], "frozen");
  EXPECT_EQ(meta["author"], "me");
  // State is an initializer; graph inputs are only the fed ones.
  ASSERT_EQ(m.graph().input_size(), 1);
  EXPECT_EQ(m.graph().initializer_size(), 2);
  EXPECT_EQ(m.graph().node(1).domain(), "ai.otter");
  // An unknown dim is an empty dimension; a symbol a dim_param.
  const auto& shape = m.graph().input(0).type().tensor_type().shape();
  ASSERT_EQ(shape.dim_size(), 2);
  EXPECT_FALSE(shape.dim(0).has_dim_value());
  EXPECT_FALSE(shape.dim(0).has_dim_param());
  EXPECT_EQ(shape.dim(1).dim_param(), "S");
  EXPECT_EQ(m.graph().output(0).type().tensor_type().shape().dim_size(), 2);
  // A value of unknown rank has no shape (onnx 1.12's checker wants one on graph outputs).
  k->output(0)->set_shape(Shape::unknown());
  ASSERT_TRUE(m.ParseFromString(export_onnx_bytes(g)));
  EXPECT_TRUE(m.graph().output(0).type().tensor_type().has_elem_type());
  EXPECT_FALSE(m.graph().output(0).type().tensor_type().has_shape());
}

TEST(OnnxIoTest, StateAndFrozenSurviveRoundTrip) {
  REQUIRE_OPS("Add");
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Value* s = g.add_state("s", Tensor::from_vector<float>({2}, {0, 0}));
  Value* frozen = g.add_initializer("frozen", Tensor::from_vector<float>({2}, {1, 2}), false);
  Value* w = g.add_initializer("w", Tensor::from_vector<float>({2}, {3, 4}), true);
  Node* n = g.add_node("Add", {s, frozen}, {"s.new"});
  Node* y = g.add_node("Add", {x, w}, {"y"});
  Node* step = g.add_node("Add", {w, frozen}, {"w.new"});  // an in-place parameter update
  step->set_program(Program::kApply);
  infer_graph(g);
  g.state_updates[s] = n->output(0);
  g.state_updates[w] = step->output(0);
  g.add_output(y->output(0));
  g.metadata["otter.user_key"] = "kept";
  g.gradients.emplace_back(w, y->output(0));
  g.gradients.emplace_back(frozen, nullptr);
  g.loss_seed = frozen;
  g.loss_scale = s;
  std::string before = graph_to_string(g);
  ASSERT_TRUE(contains(before, "  // apply program")) << before;
  auto back = import_onnx_bytes(export_onnx_bytes(g), "");
  EXPECT_EQ(graph_to_string(*back), before);
  EXPECT_EQ(back->value("s")->kind(), ValueKind::kState);
  EXPECT_FALSE(back->value("frozen")->trainable());
  EXPECT_TRUE(back->value("w")->trainable());
  EXPECT_EQ(back->state_updates.at(back->value("s")), back->value("s.new"));
  EXPECT_EQ(back->state_updates.at(back->value("w")), back->value("w.new"));
  EXPECT_EQ(back->value("w.new")->producer()->program(), Program::kApply);
  EXPECT_EQ(back->value("y")->producer()->program(), Program::kMicroStep);
  EXPECT_EQ(back->metadata, (std::map<std::string, std::string>{{"otter.user_key", "kept"}}));
  using Grads = std::vector<std::pair<Value*, Value*>>;
  EXPECT_EQ(back->gradients, (Grads{{back->value("w"), back->value("y")}, {back->value("frozen"), nullptr}}));
  EXPECT_EQ(back->loss_seed, back->value("frozen"));
  EXPECT_EQ(back->loss_scale, back->value("s"));
}

TEST(OnnxIoTest, IrVersionFollowsOpset) {
  // Opset 21 needs IR 10 even where the model claims less; no nodes, so no op table needed.
  onnx::ModelProto m = empty_model(21);
  m.set_ir_version(7);
  auto* in = m.mutable_graph()->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  add_output(m, "x");
  auto g = import_proto(m);
  EXPECT_EQ(g->ir_version, 7);
  onnx::ModelProto out;
  ASSERT_TRUE(out.ParseFromString(export_onnx_bytes(*g)));
  EXPECT_EQ(out.ir_version(), 10);
  // A model already above what is needed keeps its version.
  m = empty_model(13);
  m.set_ir_version(8);
  add_init(m, "c", onnx::TensorProto::FLOAT, {})->add_float_data(1);
  add_output(m, "c");
  g = import_proto(m);
  ASSERT_TRUE(out.ParseFromString(export_onnx_bytes(*g)));
  EXPECT_EQ(out.ir_version(), 8);
}

TEST(OnnxIoTest, ModelLevelFieldsAndAiOnnxDomain) {
  onnx::ModelProto m = empty_model(17);
  m.mutable_opset_import(0)->set_domain("ai.onnx");  // same as ""
  m.set_ir_version(9);
  m.set_producer_name("exporter");
  m.set_producer_version("2.1");
  m.set_doc_string("a doc");
  auto* p = m.add_metadata_props();
  p->set_key("license");
  p->set_value("MIT");
  m.mutable_graph()->set_name("my_graph");
  add_init(m, "c", onnx::TensorProto::FLOAT, {1})->add_float_data(3);
  add_output(m, "c");
  auto g = import_proto(m);
  EXPECT_EQ(g->opset_imports, (std::map<std::string, int>{{"", 17}}));
  EXPECT_EQ(g->ir_version, 9);
  EXPECT_EQ(g->producer_name, "exporter");
  EXPECT_EQ(g->producer_version, "2.1");
  EXPECT_EQ(g->doc_string, "a doc");
  EXPECT_EQ(g->metadata, (std::map<std::string, std::string>{{"license", "MIT"}}));
  EXPECT_EQ(g->name, "my_graph");
  auto back = import_onnx_bytes(export_onnx_bytes(*g), "");
  EXPECT_EQ(back->producer_name, "exporter");
  EXPECT_EQ(back->producer_version, "2.1");
  EXPECT_EQ(back->doc_string, "a doc");
  EXPECT_EQ(back->metadata, g->metadata);  // otter.* keys are not user metadata
  EXPECT_EQ(back->name, "my_graph");
  EXPECT_EQ(back->ir_version, 9);
}

TEST(OnnxIoTest, ExportFileIsAtomicAndReadable) {
  TempDir dir;
  Graph g;
  g.opset_imports[""] = 17;
  g.add_output(g.add_initializer("c", Tensor::from_vector<int64_t>({2}, {5, 6}), false));
  std::string path = dir.file("out.onnx");
  export_onnx_file(g, path);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  auto back = import_onnx_file(path);
  EXPECT_TRUE(back->value("c")->data().bitwise_equal(g.value("c")->data()));
  // A folder that does not exist: a clear error, nothing left behind.
  expect_error([&] { export_onnx_file(g, dir.file("no/such/dir/out.onnx")); }, {"no/such/dir/out.onnx"});
}

TEST(OnnxIoTest, TextFilesByExtension) {
  REQUIRE_OPS("Gemm", "Relu", "Constant", "Mul", "Reshape");
  TempDir dir;
  write_file(dir.file("m.onnxtxt"), kMlpText);
  write_file(dir.file("m.txt"), kMlpText);
  std::string expected = graph_to_string(*import_onnx_text(kMlpText));
  EXPECT_EQ(graph_to_string(*import_onnx_file(dir.file("m.onnxtxt"))), expected);
  EXPECT_EQ(graph_to_string(*import_onnx_file(dir.file("m.txt"))), expected);
}

// ---- initializer encodings --------------------------------------------------------------------------

struct EncodingCase {
  const char* name;
  int onnx_type;
  Tensor expected;
  std::function<void(onnx::TensorProto*)> fill_typed;
  std::string raw;
};

std::vector<EncodingCase> encoding_cases() {
  std::vector<EncodingCase> cases;
  cases.push_back({"f32", onnx::TensorProto::FLOAT, Tensor::from_vector<float>({3}, {1.5f, -0.25f, 3e38f}),
                   [](onnx::TensorProto* t) { for (float v : {1.5f, -0.25f, 3e38f}) t->add_float_data(v); },
                   bytes_of(std::vector<float>{1.5f, -0.25f, 3e38f})});
  cases.push_back({"f64", onnx::TensorProto::DOUBLE, Tensor::from_vector<double>({2}, {0.1, -2.5}),
                   [](onnx::TensorProto* t) { t->add_double_data(0.1); t->add_double_data(-2.5); },
                   bytes_of(std::vector<double>{0.1, -2.5})});
  cases.push_back({"i64", onnx::TensorProto::INT64, Tensor::from_vector<int64_t>({2}, {-1, int64_t{1} << 40}),
                   [](onnx::TensorProto* t) { t->add_int64_data(-1); t->add_int64_data(int64_t{1} << 40); },
                   bytes_of(std::vector<int64_t>{-1, int64_t{1} << 40})});
  cases.push_back({"i32", onnx::TensorProto::INT32, Tensor::from_vector<int32_t>({2}, {-5, 70000}),
                   [](onnx::TensorProto* t) { t->add_int32_data(-5); t->add_int32_data(70000); },
                   bytes_of(std::vector<int32_t>{-5, 70000})});
  // int8/uint8/bool/float16/bfloat16 travel in int32_data, one element per int32.
  cases.push_back({"i8", onnx::TensorProto::INT8, Tensor::from_vector<int8_t>({3}, {-128, 127, -1}),
                   [](onnx::TensorProto* t) { for (int v : {-128, 127, -1}) t->add_int32_data(v); },
                   std::string("\x80\x7f\xff", 3)});
  cases.push_back({"u8", onnx::TensorProto::UINT8, Tensor::from_vector<uint8_t>({3}, {0, 200, 255}),
                   [](onnx::TensorProto* t) { for (int v : {0, 200, 255}) t->add_int32_data(v); },
                   std::string("\x00\xc8\xff", 3)});
  Tensor flags(DataType::kBool, {3});
  std::memcpy(flags.raw(), "\x01\x00\x01", 3);
  cases.push_back({"bool", onnx::TensorProto::BOOL, flags,
                   [](onnx::TensorProto* t) { for (int v : {1, 0, 1}) t->add_int32_data(v); },
                   std::string("\x01\x00\x01", 3)});
  // 1.0, -2.0, 65504 (largest half), 2^-24 (smallest subnormal).
  Tensor f16(DataType::kFloat16, {4});
  const uint16_t f16_bits[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};
  std::memcpy(f16.raw(), f16_bits, sizeof(f16_bits));
  cases.push_back({"f16", onnx::TensorProto::FLOAT16, f16,
                   [](onnx::TensorProto* t) { for (int v : {0x3C00, 0xC000, 0x7BFF, 0x0001}) t->add_int32_data(v); },
                   std::string("\x00\x3c\x00\xc0\xff\x7b\x01\x00", 8)});
  // 1.0, -3.0, 3.140625.
  Tensor bf16(DataType::kBFloat16, {3});
  const uint16_t bf16_bits[3] = {0x3F80, 0xC040, 0x4049};
  std::memcpy(bf16.raw(), bf16_bits, sizeof(bf16_bits));
  cases.push_back({"bf16", onnx::TensorProto::BFLOAT16, bf16,
                   [](onnx::TensorProto* t) { for (int v : {0x3F80, 0xC040, 0x4049}) t->add_int32_data(v); },
                   std::string("\x80\x3f\x40\xc0\x49\x40", 6)});
  return cases;
}

TEST(OnnxIoTest, RawAndTypedInitializersGiveIdenticalTensors) {
  for (const auto& c : encoding_cases()) {
    SCOPED_TRACE(c.name);
    onnx::ModelProto m = empty_model();
    std::vector<int64_t> dims = c.expected.dims();
    c.fill_typed(add_init(m, "typed", c.onnx_type, dims));
    add_init(m, "raw", c.onnx_type, dims)->set_raw_data(c.raw);
    add_output(m, "typed");
    add_output(m, "raw");
    auto g = import_proto(m);
    const Tensor& typed = g->value("typed")->data();
    const Tensor& raw = g->value("raw")->data();
    EXPECT_TRUE(typed.bitwise_equal(c.expected)) << typed.describe();
    EXPECT_TRUE(raw.bitwise_equal(c.expected)) << raw.describe();
    // Float initializers are parameters, others constants.
    EXPECT_EQ(g->value("raw")->trainable(), is_float(c.expected.dtype()));
    // Export writes raw_data with the same bytes.
    onnx::ModelProto out;
    ASSERT_TRUE(out.ParseFromString(export_onnx_bytes(*g)));
    for (const auto& t : out.graph().initializer()) EXPECT_EQ(t.raw_data(), c.raw) << t.name();
  }
}

TEST(OnnxIoTest, HalfTypesDecodeToKnownValues) {
  auto cases = encoding_cases();
  for (const auto& c : cases) {
    if (std::string(c.name) == "f16") {
      EXPECT_EQ(c.expected.get_as_double(0), 1.0);
      EXPECT_EQ(c.expected.get_as_double(1), -2.0);
      EXPECT_EQ(c.expected.get_as_double(2), 65504.0);
      EXPECT_EQ(c.expected.get_as_double(3), std::ldexp(1.0, -24));
    }
    if (std::string(c.name) == "bf16") {
      EXPECT_EQ(c.expected.get_as_double(0), 1.0);
      EXPECT_EQ(c.expected.get_as_double(1), -3.0);
      EXPECT_EQ(c.expected.get_as_double(2), 3.140625);
    }
  }
}

TEST(OnnxIoTest, ExportKeepsEveryBitOfFloats) {
  uint32_t bits[4] = {0x7FC00001u /* NaN with payload */, 0x80000000u /* -0 */, 0x00000001u /* denormal */,
                      0xFF800000u /* -inf */};
  Tensor t(DataType::kFloat32, {4});
  std::memcpy(t.raw(), bits, sizeof(bits));
  Graph g;
  g.opset_imports[""] = 17;
  g.add_output(g.add_initializer("w", t, true));
  auto back = import_onnx_bytes(export_onnx_bytes(g), "");
  EXPECT_TRUE(back->value("w")->data().bitwise_equal(t));
}

TEST(OnnxIoTest, InitializerDataErrors) {
  {
    onnx::ModelProto m = empty_model();
    auto* t = add_init(m, "w", onnx::TensorProto::FLOAT, {3});
    t->add_float_data(1);
    t->add_float_data(2);
    add_output(m, "w");
    expect_error([&] { import_proto(m); }, {"initializer 'w'", "2 values", "float_data"});
  }
  {
    onnx::ModelProto m = empty_model();
    add_init(m, "w", onnx::TensorProto::FLOAT, {3})->set_raw_data(std::string(8, '\0'));
    add_output(m, "w");
    expect_error([&] { import_proto(m); }, {"initializer 'w'", "raw_data", "8 bytes", "12"});
  }
  {
    onnx::ModelProto m = empty_model();
    add_init(m, "names", onnx::TensorProto::STRING, {1})->add_string_data("hello");
    add_output(m, "names");
    expect_error([&] { import_proto(m); }, {"initializer 'names'", "STRING"});
  }
  {
    onnx::ModelProto m = empty_model();
    auto* c = add_init(m, "c64", onnx::TensorProto::COMPLEX64, {1});
    c->add_float_data(1);
    c->add_float_data(0);
    add_output(m, "c64");
    expect_error([&] { import_proto(m); }, {"initializer 'c64'", "COMPLEX64"});
  }
  {
    onnx::ModelProto m = empty_model();
    add_init(m, "neg", onnx::TensorProto::FLOAT, {-2});
    add_output(m, "neg");
    expect_error([&] { import_proto(m); }, {"initializer 'neg'", "negative"});
  }
  {
    // Absurd dims (as in a corrupt file) must not allocate.
    onnx::ModelProto m = empty_model();
    add_init(m, "huge", onnx::TensorProto::FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
    add_output(m, "huge");
    expect_error([&] { import_proto(m); }, {"initializer 'huge'", "more elements than int64 can count"});
  }
  {
    // 10^12 floats: refused by the per-tensor limit before anything is allocated.
    onnx::ModelProto m = empty_model();
    add_init(m, "big", onnx::TensorProto::FLOAT, {1000000, 1000000});
    add_output(m, "big");
    expect_error([&] { import_proto(m); }, {"initializer 'big'", "1000000000000 elements", "OTTER_MAX_TENSOR_BYTES"});
  }
}

// ---- external data ----------------------------------------------------------------------------------

onnx::ModelProto external_model(const std::string& location, int64_t offset, int64_t length) {
  onnx::ModelProto m = empty_model();
  auto* t = add_init(m, "w", onnx::TensorProto::FLOAT, {3});
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  kv("offset", std::to_string(offset));
  kv("length", std::to_string(length));
  add_output(m, "w");
  return m;
}

TEST(OnnxIoTest, ExternalDataRelativeToModelFolder) {
  TempDir dir;
  std::string data = std::string(16, 'x') + bytes_of(std::vector<float>{1.0f, -2.0f, 0.5f});
  write_file(dir.file("weights.bin"), data);
  write_file(dir.file("model.onnx"), serialize(external_model("weights.bin", 16, 12)));
  auto g = import_onnx_file(dir.file("model.onnx"));
  EXPECT_TRUE(g->value("w")->data().bitwise_equal(Tensor::from_vector<float>({3}, {1.0f, -2.0f, 0.5f})));
  // The same bytes with base_dir given explicitly.
  auto g2 = import_onnx_bytes(serialize(external_model("weights.bin", 16, 12)), dir.path().string());
  EXPECT_TRUE(g2->value("w")->data().bitwise_equal(g->value("w")->data()));
  // Export inlines the data.
  auto back = import_onnx_bytes(export_onnx_bytes(*g), "");
  EXPECT_TRUE(back->value("w")->data().bitwise_equal(g->value("w")->data()));
}

TEST(OnnxIoTest, ExternalDataMissingOrTooShort) {
  TempDir dir;
  write_file(dir.file("short.bin"), std::string(20, '\0'));
  write_file(dir.file("missing.onnx"), serialize(external_model("nothere.bin", 0, 12)));
  write_file(dir.file("short.onnx"), serialize(external_model("short.bin", 16, 12)));
  write_file(dir.file("badlen.onnx"), serialize(external_model("short.bin", 0, 8)));
  expect_error([&] { import_onnx_file(dir.file("missing.onnx")); }, {"initializer 'w'", "nothere.bin"});
  expect_error([&] { import_onnx_file(dir.file("short.onnx")); },
               {"initializer 'w'", "short.bin", "too short", "20 bytes"});
  expect_error([&] { import_onnx_file(dir.file("badlen.onnx")); }, {"initializer 'w'", "length 8"});
}

TEST(OnnxIoTest, ExternalDataMustStayInsideTheModelFolder) {
  TempDir dir;
  fs::create_directories(dir.file("model"));
  write_file(dir.file("outside.bin"), std::string(12, 'x'));
  write_file(dir.file("model/inside.bin"), std::string(12, 'y'));
  fs::create_symlink(dir.file("outside.bin"), dir.file("model/link.bin"));
  const std::string base = dir.file("model");
  expect_error([&] { import_onnx_bytes(serialize(external_model("../outside.bin", 0, 12)), base); },
               {"initializer 'w'", "'../outside.bin'", "outside the model's folder"});
  expect_error([&] { import_onnx_bytes(serialize(external_model(dir.file("outside.bin"), 0, 12)), base); },
               {"initializer 'w'", "is an absolute path"});
  expect_error([&] { import_onnx_bytes(serialize(external_model("link.bin", 0, 12)), base); },
               {"initializer 'w'", "'link.bin'", "outside the model's folder"});
  // A path that leaves and re-enters the folder is fine: it resolves inside.
  auto g = import_onnx_bytes(serialize(external_model("../model/inside.bin", 0, 12)), base);
  EXPECT_EQ(g->value("w")->data().nbytes(), 12u);
}

// ---- bad input --------------------------------------------------------------------------------------

TEST(OnnxIoTest, MissingFile) {
  TempDir dir;
  expect_error([&] { import_onnx_file(dir.file("nope.onnx")); }, {"nope.onnx", "no such file"});
}

TEST(OnnxIoTest, EmptyFile) {
  TempDir dir;
  write_file(dir.file("empty.onnx"), "");
  expect_error([&] { import_onnx_file(dir.file("empty.onnx")); }, {"empty.onnx", "empty"});
  expect_error([&] { import_onnx_bytes("", ""); }, {"empty"});
}

TEST(OnnxIoTest, TruncatedModel) {
  // A real model: 256 floats of weights and a graph around them.
  onnx::ModelProto m = empty_model();
  auto* t = add_init(m, "w", onnx::TensorProto::FLOAT, {256});
  for (int i = 0; i < 256; ++i) t->add_float_data(static_cast<float>(i));
  add_output(m, "w");
  std::string bytes = serialize(m);
  ASSERT_NO_THROW(import_onnx_bytes(bytes, ""));
  TempDir dir;
  write_file(dir.file("half.onnx"), bytes.substr(0, bytes.size() / 2));
  expect_error([&] { import_onnx_file(dir.file("half.onnx")); }, {"half.onnx", "not a valid ONNX model"});
  // And one of ONNX's own test models, where installed.
  const std::string relu = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx";
  if (fs::exists(relu)) {
    std::ifstream in(relu, std::ios::binary);
    std::string real((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_THROW(import_onnx_bytes(real.substr(0, real.size() / 2), ""), Error);
  }
}

TEST(OnnxIoTest, RandomBytes) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(16 + rng() % 2048, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    EXPECT_THROW(import_onnx_bytes(bytes, "", {}, "random"), Error) << "trial " << trial;
  }
}

TEST(OnnxIoTest, GarbageThatParsesAsProtobuf) {
  // A valid ModelProto without a graph, and one whose graph output is undefined.
  onnx::ModelProto m;
  m.set_ir_version(8);
  expect_error([&] { import_proto(m); }, {"no graph"});
  m = empty_model();
  add_output(m, "ghost");
  expect_error([&] { import_proto(m); }, {"graph output 'ghost'"});
}

TEST(OnnxIoTest, UnknownOpsAndDomainsAreListedTogether) {
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2] x) => (float[2] z)
{
  a = FooOp(x)
  b = com.microsoft.BarOp(a)
  q = BazOp(b)
  z = FooOp(q)
}
)");
  m.mutable_graph()->mutable_node(0)->set_name("n1");
  m.mutable_graph()->mutable_node(1)->set_name("n7");
  m.mutable_graph()->mutable_node(3)->set_name("n9");
  std::string msg = expect_error([&] { import_proto(m); },
                                 {"unsupported ops: ", "FooOp (node 'n1')", "com.microsoft.BarOp (node 'n7'",
                                  "BazOp (unnamed node, output 'q')", "FooOp (node 'n9')"});
  // One message, in node order.
  EXPECT_LT(msg.find("'n1'"), msg.find("'n7'"));
  EXPECT_LT(msg.find("'n7'"), msg.find("BazOp"));
}

TEST(OnnxIoTest, KnownOpAtUnsupportedOpset) {
  // Any default-domain op the table defines from some opset above the minimum only.
  const OpDef* late = nullptr;
  for (const OpDef* d : OpTable::instance().all())
    if (d->domain.empty() && !OpTable::instance().find("", d->op_type, kMinOnnxOpset)) {
      late = d;
      break;
    }
  if (!late) GTEST_SKIP() << "every op in the table exists at opset " << kMinOnnxOpset;
  onnx::ModelProto m = empty_model(kMinOnnxOpset);
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(late->op_type);
  n->set_name("late_node");
  n->add_output("y");
  add_output(m, "y");
  expect_error([&] { import_proto(m); },
               {late->op_type + " (node 'late_node'", "not supported at ai.onnx opset 13", "only at opsets"});
}

TEST(OnnxIoTest, OpsetOutOfRange) {
  for (int v : {22, 30}) {
    onnx::ModelProto m = empty_model(v);
    add_init(m, "c", onnx::TensorProto::FLOAT, {})->add_float_data(1);
    add_output(m, "c");
    expect_error([&] { import_proto(m); }, {"opset " + std::to_string(v), "13 to 21"});
  }
  {  // opsets 1..12 are upgraded to 13 by ONNX's version converter, and the graph says from which
    onnx::ModelProto m = empty_model(12);
    add_init(m, "c", onnx::TensorProto::FLOAT, {})->add_float_data(1);
    add_output(m, "c");
    auto g = import_proto(m);
    EXPECT_EQ(g->opset_imports.at(""), 13);
    EXPECT_EQ(g->upgraded_from_opset, 12);
  }
  onnx::ModelProto m = empty_model(17);
  auto* op = m.add_opset_import();
  op->set_domain("ai.otter");
  op->set_version(2);
  add_init(m, "c", onnx::TensorProto::FLOAT, {})->add_float_data(1);
  add_output(m, "c");
  expect_error([&] { import_proto(m); }, {"opset 2", "ai.otter"});
}

TEST(OnnxIoTest, DuplicateValueNames) {
  {
    onnx::ModelProto m = empty_model();
    add_init(m, "w", onnx::TensorProto::FLOAT, {})->add_float_data(1);
    add_init(m, "w", onnx::TensorProto::FLOAT, {})->add_float_data(2);
    add_output(m, "w");
    expect_error([&] { import_proto(m); }, {"duplicate value name 'w'"});
  }
  {
    onnx::ModelProto m = empty_model();
    for (int i = 0; i < 2; ++i) {
      auto* in = m.mutable_graph()->add_input();
      in->set_name("x");
      in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    }
    add_output(m, "x");
    expect_error([&] { import_proto(m); }, {"duplicate value name 'x'", "graph input 'x'"});
  }
}

TEST(OnnxIoTest, DuplicateNodeOutput) {
  REQUIRE_OPS("Relu");
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
{
  y = Relu(x)
  y = Relu(x)
}
)");
  m.mutable_graph()->mutable_node(1)->set_name("second");
  expect_error([&] { import_proto(m); }, {"duplicate value name 'y'", "Relu 'second'"});
  // A node output named like a graph input.
  m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] x)
{
  x = Relu(x)
}
)");
  expect_error([&] { import_proto(m); }, {"duplicate value name 'x'", "graph input 'x'"});
}

TEST(OnnxIoTest, UndefinedInputsAndCycles) {
  REQUIRE_OPS("Relu", "Add");
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
{
  y = Add(x, nowhere)
}
)");
  expect_error([&] { import_proto(m); }, {"'nowhere'", "Add (output 'y')"});
  m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
{
  y = Relu(x)
  p = Add(x, q)
  q = Relu(p)
}
)");
  m.mutable_graph()->mutable_node(1)->set_name("P");
  m.mutable_graph()->mutable_node(2)->set_name("Q");
  expect_error([&] { import_proto(m); }, {"cycle", "Add 'P'", "Relu 'Q'"});
}

TEST(OnnxIoTest, NodesAreSortedTopologically) {
  REQUIRE_OPS("Relu", "Neg");
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] z)
{
  z = Neg(y)
  y = Relu(x)
}
)");
  auto g = import_proto(m);
  std::vector<std::string> order;
  for (const auto& n : g->nodes()) order.push_back(n->op_type());
  EXPECT_EQ(order, (std::vector<std::string>{"Relu", "Neg"}));
  EXPECT_EQ(g->value("z")->type_string(), "f32[2]");
}

// Graph attributes are imported as subgraphs (tests/passes/control_flow_test.cc); one that says
// it is a graph but holds none is refused.
TEST(OnnxIoTest, EmptyGraphAttributeIsRefused) {
  REQUIRE_OPS("Relu");
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
{
  y = Relu(x)
}
)");
  auto* n = m.mutable_graph()->mutable_node(0);
  n->set_name("r");
  auto* a = n->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  expect_error([&] { import_proto(m); }, {"Relu 'r'", "attribute 'body' is a graph but holds none"});
}

TEST(OnnxIoTest, TextParseError) {
  expect_error([&] { import_onnx_text("<ir_version: 8> g (float[2] x => {"); }, {"cannot parse ONNX text", "ParseError"});
}

TEST(OnnxIoTest, NonTensorGraphInput) {
  onnx::ModelProto m = empty_model();
  auto* in = m.mutable_graph()->add_input();
  in->set_name("seq");
  in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  add_output(m, "seq");
  expect_error([&] { import_proto(m); }, {"graph input 'seq'", "tensor"});
  m = empty_model();
  in = m.mutable_graph()->add_input();
  in->set_name("s");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
  add_output(m, "s");
  expect_error([&] { import_proto(m); }, {"graph input 's'", "STRING"});
}

// ---- graph content ----------------------------------------------------------------------------------

TEST(OnnxIoTest, GraphInputDoublingAsInitializer) {
  onnx::ModelProto m = empty_model(13);
  auto add_in = [&](const char* name) {
    auto* in = m.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(4);
  };
  add_in("x");
  add_in("w");  // older exporters list initializers among the inputs
  auto* t = add_init(m, "w", onnx::TensorProto::FLOAT, {4});
  for (float v : {1.f, 2.f, 3.f, 4.f}) t->add_float_data(v);
  add_output(m, "w");
  add_output(m, "x");
  auto g = import_proto(m);
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->inputs()[0]->name(), "x");
  Value* w = g->value("w");
  EXPECT_EQ(w->kind(), ValueKind::kInitializer);
  EXPECT_TRUE(w->trainable());
  EXPECT_TRUE(w->data().bitwise_equal(Tensor::from_vector<float>({4}, {1, 2, 3, 4})));
  // Export lists it once, as an initializer only.
  onnx::ModelProto out;
  ASSERT_TRUE(out.ParseFromString(export_onnx_bytes(*g)));
  ASSERT_EQ(out.graph().input_size(), 1);
  EXPECT_EQ(out.graph().input(0).name(), "x");
}

TEST(OnnxIoTest, FloatInitializersTrainableOption) {
  onnx::ModelProto m = empty_model();
  add_init(m, "f", onnx::TensorProto::FLOAT, {})->add_float_data(1);
  add_init(m, "i", onnx::TensorProto::INT64, {})->add_int64_data(1);
  add_output(m, "f");
  add_output(m, "i");
  ImportOptions opts;
  EXPECT_TRUE(import_proto(m, "", opts)->value("f")->trainable());
  EXPECT_FALSE(import_proto(m, "", opts)->value("i")->trainable());
  opts.float_initializers_trainable = false;
  EXPECT_FALSE(import_proto(m, "", opts)->value("f")->trainable());
}

TEST(OnnxIoTest, ConstantNodesKeepTheirAttributes) {
  REQUIRE_OPS("Constant");
  auto g = import_onnx_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g () => (float[2] c1, float c2, int64[3] c3, int64 c4, float[2] c5)
{
  c1 = Constant<value = float[2] {1.5, -2.0}>()
  c2 = Constant<value_float = 2.5>()
  c3 = Constant<value_ints = [1, 2, 3]>()
  c4 = Constant<value_int = 7>()
  c5 = Constant<value_floats = [0.5, 0.25]>()
}
)");
  ASSERT_EQ(g->nodes().size(), 5u);  // not folded at import
  auto attr = [&](const char* out, const char* key) -> const Attribute& {
    const Attribute* a = g->value(out)->producer()->find_attr(key);
    EXPECT_NE(a, nullptr) << out << "." << key;
    static const Attribute dummy;
    return a ? *a : dummy;
  };
  EXPECT_EQ(attr("c1", "value").kind(), Attribute::Kind::kTensor);
  EXPECT_TRUE(attr("c1", "value").t().bitwise_equal(Tensor::from_vector<float>({2}, {1.5f, -2.0f})));
  EXPECT_EQ(attr("c2", "value_float").kind(), Attribute::Kind::kFloat);
  EXPECT_EQ(attr("c2", "value_float").f(), 2.5f);
  EXPECT_EQ(attr("c3", "value_ints").ints(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(attr("c4", "value_int").i(), 7);
  EXPECT_EQ(attr("c5", "value_floats").floats(), (std::vector<float>{0.5f, 0.25f}));
  auto back = import_onnx_bytes(export_onnx_bytes(*g), "");
  EXPECT_EQ(graph_to_string(*back), graph_to_string(*g));
}

TEST(OnnxIoTest, AllAttributeKindsRoundTrip) {
  REQUIRE_OPS("Relu");
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
{
  y = Relu<f = 0.75, i = -3, s = "hello", fs = [1.0, 2.0], is = [4, 5], ss = ["a", "b"], t = int64[2] {8, 9}>(x)
}
)");
  auto g = import_proto(m, "", [] { ImportOptions o; o.infer_shapes = false; return o; }());
  const Node* n = g->value("y")->producer();
  EXPECT_EQ(n->find_attr("f")->f(), 0.75f);
  EXPECT_EQ(n->find_attr("i")->i(), -3);
  EXPECT_EQ(n->find_attr("s")->s(), "hello");
  EXPECT_EQ(n->find_attr("fs")->floats(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(n->find_attr("is")->ints(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(n->find_attr("ss")->strings(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(n->find_attr("t")->t().bitwise_equal(Tensor::from_vector<int64_t>({2}, {8, 9})));
  auto back = import_onnx_bytes(export_onnx_bytes(*g), "", [] { ImportOptions o; o.infer_shapes = false; return o; }());
  const Node* n2 = back->value("y")->producer();
  EXPECT_EQ(n2->attrs(), n->attrs());
}

TEST(OnnxIoTest, DeclaredTypesWithoutInference) {
  REQUIRE_OPS("Relu");
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[3, N, ?] x) => (float[3, N, ?] y) <float[3, N, 5] a>
{
  a = Relu(x)
  b = Relu(a)
  y = Relu(b)
}
)");
  ImportOptions opts;
  opts.infer_shapes = false;
  auto g = import_proto(m, "", opts);
  EXPECT_EQ(g->value("x")->type_string(), "f32[3,N,?]");
  EXPECT_EQ(g->value("a")->type_string(), "f32[3,N,5]");
  EXPECT_EQ(g->value("b")->type_string(), "?[...]");  // nothing declared, nothing inferred
  EXPECT_EQ(g->value("y")->type_string(), "f32[3,N,?]");
  for (const auto& n : g->nodes()) EXPECT_EQ(n->opset(), 15);
}

TEST(OnnxIoTest, InferenceFillsTypesAndValueInfoFillsUnknownRank) {
  REQUIRE_OPS("Relu", "Reshape");
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x, int64[?] s) => (float[N, 4] z) %s
{
  y = Reshape(x, s)
  z = Relu(x)
}
)";
  std::string plain(text);
  plain.replace(plain.find(" %s"), 3, "");
  auto g = import_onnx_text(plain.c_str());
  EXPECT_EQ(g->value("z")->type_string(), "f32[N,4]");
  if (g->value("y")->shape().rank_known) GTEST_SKIP() << "inference knows the rank of Reshape by a fed shape";
  std::string with_info(text);
  with_info.replace(with_info.find(" %s"), 3, " <float[N, 2, 2] y>");
  auto g2 = import_onnx_text(with_info.c_str());
  EXPECT_EQ(g2->value("y")->type_string(), "f32[N,2,2]");
}

TEST(OnnxIoTest, GraphOutputDtypeMustAgreeWithInference) {
  REQUIRE_OPS("Relu");
  expect_error([&] {
    import_onnx_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (int64[2] y)
{
  y = Relu(x)
}
)");
  }, {"graph output 'y'", "i64", "f32"});
}

TEST(OnnxIoTest, OmittedOptionalInputsAndOutputs) {
  REQUIRE_OPS("Clip", "Dropout");
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y, float[2] d) <float hi = {1.0}>
{
  y = Clip(x, , hi)
  d = Dropout(y)
}
)");
  m.mutable_graph()->mutable_node(1)->add_output("");  // an omitted mask output
  auto g = import_proto(m);
  const Node* clip = g->value("y")->producer();
  ASSERT_EQ(clip->num_inputs(), 3);
  EXPECT_EQ(clip->input(1), nullptr);
  EXPECT_EQ(clip->input(2), g->value("hi"));
  const Node* drop = g->value("d")->producer();
  ASSERT_EQ(drop->num_outputs(), 2);
  EXPECT_EQ(drop->output(1), nullptr);
  auto back = import_onnx_bytes(export_onnx_bytes(*g), "");
  EXPECT_EQ(graph_to_string(*back), graph_to_string(*g));
  EXPECT_TRUE(contains(graph_to_string(*g), "Clip(%x, _, %hi)")) << graph_to_string(*g);
}

const char* kBnText = R"(
<ir_version: 8, opset_import: ["" : 15]>
bn (float[2, 3, 4, 4] x) => (float[2, 3, 4, 4] y)
  <float[3] scale = {1.0, 1.0, 1.0}, float[3] bias = {0.0, 0.0, 0.0},
   float[3] mean = {0.0, 0.5, 1.0}, float[3] var = {1.0, 2.0, 3.0}>
{
  y, mean_out, var_out = BatchNormalization<epsilon = 0.00001, momentum = 0.9, training_mode = 1>(x, scale, bias, mean, var)
}
)";

TEST(OnnxIoTest, BatchNormTrainingModeMakesStateAndUpdates) {
  REQUIRE_OPS("BatchNormalization");
  auto g = import_onnx_text(kBnText);
  Value* mean = g->value("mean");
  Value* var = g->value("var");
  EXPECT_EQ(mean->kind(), ValueKind::kState);
  EXPECT_EQ(var->kind(), ValueKind::kState);
  EXPECT_EQ(g->value("scale")->kind(), ValueKind::kInitializer);
  EXPECT_TRUE(g->value("scale")->trainable());
  EXPECT_TRUE(g->value("bias")->trainable());
  EXPECT_EQ(g->state_updates.size(), 2u);
  EXPECT_EQ(g->state_updates.at(mean), g->value("mean_out"));
  EXPECT_EQ(g->state_updates.at(var), g->value("var_out"));
  EXPECT_TRUE(mean->data().bitwise_equal(Tensor::from_vector<float>({3}, {0.0f, 0.5f, 1.0f})));
  std::string p = graph_to_string(*g);
  EXPECT_TRUE(contains(p, "  state %mean: f32[3]\n")) << p;
  EXPECT_TRUE(contains(p, "  update %mean <- %mean_out\n")) << p;
  EXPECT_TRUE(contains(p, "  update %var <- %var_out\n")) << p;
  auto back = import_onnx_bytes(export_onnx_bytes(*g), "");
  EXPECT_EQ(graph_to_string(*back), p);
}

TEST(OnnxIoTest, BatchNormWithoutTrainingModeKeepsInitializers) {
  REQUIRE_OPS("BatchNormalization");
  std::string text(kBnText);
  text.replace(text.find("training_mode = 1"), 17, "training_mode = 0");
  text.replace(text.find("y, mean_out, var_out"), 20, "y");
  auto g = import_onnx_text(text.c_str());
  EXPECT_EQ(g->value("mean")->kind(), ValueKind::kInitializer);
  EXPECT_TRUE(g->state().empty());
  EXPECT_TRUE(g->state_updates.empty());
}

TEST(OnnxIoTest, BatchNormOmittedMeanOutput) {
  REQUIRE_OPS("BatchNormalization");
  onnx::ModelProto m = parse_text(kBnText);
  m.mutable_graph()->mutable_node(0)->set_output(1, "");
  auto g = import_proto(m);
  EXPECT_EQ(g->value("mean")->kind(), ValueKind::kState);
  EXPECT_EQ(g->state_updates.count(g->value("mean")), 0u);
  EXPECT_EQ(g->state_updates.at(g->value("var")), g->value("var_out"));
}

// ---- tensor files -----------------------------------------------------------------------------------

TEST(OnnxIoTest, ReadTensorPbFile) {
  TempDir dir;
  onnx::TensorProto t;
  t.set_name("input_0");
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(2);
  t.add_dims(3);
  for (int64_t v : {1, -2, 3, -4, 5, -6}) t.add_int64_data(v);
  std::string bytes;
  ASSERT_TRUE(t.SerializeToString(&bytes));
  write_file(dir.file("input_0.pb"), bytes);
  std::string name;
  Tensor x = read_tensor_pb_file(dir.file("input_0.pb"), &name);
  EXPECT_EQ(name, "input_0");
  EXPECT_TRUE(x.bitwise_equal(Tensor::from_vector<int64_t>({2, 3}, {1, -2, 3, -4, 5, -6})));
  expect_error([&] { read_tensor_pb_file(dir.file("missing.pb")); }, {"missing.pb"});
  write_file(dir.file("junk.pb"), "\xff\xff\xff\xff");
  expect_error([&] { read_tensor_pb_file(dir.file("junk.pb")); }, {"junk.pb"});
  write_file(dir.file("empty.pb"), "");
  expect_error([&] { read_tensor_pb_file(dir.file("empty.pb")); }, {"empty.pb", "empty"});
}

TEST(OnnxIoTest, ReadBackendTestData) {
  const std::string dir = "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0/";
  if (!fs::exists(dir + "input_0.pb")) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string in_name, out_name;
  Tensor in = read_tensor_pb_file(dir + "input_0.pb", &in_name);
  Tensor out = read_tensor_pb_file(dir + "output_0.pb", &out_name);
  EXPECT_EQ(in_name, "x");
  EXPECT_EQ(out_name, "y");
  ASSERT_EQ(in.dtype(), DataType::kFloat32);
  ASSERT_EQ(in.dims(), out.dims());
  // The recorded output is |input|, element by element.
  for (int64_t i = 0; i < in.numel(); ++i) EXPECT_EQ(out.get_as_double(i), std::fabs(in.get_as_double(i))) << i;
}

}  // namespace
}  // namespace otter
