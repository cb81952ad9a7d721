// Checkpoints: bitwise-exact resume, saves interrupted midway (an error, a killed writer, a crash
// between the fallback's two renames), and checkpoints that must be refused.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "runtime/checkpoint.h"
#include "runtime/json.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

namespace fs = std::filesystem;

// The CNN (BatchNorm running statistics), shuffled batches, K=2, AdamW with a cosine schedule.
TrainingOptions cnn_options() {
  TrainingOptions o;
  o.batch_size = 16;
  o.seed = 7;
  o.pipeline.accum = 2;
  o.pipeline.optimizer.lr = 0.01;
  o.pipeline.optimizer.schedule = LrSchedule::kCosine;
  o.pipeline.optimizer.warmup = 2;
  o.pipeline.optimizer.total = 8;
  return o;
}

struct TrainRun {
  std::unique_ptr<TrainingSession> session;
  std::unique_ptr<Dataset> data;
  std::unique_ptr<DataLoader> loader;
  explicit TrainRun(const TrainingOptions& o = cnn_options(), const std::string& model = "digits/cnn.onnx",
               const std::string& data_file = "digits/train_img.npz") {
    session = TrainingSession::create(model_file(model), o);
    data = std::make_unique<Dataset>(Dataset::from_npz(model_file(data_file), session->batch_inputs()));
    loader = std::make_unique<DataLoader>(*data, session->global_batch(), true, static_cast<uint64_t>(o.seed));
  }
  void steps(int n) {
    for (int i = 0; i < n; ++i) ASSERT_FALSE(session->train_step(loader->next()).skipped);
  }
  void save(const std::string& dir) { session->save(dir, loader->state()); }
};

void expect_same_state(const TrainingSession& a, const TrainingSession& b) {
  ASSERT_EQ(a.state_names(), b.state_names());
  for (const std::string& n : a.state_names())
    EXPECT_TRUE(a.tensor(n).bitwise_equal(b.tensor(n))) << n << " differs: " << rel_err(a.tensor(n), b.tensor(n));
}

TEST(Checkpoint, ResumeIsBitwiseExact) {
  TempDir tmp;
  const std::string dir = tmp.path + "/ckpt";
  TrainRun straight;
  straight.steps(8);
  {
    TrainRun first;
    first.steps(4);
    first.save(dir);
  }
  TrainRun resumed;
  resumed.loader->set_state(resumed.session->load(dir));
  EXPECT_EQ(resumed.session->steps_taken(), 4);
  resumed.steps(4);
  EXPECT_EQ(resumed.session->steps_taken(), 8);
  expect_same_state(*straight.session, *resumed.session);
  EXPECT_GT(max_abs(straight.session->tensor("bn1.running_mean")), 0);
  EXPECT_EQ(straight.session->tensor("optimizer.step").get_as_double(0), 8);
}

