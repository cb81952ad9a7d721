// Checkpoint directories (see checkpoint.h).
#include "runtime/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/error.h"
#include "runtime/json.h"
#include "runtime/npz.h"

namespace otter {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "otter-checkpoint";
constexpr const char* kMetaFile = "checkpoint.json";
constexpr const char* kStateFile = "state.npz";

// Flushes a file or directory to disk, so a completed rename never exposes unwritten data.
void sync_path(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("checkpoint: cannot open '", p.string(), "' to sync it: ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) fail("checkpoint: cannot sync '", p.string(), "': ", std::strerror(err));
}

std::string meta_to_json(const CheckpointMeta& m) {
  JsonObject o;
  o.add("format", kFormat)
      .add("version", m.version)
      .add("model", m.model)
      .add("fingerprint", m.fingerprint)
      .add("pipeline", m.pipeline)
      .add("batch_size", m.batch_size)
      .add("accum", m.accum)
      .add("ranks", m.ranks)
      .add("seed", m.seed)
      .add("step", m.step)
      .add("epoch", m.loader.epoch)
      .add("loader_position", m.loader.position)
      .add("rng", m.rng);
  return o.str() + "\n";
}

int64_t to_int(const std::map<std::string, std::string>& j, const std::string& key, const std::string& what) {
  auto it = j.find(key);
  OTTER_CHECK(it != j.end(), what, ": no '", key, "'");
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  OTTER_CHECK(!it->second.empty() && *end == 0, what, ": '", key, "' is not an integer: ", it->second);
  return v;
}

std::string to_string(const std::map<std::string, std::string>& j, const std::string& key, const std::string& what) {
  auto it = j.find(key);
  OTTER_CHECK(it != j.end(), what, ": no '", key, "'");
  return it->second;
}

CheckpointMeta meta_from_json(const std::string& text, const std::string& what) {
  auto j = parse_flat_json(text, what);
  auto format = j.find("format");
  OTTER_CHECK(format != j.end() && format->second == kFormat, what, ": not an otter checkpoint (format is not '",
              kFormat, "')");
  CheckpointMeta m;
  m.version = to_int(j, "version", what);
  OTTER_CHECK(m.version == kCheckpointVersion, what, ": format version ", m.version, ", this otter reads version ",
              kCheckpointVersion);
  m.model = to_string(j, "model", what);
  m.fingerprint = to_string(j, "fingerprint", what);
  m.pipeline = to_string(j, "pipeline", what);
  m.batch_size = to_int(j, "batch_size", what);
  m.accum = to_int(j, "accum", what);
  m.ranks = j.count("ranks") ? to_int(j, "ranks", what) : 1;
  m.seed = to_int(j, "seed", what);
  m.step = to_int(j, "step", what);
  m.loader.epoch = to_int(j, "epoch", what);
  m.loader.position = to_int(j, "loader_position", what);
  m.rng = to_string(j, "rng", what);
  return m;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  OTTER_CHECK(out, "cannot write '", p.string(), "': ", std::strerror(errno));
}

// OTTER_FAULT_INJECT=checkpoint-write makes every save fail after its state file is written, as a
// full disk would, so that tests can check that the previous checkpoint survives.
void maybe_inject_write_fault(const fs::path& file) {
  const char* f = std::getenv("OTTER_FAULT_INJECT");
  if (f && std::string(f) == "checkpoint-write")
    fail("cannot write '", file.string(), "': ", std::strerror(ENOSPC), " (injected by OTTER_FAULT_INJECT=checkpoint-write)");
}

bool complete(const fs::path& dir) { return fs::is_regular_file(dir / kMetaFile); }

// Puts the finished `tmp` in place of `dir`; see the header for the two ways.
void swap_in(const fs::path& tmp, const fs::path& dir, const fs::path& aside) {
  if (!fs::exists(dir)) {
    fs::rename(tmp, dir);
    fs::remove_all(aside);  // a previous checkpoint that a crashed save had moved aside
    return;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp);  // now the previous checkpoint
    return;
  }
  OTTER_CHECK(errno == EINVAL || errno == ENOSYS || errno == ENOTSUP, "checkpoint: cannot replace '", dir.string(),
              "': ", std::strerror(errno));
  fs::remove_all(aside);
  fs::rename(dir, aside);
  fs::rename(tmp, dir);
  fs::remove_all(aside);
}

}  // namespace

