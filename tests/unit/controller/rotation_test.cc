#include "certctl/controller/rotation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/util/duration.h"

namespace certctl::controller {
namespace rotation_test {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kObject[] = "secret/ns/cert";

Json WithAnnotations(Json annotations) {
  return {{"metadata", {{"name", "cert"}, {"annotations", std::move(annotations)}}}};
}

TEST(RotationState, NoAnnotationsIsNoRotation) {
  const Json secret = {{"metadata", {{"name", "cert"}}}};
  EXPECT_EQ(ReadRotationState(secret, kObject).value(), RotationState{});
}

TEST(RotationState, WrittenStateReadsBackAndOthersAnnotationsStay) {
  RotationState state;
  state.phase = RotationPhase::kOverlapping;
  state.started = ParseRfc3339("2026-11-25T07:00:00Z").value();
  state.previous_ca_until = ParseRfc3339("2026-11-26T07:00:00Z").value();
  Json secret = WithAnnotations({{"team", "payments"}, {kRotateAnnotation, "ca"}});
  WriteRotationState(state, secret);
  EXPECT_EQ(ReadRotationState(secret, kObject).value(), state);
  const Json& annotations = secret["metadata"]["annotations"];
  EXPECT_EQ(annotations["team"], "payments");
  EXPECT_EQ(annotations[kRotationPhaseAnnotation], "overlapping");
  EXPECT_EQ(annotations[kPreviousCaUntilAnnotation], "2026-11-26T07:00:00Z");
  EXPECT_FALSE(annotations.contains(kRotateAnnotation));  // the request was taken up

  WriteRotationState(RotationState{}, secret);
  EXPECT_EQ(secret["metadata"]["annotations"], Json({{"team", "payments"}}));
  Json alone = WithAnnotations({{kRotationPhaseAnnotation, "trusting"}});
  WriteRotationState(RotationState{}, alone);
  EXPECT_FALSE(alone["metadata"].contains("annotations"));
}

TEST(RotationState, RequestsAreRead) {
  EXPECT_EQ(ReadRotationState(WithAnnotations({{kRotateAnnotation, "ca"}}), kObject)->requested,
            RotationRequest::kCa);
  EXPECT_EQ(ReadRotationState(WithAnnotations({{kRotateAnnotation, "leaf"}}), kObject)->requested,
            RotationRequest::kLeaf);
}

TEST(RotationState, ValuesCertctlNeverWritesAreErrorsNamingTheAnnotation) {
  const auto phase =
      ReadRotationState(WithAnnotations({{kRotationPhaseAnnotation, "halfway"}}), kObject);
  ASSERT_FALSE(phase);
  EXPECT_EQ(phase.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(phase.error().message(),
              HasSubstr("secret/ns/cert: metadata.annotations[certctl.io/rotation-phase] is "
                        "\"halfway\", expected trusting or overlapping"));
  const auto request = ReadRotationState(WithAnnotations({{kRotateAnnotation, "all"}}), kObject);
  ASSERT_FALSE(request);
  EXPECT_THAT(request.error().message(), HasSubstr("expected ca or leaf"));
  const auto time =
      ReadRotationState(WithAnnotations({{kPreviousCaUntilAnnotation, "tomorrow"}}), kObject);
  ASSERT_FALSE(time);
  EXPECT_THAT(time.error().message(), HasSubstr("expected an RFC 3339 time"));
  const auto typed = ReadRotationState(WithAnnotations({{kRotationPhaseAnnotation, 2}}), kObject);
  ASSERT_FALSE(typed);
  EXPECT_EQ(typed.error().code(), ErrorCode::kBadResponse);
}

}  // namespace
}  // namespace rotation_test
}  // namespace certctl::controller
