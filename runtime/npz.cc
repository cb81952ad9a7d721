// .npy/.npz (placeholder until it lands).
#include "runtime/npz.h"
namespace otter {}
