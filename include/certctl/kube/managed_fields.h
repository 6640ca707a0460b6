#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "certctl/kube/client.h"

namespace certctl::kube {

// One entry of metadata.managedFields: who wrote a set of fields, how and when.
struct FieldManager {
  std::string manager;    // the writer's fieldManager ("kubectl-patch", "argocd-controller")
  std::string operation;  // "Update" or "Apply"
  std::string time;       // RFC 3339, as the server wrote it; may be empty
};

// The managers whose fieldsV1 hold a field named `field` ("caBundle") anywhere in `object`,
// the most recent first. Empty when the server keeps no managedFields or the entries are
// malformed: who wrote what is told to people, never relied upon.
std::vector<FieldManager> ManagersOfField(const Json& object, std::string_view field);

}  // namespace certctl::kube
