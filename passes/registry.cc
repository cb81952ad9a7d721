// The one place every built-in pass and named pipeline is registered.
#include "passes/canonicalize.h"
#include "passes/pass_manager.h"

namespace otter {

void register_all_passes(PassRegistry& r) {
  r.add("canonicalize", [] { return std::make_unique<CanonicalizePass>(); });
}

}  // namespace otter
