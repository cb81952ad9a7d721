// otter-bench's data-parallel side (see bench_dp.h).
#include "tools/bench_dp.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "graph/error.h"
#include "kernels/collective.h"
#include "runtime/distributed.h"
#include "runtime/json.h"
#include "runtime/memory_budget.h"

namespace otter {

std::string run_child(const std::string& cmd, const std::string& what) {
  FILE* p = popen(cmd.c_str(), "r");
  OTTER_CHECK(p, "otter-bench: cannot start ", cmd);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = pclose(p);
  OTTER_CHECK(rc == 0, "otter-bench: ", what, " failed (exit status ", WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, "): ", cmd,
              "\n", out);
  return out;
}

namespace {

std::string mib(int64_t bytes) { return mib_text(bytes) + " (" + std::to_string(bytes) + " B)"; }

}  // namespace

double comm_seconds() {
  const World& w = world();
  return (w.host ? w.host->busy_seconds : 0) + (w.device ? w.device->busy_seconds : 0);
}

DpFigures run_under_mpirun(int64_t ranks, int argc, char** argv) {
  std::ostringstream cmd;
  cmd << "mpirun -np " << ranks << " --oversubscribe --mca pml ob1 --mca btl self,tcp"
      << (getuid() == 0 ? " --allow-run-as-root" : "") << " '"
      << std::filesystem::read_symlink("/proc/self/exe").string() << "'";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ranks") {
      ++i;
      continue;
    }
    if (a != "--json") cmd << " '" << a << "'";
  }
  cmd << " --json";
  const std::string out = run_child(cmd.str(), "the data-parallel run");
  const size_t at = out.rfind('{');
  OTTER_CHECK(at != std::string::npos, "otter-bench: no JSON line from ", cmd.str(), "\n", out);
  auto j = parse_flat_json(out.substr(at), "the rank 0 output of " + cmd.str());
  auto num = [&](const char* k) {
    OTTER_CHECK(j.count(k), "otter-bench: no '", k, "' in the rank 0 output of ", cmd.str());
    return std::stod(j.at(k));
  };
  return {num("ms_per_step"), num("ms_min"), num("ms_max"), num("comm_ms_per_step"),
          static_cast<int64_t>(num("optimizer_state_bytes")), static_cast<int64_t>(num("weight_bytes"))};
}

void print_dp_comparison(const std::string& header, int64_t ranks, int64_t accum, bool zero, const DpFigures& single,
                         const DpFigures& job) {
  std::printf("%s\n", header.c_str());
  std::printf("  1 process, accum %lld: %9.2f ms/step (min %.2f, max %.2f), optimizer state %s, fp32 weights %s\n",
              static_cast<long long>(ranks * accum), single.ms, single.ms_min, single.ms_max,
              mib(single.state_bytes).c_str(), mib(single.weight_bytes).c_str());
  std::printf(
      "  %lld ranks, accum %lld%s: %9.2f ms/step (min %.2f, max %.2f), communication %.2f ms/step (%.1f%%), "
      "optimizer state per rank %s, fp32 weights per rank %s\n",
      static_cast<long long>(ranks), static_cast<long long>(accum), zero ? ", zero 1" : "", job.ms, job.ms_min,
      job.ms_max, job.comm_ms, 100 * job.comm_ms / job.ms, mib(job.state_bytes).c_str(), mib(job.weight_bytes).c_str());
  std::printf("  step time %lld ranks / 1 process: %.2f; compute share %.2f, communication share %.2f\n",
              static_cast<long long>(ranks), job.ms / single.ms, (job.ms - job.comm_ms) / single.ms,
              job.comm_ms / single.ms);
}

int rank_guarded_main(int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    const DistributedInfo d = distributed_info();
    std::cerr << "error" << (d.size > 1 ? str_cat(" (rank ", d.rank, " of ", d.size, ")") : "") << ": " << e.what()
              << "\n";
    if (d.size > 1) abort_distributed(1);  // the other ranks would wait for this one
    return 1;
  }
}

}  // namespace otter