TEST(Checkpoint, TheDirectoryHoldsStateAndMetadata) {
  TempDir tmp;
  const std::string dir = tmp.path + "/ckpt";
  TrainRun r;
  r.steps(3);
  r.save(dir);
  Checkpoint c = read_checkpoint(dir);
  EXPECT_EQ(c.meta.version, kCheckpointVersion);
  EXPECT_EQ(c.meta.step, 3);
  EXPECT_EQ(c.meta.loader.epoch, 0);
  EXPECT_EQ(c.meta.loader.position, 3);
  EXPECT_EQ(c.meta.batch_size, 16);
  EXPECT_EQ(c.meta.accum, 2);
  EXPECT_EQ(c.meta.pipeline, r.session->pipeline());
  std::set<std::string> names;
  for (const auto& [n, t] : c.tensors) names.insert(n);
  for (const char* n : {"conv1.weight", "conv1.weight.exp_avg", "conv1.weight.exp_avg_sq", "bn1.running_mean",
                        "bn1.running_var", "optimizer.step"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_FALSE(names.count("conv1.weight.grad.acc"));  // rewritten by the next step's first micro-batch
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
}

// A linear classifier on the digits with training-mode Dropout, written to `path`: its steps depend
// on the Dropout generator, which a checkpoint must carry.
void write_dropout_model(const std::string& path) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.add_input("x", DataType::kFloat32, Shape({Dim("N"), Dim(64)}));
  std::vector<float> w(640);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>((i * 37) % 17) - 0.08f;
  Value* wv = g.add_initializer("w", Tensor::from_vector<float>({10, 64}, w), true);
  Value* ratio = g.add_initializer("ratio", Tensor::scalar<float>(0.5f), false);
  Tensor on(DataType::kBool, {});
  on.data<bool>()[0] = true;
  Value* train = g.add_initializer("training_mode", on, false);
  Node* gemm = g.add_node("Gemm", {x, wv}, {"h"});
  gemm->set_attr("transB", Attribute(int64_t{1}));
  g.add_node("Dropout", {gemm->output(0), ratio, train}, {"logits", "mask"});
  for (Node* n : g.node_list()) n->set_opset(17);
  for (Node* n : g.node_list()) infer_node(*n);
  g.add_output(g.value("logits"));
  export_onnx_file(g, path);
}

TEST(Checkpoint, ResumeRestoresTheDropoutGenerator) {
  TempDir tmp;
  const std::string model = tmp.path + "/dropout.onnx", dir = tmp.path + "/ckpt";
  write_dropout_model(model);
  TrainingOptions o;
  o.batch_size = 32;
  o.seed = 5;
  TrainRun straight(o, model, "digits/train.npz"), first(o, model, "digits/train.npz");
  straight.steps(4);
  first.steps(2);
  first.save(dir);
  TrainRun resumed(o, model, "digits/train.npz");
  resumed.loader->set_state(resumed.session->load(dir));
  resumed.steps(2);
  expect_same_state(*straight.session, *resumed.session);
  // The control: the same checkpoint with the generator of a fresh session (as if it were not
  // saved) draws other masks, so the last two steps differ.
  Checkpoint c = read_checkpoint(dir);
  std::ostringstream fresh;
  fresh << std::mt19937_64(5);
  c.meta.rng = fresh.str();
  TrainRun control(o, model, "digits/train.npz");
  control.session->restore(c);
  control.loader->set_state(c.meta.loader);
  control.steps(2);
  EXPECT_FALSE(control.session->tensor("w").bitwise_equal(straight.session->tensor("w")));
}

// Saves checkpoint A (3 steps), trains on, then lets `interrupt` break a save of B midway: A must
// still load, and a later save must work.
void check_interrupted(const std::function<void(TrainingSession&, const std::string&, const LoaderState&)>& interrupt) {
  TempDir tmp;
  const std::string dir = tmp.path + "/ckpt";
  TrainRun r;
  r.steps(3);
  r.save(dir);
  Tensor at_a = r.session->tensor("conv1.weight");
  r.steps(2);
  interrupt(*r.session, dir, r.loader->state());
  TrainRun back;
  LoaderState l = back.session->load(dir);
  EXPECT_EQ(back.session->steps_taken(), 3);
  EXPECT_EQ(l.position, 3);
  EXPECT_TRUE(back.session->tensor("conv1.weight").bitwise_equal(at_a));
  r.save(dir);
  TrainRun again;
  again.session->load(dir);
  EXPECT_EQ(again.session->steps_taken(), 5);
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
}

TEST(Checkpoint, AFailedSaveKeepsThePreviousOne) {
  check_interrupted([](TrainingSession& s, const std::string& dir, const LoaderState& l) {
    std::string e = error_of([&] {
      write_checkpoint(dir, s.checkpoint(l), [](const std::string& file) {
        if (file == "state.npz") fail("injected failure after ", file);
      });
    });
    EXPECT_NE(e.find("injected failure"), std::string::npos) << e;
  });
}

TEST(Checkpoint, AWriterKilledMidwayKeepsThePreviousOne) {
  check_interrupted([](TrainingSession& s, const std::string& dir, const LoaderState& l) {
    Checkpoint c = s.checkpoint(l);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // the writer: dies once the tensors are written, before the metadata
      write_checkpoint(dir, c, [](const std::string& file) {
        if (file == "state.npz") ::raise(SIGKILL);
      });
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    EXPECT_TRUE(fs::exists(dir + ".tmp/state.npz"));  // the half-written save it left
  });
}

TEST(Checkpoint, ACrashBetweenTheFallbackRenamesIsRecoveredOnLoad) {
  // Where the file system cannot exchange directories, a save moves DIR to DIR.old before DIR.tmp
  // takes its name; a crash in between leaves DIR.old alone.
  check_interrupted([](TrainingSession&, const std::string& dir, const LoaderState&) {
    fs::rename(dir, dir + ".old");
  });
}

// ---- refused checkpoints -------------------------------------------------------------------------

class BadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path + "/ckpt";
    run_.steps(2);
    good_ = run_.session->checkpoint(run_.loader->state());
  }
  // Writes `c`, loads it into a fresh session, and returns the error; the session must be untouched.
  std::string load_error(const Checkpoint& c) {
    write_checkpoint(dir_, c);
    TrainRun fresh;
    Tensor before = fresh.session->tensor("conv1.weight");
    std::string e = error_of([&] { fresh.session->load(dir_); });
    EXPECT_TRUE(fresh.session->tensor("conv1.weight").bitwise_equal(before));
    EXPECT_EQ(fresh.session->steps_taken(), 0);
    return e;
  }
  TempDir tmp_;
  std::string dir_;
  TrainRun run_;
  Checkpoint good_;
};

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST_F(BadCheckpoint, MissingAndExtraTensors) {
  Checkpoint c = good_;
  c.tensors.erase(c.tensors.begin());  // conv1.weight
  c.tensors.emplace_back("stray", Tensor::scalar<float>(1));
  std::string e = load_error(c);
  EXPECT_HAS(e, "missing tensor 'conv1.weight'");
  EXPECT_HAS(e, "unexpected tensor 'stray'");
}

