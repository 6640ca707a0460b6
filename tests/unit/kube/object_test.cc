#include "certctl/kube/object.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::kube {
namespace object_test {
namespace {

using ::testing::HasSubstr;

const Json kSecret = Json::parse(R"js({
  "metadata": {"name": "webhook-cert", "namespace": "infra", "resourceVersion": "42",
               "labels": {"app": "hook"}, "finalizers": ["a"]},
  "type": "kubernetes.io/tls", "data": null
})js");

TEST(ObjectAccessors, ReadPresentAbsentAndNullFields) {
  EXPECT_EQ(RequiredString(kSecret, "/type", "secret/infra/webhook-cert").value(),
            "kubernetes.io/tls");
  EXPECT_EQ(OptionalString(kSecret, "/metadata/uid", "s").value(), std::nullopt);
  EXPECT_EQ(OptionalObject(kSecret, "/data", "s").value(), nullptr);
  EXPECT_EQ(OptionalObject(kSecret, "/metadata/labels", "s").value()->at("app"), "hook");
  EXPECT_EQ(OptionalArray(kSecret, "/metadata/finalizers", "s").value()->size(), 1U);
  EXPECT_EQ(ObjectName(kSecret, "s").value(), "webhook-cert");
  EXPECT_EQ(ResourceVersion(kSecret, "s").value(), "42");
  EXPECT_EQ(ResourceVersion(Json::object(), "s").value(), "");
}

TEST(ObjectAccessors, WrongTypesNameTheObjectAndTheField) {
  const Json hostile = Json::parse(
      R"js({"metadata": {"name": 7, "resourceVersion": {"a": 1}, "labels": []}, "data": []})js");
  const auto name = ObjectName(hostile, "secret/infra/webhook-cert");
  ASSERT_FALSE(name);
  EXPECT_EQ(name.error().code(), ErrorCode::kBadResponse);
  EXPECT_EQ(name.error().message(),
            "secret/infra/webhook-cert: metadata.name is a number, not a string");
  EXPECT_THAT(ResourceVersion(hostile, "s").error().message(),
              HasSubstr("metadata.resourceVersion is an object, not a string"));
  EXPECT_THAT(OptionalObject(hostile, "/data", "s").error().message(),
              HasSubstr("data is an array, not an object"));
  EXPECT_THAT(OptionalArray(kSecret, "/metadata/labels", "s").error().message(),
              HasSubstr("metadata.labels is an object, not an array"));
  EXPECT_THAT(RequiredString(kSecret, "/metadata/uid", "s").error().message(),
              HasSubstr("metadata.uid is missing"));
  // The root of an answer that is not an object at all.
  EXPECT_FALSE(ObjectName(Json::array(), "s"));
  EXPECT_FALSE(ObjectName(Json("text"), "s"));
}

TEST(ObjectAccessors, IntegersAreWholeNumbersInRange) {
  const Json lease = Json::parse(
      R"js({"spec": {"leaseDurationSeconds": 15, "leaseTransitions": 1.5, "huge": 18446744073709551615, "text": "15"}})js");
  EXPECT_EQ(OptionalInteger(lease, "/spec/leaseDurationSeconds", "l").value(), 15);
  EXPECT_EQ(OptionalInteger(lease, "/spec/absent", "l").value(), std::nullopt);
  EXPECT_THAT(OptionalInteger(lease, "/spec/leaseTransitions", "lease/x").error().message(),
              HasSubstr("lease/x: spec.leaseTransitions is a number, not an integer"));
  EXPECT_FALSE(OptionalInteger(lease, "/spec/huge", "l"));
  EXPECT_THAT(OptionalInteger(lease, "/spec/text", "l").error().message(),
              HasSubstr("is a string, not an integer"));
}

TEST(ObjectAccessors, ExpectIdentityRefusesAnotherObject) {
  EXPECT_TRUE(ExpectIdentity(kSecret, kSecrets, "infra", "webhook-cert", "s"));
  const auto foreign = ExpectIdentity(kSecret, kSecrets, "infra", "victim", "secret/infra/victim");
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().code(), ErrorCode::kBadResponse);
  EXPECT_THAT(foreign.error().message(), HasSubstr("named \"webhook-cert\""));
  EXPECT_FALSE(ExpectIdentity(kSecret, kSecrets, "other", "webhook-cert", "s"));
  // No namespace in the answer is tolerated; the name never is.
  Json bare = kSecret;
  bare["metadata"].erase("namespace");
  EXPECT_TRUE(ExpectIdentity(bare, kSecrets, "infra", "webhook-cert", "s"));
}

}  // namespace
}  // namespace object_test
}  // namespace certctl::kube
