#include "certctl/util/safety_controls.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace certctl {
namespace safety_controls_test {
namespace {

// Only the soak's control build (preset control) has the switches: in this build, as in
// every release, the environment cannot take a safety out.
TEST(SafetyControls, TheEnvironmentRemovesNothingOutsideTheControlBuild) {
#ifdef CERTCTL_SAFETY_CONTROLS
  GTEST_FAIL() << "the unit tests are built with CERTCTL_SAFETY_CONTROLS";
#endif
  for (const char* safety : {"two-ca-bundle", "names", "damping"}) {
    ASSERT_EQ(::setenv("CERTCTL_REMOVE_SAFETY", safety, 1), 0);
    EXPECT_FALSE(SafetyRemoved(safety)) << safety;
  }
  ::unsetenv("CERTCTL_REMOVE_SAFETY");
}

}  // namespace
}  // namespace safety_controls_test
}  // namespace certctl
