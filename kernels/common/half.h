// The float16 / bfloat16 conversions for the kernels: they live in graph/half.h (the IR needs them
// too, and graph/ never includes kernels/); this header forwards so kernel code keeps one include
// for its shared host/device math.
#pragma once

#include "graph/half.h"  // IWYU pragma: export