TEST_F(BadCheckpoint, ShapeAndDtypeMismatches) {
  Checkpoint c = good_;
  for (auto& [n, t] : c.tensors) {
    if (n == "fc.bias") t = Tensor(DataType::kFloat32, {11});
    if (n == "optimizer.step") t = Tensor::scalar<float>(2);
  }
  std::string e = load_error(c);
  EXPECT_HAS(e, "tensor 'fc.bias' is f32[11], the session has f32[10]");
  EXPECT_HAS(e, "tensor 'optimizer.step' is f32[], the session has i64[]");
}

TEST_F(BadCheckpoint, AnotherModel) {
  TrainRun mlp(TrainingOptions(), "digits/mlp.onnx", "digits/train.npz");
  std::string e = load_error(mlp.session->checkpoint());
  EXPECT_HAS(e, "written for another model");
  EXPECT_HAS(e, "mlp.onnx");
}

TEST_F(BadCheckpoint, AnotherBatchSize) {
  Checkpoint c = good_;
  c.meta.batch_size = 8;
  EXPECT_HAS(load_error(c), "batch size 8");
}

// A checkpoint of a data-parallel job (checkpoint.json "ranks") resumes only in a job of the same
// N; files written before the field existed read as one rank.
TEST_F(BadCheckpoint, AnotherRankCount) {
  Checkpoint c = good_;
  c.meta.ranks = 2;
  EXPECT_HAS(load_error(c), "written by a data-parallel job of 2 ranks, and this job has 1: resume it under mpirun -np 2");
  auto [meta, state] = serialize_checkpoint(good_);
  EXPECT_HAS(meta, "\"ranks\": 1");
  const size_t at = meta.find("\"ranks\": 1, ");
  ASSERT_NE(at, std::string::npos) << meta;
  meta.erase(at, std::string("\"ranks\": 1, ").size());
  EXPECT_EQ(parse_checkpoint(meta, state, "old checkpoint").meta.ranks, 1);
  c.meta.ranks = 3;
  auto [meta3, state3] = serialize_checkpoint(c);
  EXPECT_EQ(parse_checkpoint(meta3, state3, "three ranks").meta.ranks, 3);
}

TEST_F(BadCheckpoint, NotACheckpoint) {
  std::string e = error_of([&] { run_.session->load(tmp_.path + "/nowhere"); });
  EXPECT_HAS(e, "does not exist");
  fs::create_directories(dir_);
  e = error_of([&] { run_.session->load(dir_); });
  EXPECT_HAS(e, "no checkpoint.json");
  std::ofstream(dir_ + "/checkpoint.json") << "{\"format\": \"something else\"}";
  e = error_of([&] { run_.session->load(dir_); });
  EXPECT_HAS(e, "not an otter checkpoint");
  std::ofstream(dir_ + "/checkpoint.json") << "{\"format\": \"otter-checkpoint\", \"version\": 99}";
  e = error_of([&] { run_.session->load(dir_); });
  EXPECT_HAS(e, "format version 99");
  std::ofstream(dir_ + "/checkpoint.json") << "{\"format\": \"otter-checkpoint\", ";
  e = error_of([&] { run_.session->load(dir_); });
  EXPECT_HAS(e, "not a flat JSON object");
}

TEST_F(BadCheckpoint, ASaveNeverReplacesADirectoryThatIsNoCheckpoint) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/notes.txt") << "mine";
  std::string e = error_of([&] { run_.save(dir_); });
  EXPECT_HAS(e, "is not an otter checkpoint; refusing to replace it");
  EXPECT_TRUE(fs::exists(dir_ + "/notes.txt"));
}

TEST(Json, FlatObjectsRoundTrip) {
  std::string text = JsonObject().add("a", "x\"y\n").add("b", 0.1).add("c", int64_t{-3}).add("d", true).str();
  auto j = parse_flat_json(text, "test");
  EXPECT_EQ(j.at("a"), "x\"y\n");
  EXPECT_EQ(std::stod(j.at("b")), 0.1);
  EXPECT_EQ(j.at("c"), "-3");
  EXPECT_EQ(j.at("d"), "true");
  EXPECT_EQ(JsonObject().add("nan", NAN).str(), "{\"nan\": null}");
}

}  // namespace
}  // namespace otter
