#pragma once

// How the fuzz targets over target objects read the kind from the first byte of an input.

#include <cstdint>

#include "certctl/inject/targets.h"

namespace certctl::fuzz {

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

}  // namespace certctl::fuzz
