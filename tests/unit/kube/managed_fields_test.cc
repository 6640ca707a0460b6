#include "certctl/kube/managed_fields.h"

#include <gtest/gtest.h>

namespace certctl::kube {
namespace managed_fields_test {
namespace {

Json Entry(const std::string& manager, const std::string& time, Json fields) {
  return {{"manager", manager},
          {"operation", "Update"},
          {"apiVersion", "admissionregistration.k8s.io/v1"},
          {"time", time},
          {"fieldsType", "FieldsV1"},
          {"fieldsV1", std::move(fields)}};
}

Json CaBundleOf(const std::string& webhook) {
  return {{"f:webhooks",
           {{"k:{\"name\":\"" + webhook + "\"}", {{"f:clientConfig", {{"f:caBundle", {}}}}}}}}};
}

TEST(ManagedFields, TheManagersOfAFieldComeMostRecentFirst) {
  const Json object = {{"metadata",
                        {{"name", "hook"},
                         {"managedFields",
                          {Entry("kubectl-client-side-apply", "2026-01-31T11:00:00Z",
                                 {{"f:webhooks", {{"k:{\"name\":\"a\"}", {{"f:name", {}}}}}}}),
                           Entry("certctl", "2026-01-31T12:00:00Z", CaBundleOf("a")),
                           Entry("argocd-controller", "2026-01-31T12:00:05Z", CaBundleOf("b"))}}}}};
  const auto managers = ManagersOfField(object, "caBundle");
  ASSERT_EQ(managers.size(), 2U);
  EXPECT_EQ(managers[0].manager, "argocd-controller");
  EXPECT_EQ(managers[0].operation, "Update");
  EXPECT_EQ(managers[1].manager, "certctl");
  EXPECT_TRUE(ManagersOfField(object, "failurePolicy").empty());
}

TEST(ManagedFields, NoOrMalformedManagedFieldsNameNobody) {
  EXPECT_TRUE(ManagersOfField(Json::object(), "caBundle").empty());
  EXPECT_TRUE(ManagersOfField(Json{{"metadata", 1}}, "caBundle").empty());
  EXPECT_TRUE(ManagersOfField(Json{{"metadata", {{"managedFields", "x"}}}}, "caBundle").empty());
  const Json odd = {
      {"metadata", {{"managedFields", {1, Json{{"manager", 2}, {"fieldsV1", CaBundleOf("a")}}}}}}};
  const auto managers = ManagersOfField(odd, "caBundle");
  ASSERT_EQ(managers.size(), 1U);
  EXPECT_EQ(managers[0].manager, "");
}

}  // namespace
}  // namespace managed_fields_test
}  // namespace certctl::kube
