// Finite-difference checks of every gradient rule (static and symbolic shapes), one test per rule.
#include "tests/passes/gradcheck.h"

namespace otter::testing {
namespace {

TEST(GradCheck, Add) { check_gradients_both({.op = "Add", .shapes = {{3, 4}, {4}}}); }
TEST(GradCheck, Mul) { check_gradients_both({.op = "Mul", .shapes = {{3, 4}, {3, 1}}}); }

}  // namespace
}  // namespace otter::testing