void write_checkpoint(const std::string& dir_name, const Checkpoint& c, const CheckpointHook& hook) {
  OTTER_CHECK(!dir_name.empty(), "checkpoint: empty directory name");
  fs::path dir = fs::path(dir_name).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  const fs::path tmp = dir.string() + ".tmp", aside = dir.string() + ".old";
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  OTTER_CHECK(fs::is_directory(parent), "checkpoint: the parent directory '", parent.string(), "' of '",
              dir.string(), "' does not exist");
  if (fs::exists(dir)) {
    OTTER_CHECK(fs::is_directory(dir), "checkpoint: '", dir.string(), "' exists and is not a directory");
    OTTER_CHECK(complete(dir) || fs::is_empty(dir), "checkpoint: '", dir.string(),
                "' exists and is not an otter checkpoint; refusing to replace it");
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);  // what a failed save left behind
  fs::create_directory(tmp, ec);
  OTTER_CHECK(!ec, "checkpoint: cannot create '", tmp.string(), "': ", ec.message());
  const bool had_previous = complete(dir) || complete(aside);
  try {
    write_npz((tmp / kStateFile).string(), c.tensors);
    sync_path(tmp / kStateFile);
    if (hook) hook(kStateFile);
    // The metadata goes last: a directory without it is not a checkpoint.
    maybe_inject_write_fault(tmp / kMetaFile);
    write_text(tmp / kMetaFile, meta_to_json(c.meta));
    sync_path(tmp / kMetaFile);
    if (hook) hook(kMetaFile);
    sync_path(tmp);
    swap_in(tmp, dir, aside);
    sync_path(parent);
  } catch (const std::exception& e) {
    // The incomplete DIR.tmp goes (it is never read: it has no metadata file); DIR stays as it was.
    std::error_code ignored;
    if (!complete(tmp)) fs::remove_all(tmp, ignored);
    fail("checkpoint: saving '", dir.string(), "' failed: ", e.what(),
         had_previous ? "; the previous checkpoint there is unchanged" : "");
  }
}

Checkpoint read_checkpoint(const std::string& dir_name) {
  fs::path dir = fs::path(dir_name).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  const fs::path aside = dir.string() + ".old";
  if (!complete(dir) && complete(aside)) dir = aside;  // a save died between its two renames
  OTTER_CHECK(fs::exists(dir), "checkpoint '", dir_name, "' does not exist");
  OTTER_CHECK(fs::is_directory(dir), "checkpoint '", dir_name, "' is not a directory");
  OTTER_CHECK(complete(dir), "checkpoint '", dir_name, "' is incomplete or not a checkpoint: no ", kMetaFile);
  std::ifstream in(dir / kMetaFile, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  Checkpoint c;
  c.meta = meta_from_json(text.str(), str_cat("checkpoint '", dir_name, "': ", kMetaFile));
  OTTER_CHECK(fs::is_regular_file(dir / kStateFile), "checkpoint '", dir_name, "' has no ", kStateFile);
  c.tensors = read_npz((dir / kStateFile).string()).arrays;
  return c;
}

Checkpoint parse_checkpoint(const std::string& meta_json, const std::string& state_npz, const std::string& what) {
  Checkpoint c;
  c.meta = meta_from_json(meta_json, str_cat(what, ": ", kMetaFile));
  c.tensors = parse_npz(state_npz, str_cat(what, ": ", kStateFile)).arrays;
  return c;
}

std::pair<std::string, std::string> serialize_checkpoint(const Checkpoint& c) {
  char tmpl[] = "/tmp/otter-checkpoint-XXXXXX";
  OTTER_CHECK(::mkdtemp(tmpl) != nullptr, "checkpoint: cannot create a temporary folder: ", std::strerror(errno));
  const fs::path dir = fs::path(tmpl) / "c";
  write_checkpoint(dir.string(), c);
  std::ifstream meta(dir / kMetaFile, std::ios::binary), state(dir / kStateFile, std::ios::binary);
  std::stringstream m, s;
  m << meta.rdbuf();
  s << state.rdbuf();
  std::error_code ignored;
  fs::remove_all(tmpl, ignored);
  return {m.str(), s.str()};
}

}  // namespace otter
