// caBundle injection: ReadBundleSlots and BundlePatch over any JSON the API server could send.
// The input is a kind digit ('0' validating, '1' mutating webhooks, '2' CRD, '3' APIService),
// then the object's JSON text, then optionally the separator and the bundle to inject.
// Properties:
//  - neither function throws; they fail together, and on the object alone;
//  - no patch exactly when every slot already holds the bundle;
//  - the patch applies (RFC 6902, nlohmann's json::patch) to the object it was computed from,
//    its `test` operations included, whenever every webhook carries a name as Kubernetes
//    requires; the result holds the bundle in every slot, differs from the object in nothing
//    else (a slot that held it already is untouched), and needs no further patch.

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "certctl/inject/patch.h"
#include "certctl/inject/targets.h"
#include "certctl/util/base64.h"

#include "fuzz_support.h"
#include "target_input.h"

namespace {

using certctl::inject::BundlePatch;
using certctl::inject::ReadBundleSlots;
using certctl::inject::TargetKind;
using Json = nlohmann::json;

constexpr char kDefaultBundle[] =
    "-----BEGIN CERTIFICATE-----\nTkVXIENB\n-----END CERTIFICATE-----\n";

bool IsWebhookKind(TargetKind kind) {
  return kind == TargetKind::kValidatingWebhookConfiguration ||
         kind == TargetKind::kMutatingWebhookConfiguration;
}

// Kubernetes requires webhooks[].name; the `test` operations pin it.
bool EveryWebhookNamed(const Json& object) {
  for (const Json& webhook : object.at("webhooks")) {
    if (!webhook.is_object() || !webhook.contains("name") || !webhook.at("name").is_string()) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = certctl::fuzz::ReadTargetInput(data, size);
  if (!input) {
    return 0;
  }
  const TargetKind kind = input->kind;
  const Json& object = input->object;
  const std::string bundle = input->rest ? std::string(*input->rest) : kDefaultBundle;

  const auto slots = ReadBundleSlots(kind, object);
  const auto patch = BundlePatch(kind, object, bundle);
  FUZZ_CHECK(slots.has_value() == patch.has_value());
  if (!slots) {
    FUZZ_CHECK(slots.error().code() == patch.error().code());
    FUZZ_CHECK(slots.error().message() == patch.error().message());
    return 0;
  }
  FUZZ_CHECK(!slots->empty());

  bool all_hold_it = true;
  for (const auto& slot : *slots) {
    all_hold_it = all_hold_it && slot.bundle == bundle;
  }
  FUZZ_CHECK(patch->has_value() != all_hold_it);
  if (all_hold_it) {
    return 0;
  }
  const Json& operations = **patch;
  FUZZ_CHECK(operations.is_array() && !operations.empty());
  if (IsWebhookKind(kind) && !EveryWebhookNamed(object)) {
    return 0;
  }

  Json patched;
  try {
    patched = object.patch(operations);
  } catch (const Json::exception&) {
    FUZZ_CHECK(false);  // the patch does not apply to the object it was made for
  }

  // Only the slots that differ are written: one that holds the bundle already (an empty
  // bundle and an absent field alike) stays byte for byte as it was.
  const std::string encoded = certctl::Base64Encode(bundle);
  Json expected = object;
  for (const auto& slot : *slots) {
    if (slot.bundle != bundle) {
      expected[Json::json_pointer(slot.path)] = encoded;
    }
  }
  FUZZ_CHECK(patched == expected);

  const auto after = ReadBundleSlots(kind, patched);
  FUZZ_CHECK(after.has_value() && after->size() == slots->size());
  for (std::size_t i = 0; i < after->size(); ++i) {
    FUZZ_CHECK((*after)[i].bundle == bundle);
    FUZZ_CHECK((*after)[i].path == (*slots)[i].path);
  }
  const auto steady = BundlePatch(kind, patched, bundle);
  FUZZ_CHECK(steady.has_value() && !steady->has_value());
  return 0;
}
