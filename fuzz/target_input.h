#pragma once

// The input of the fuzz targets over target objects: a kind byte, the object's JSON text,
// then optionally the part separator and a second part of the target's own.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "certctl/inject/targets.h"

#include "fuzz_support.h"

namespace certctl::fuzz {

struct TargetInput {
  inject::TargetKind kind;
  nlohmann::json object;
  std::optional<std::string_view> rest;  // after the separator, when there is one
};

// '0' validating, '1' mutating webhooks, '2' CRD, '3' APIService (any byte, modulo 4).
inline inject::TargetKind TargetKindOf(std::uint8_t byte) {
  switch (byte % 4) {
    case 0:
      return inject::TargetKind::kValidatingWebhookConfiguration;
    case 1:
      return inject::TargetKind::kMutatingWebhookConfiguration;
    case 2:
      return inject::TargetKind::kCustomResourceDefinition;
    default:
      return inject::TargetKind::kApiService;
  }
}

// Nothing for an empty input or an object that is not JSON: no property to check there.
inline std::optional<TargetInput> ReadTargetInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return std::nullopt;
  }
  const auto parts = SplitParts(AsText(data + 1, size - 1), 2);
  nlohmann::json object = nlohmann::json::parse(parts[0], nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) {
    return std::nullopt;
  }
  return TargetInput{TargetKindOf(data[0]), std::move(object),
                     parts.size() > 1 ? std::optional<std::string_view>(parts[1]) : std::nullopt};
}

}  // namespace certctl::fuzz
