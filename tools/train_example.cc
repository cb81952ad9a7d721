// The C++ training API in a few lines: create a session, take some optimizer steps, evaluate, save
// a checkpoint and export the trained model.
//
//   train_example MODEL.onnx TRAIN.npz TEST.npz OUT_DIR
#include <cstdio>
#include <exception>

#include "runtime/training_session.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: train_example MODEL.onnx TRAIN.npz TEST.npz OUT_DIR\n");
    return 2;
  }
  try {
    otter::TrainingOptions opts;
    opts.batch_size = 16;                       // micro-batch b
    opts.pipeline.accum = 2;                    // K: each step takes 2 x 16 samples
    opts.pipeline.optimizer.type = otter::OptimizerType::kAdamW;
    opts.pipeline.optimizer.lr = 0.01;
    auto session = otter::TrainingSession::create(argv[1], opts);
    std::printf("pipeline: %s\n", session->pipeline().c_str());

    otter::Dataset train = otter::Dataset::from_npz(argv[2], session->batch_inputs());
    otter::Dataset test = otter::Dataset::from_npz(argv[3], session->batch_inputs());
    otter::DataLoader loader(train, session->global_batch(), /*shuffle=*/true, /*seed=*/0);
    for (int i = 0; i < 40; ++i) {
      otter::StepResult r = session->train_step(loader.next());
      if (r.step % 10 == 0) std::printf("step %lld  loss %.4f  lr %g\n", static_cast<long long>(r.step), r.loss, r.lr);
    }
    otter::EvalResult e = session->evaluate(test);
    std::printf("test loss %.4f  accuracy %.2f%%\n", e.loss, 100 * e.accuracy);

    const std::string out = argv[4];
    session->save(out + "/checkpoint", loader.state());
    session->export_inference(out + "/trained.onnx");
    std::printf("wrote %s/checkpoint and %s/trained.onnx\n", out.c_str(), out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
