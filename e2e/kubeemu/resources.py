"""The resource table: every (group, version, resource) the emulator serves.

One Resource per REST endpoint. It carries what discovery advertises and the storage
strategy flags that differ between kinds in the real registry (create-on-update,
unconditional update, generation, status subresource).

Besides the built-in kinds, the served versions of every Established
CustomResourceDefinition (serve_crd, from the apiextensions controller in api.py): their
custom resources, validated against the version's openAPIV3Schema, until the CRD is deleted.
"""

import threading

ALL_BUT_META = "*"
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class GroupResource:
    """schema.GroupResource; str() renders 'secrets' or 'leases.coordination.k8s.io'."""

    def __init__(self, group, resource):
        self.group = group
        self.resource = resource

    def __str__(self):
        return f"{self.resource}.{self.group}" if self.group else self.resource


class Resource:
    def __init__(self, group, version, resource, kind, namespaced, *, short_names=(),
                 categories=(), verbs=ALL_VERBS, status=False, create_on_update=False,
                 unconditional_update=True, generation=None, storage=None, openapi=None,
                 crd=None, storage_version=None, scale=False):
        self.group = group
        self.version = version
        self.resource = resource
        self.kind = kind
        self.namespaced = namespaced
        self.short_names = list(short_names)
        self.categories = list(categories)
        self.verbs = list(verbs)
        # A /status subresource exists; main-resource writes then ignore .status.
        self.status = status
        # A /scale subresource exists (autoscaling/v1 Scale over spec.replicas).
        self.scale = scale
        # The registry strategy's AllowCreateOnUpdate / AllowUnconditionalUpdate.
        self.create_on_update = create_on_update
        self.unconditional_update = unconditional_update
        # Top-level field whose change bumps metadata.generation (None: no generation;
        # ALL_BUT_META: any change outside metadata and status, as for custom resources).
        self.generation = generation
        # Resources sharing storage with another version (events.k8s.io/v1 events) name it.
        self.storage = storage or (group, resource)
        # The version objects are stored in (custom resources: the CRD's storage version).
        self.storage_version = storage_version or version
        # Custom resources: the version's openAPIV3Schema and the CRD's name.
        self.openapi = openapi
        self.crd = crd

    @property
    def custom(self):
        return self.crd is not None

    def generation_part(self, obj):
        """The part of `obj` whose change bumps metadata.generation."""
        if self.generation == ALL_BUT_META:
            return {k: v for k, v in obj.items()
                    if k not in ("apiVersion", "kind", "metadata", "status")}
        return obj.get(self.generation)

    @property
    def group_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gr(self):
        return GroupResource(self.group, self.resource)

    @property
    def qualified_kind(self):
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def singular(self):
        return self.kind.lower()

    @property
    def list_kind(self):
        return self.kind + "List"


_ADM = "admissionregistration.k8s.io"
_RBAC = "rbac.authorization.k8s.io"

RESOURCES = [
    Resource("", "v1", "namespaces", "Namespace", False, short_names=["ns"], status=True,
             verbs=[v for v in ALL_VERBS if v != "deletecollection"]),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "configmaps", "ConfigMap", True, short_names=["cm"]),
    Resource("", "v1", "services", "Service", True, short_names=["svc"], categories=["all"],
             status=True, create_on_update=True),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=["sa"]),
    Resource("", "v1", "events", "Event", True, short_names=["ev"], create_on_update=True),
    Resource("", "v1", "pods", "Pod", True, short_names=["po"], categories=["all"], status=True),
    Resource("events.k8s.io", "v1", "events", "Event", True, short_names=["ev"],
             create_on_update=True, storage=("", "events")),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True, create_on_update=True,
             unconditional_update=False),
    Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    Resource(_ADM, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
             False, categories=["api-extensions"], unconditional_update=False,
             generation="webhooks"),
    Resource(_ADM, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
             False, categories=["api-extensions"], unconditional_update=False,
             generation="webhooks"),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions",
             "CustomResourceDefinition", False, short_names=["crd", "crds"],
             categories=["api-extensions"], status=True, unconditional_update=False,
             generation="spec"),
    Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", False,
             categories=["api-extensions"], status=True, unconditional_update=False),
    Resource("apps", "v1", "deployments", "Deployment", True, short_names=["deploy"],
             categories=["all"], status=True, generation="spec", scale=True),
    Resource("batch", "v1", "jobs", "Job", True, categories=["all"], status=True,
             generation="spec"),
    Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True,
             short_names=["netpol"], generation="spec"),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
             short_names=["pdb"], status=True, generation="spec"),
    Resource(_RBAC, "v1", "roles", "Role", True, create_on_update=True),
    Resource(_RBAC, "v1", "rolebindings", "RoleBinding", True, create_on_update=True),
    Resource(_RBAC, "v1", "clusterroles", "ClusterRole", False, create_on_update=True),
    Resource(_RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False,
             create_on_update=True),
    # Virtual: create-only, never stored; answers `kubectl auth can-i`.
    Resource("authorization.k8s.io", "v1", "selfsubjectaccessreviews",
             "SelfSubjectAccessReview", False, verbs=["create"]),
]

_BY_PATH = {(r.group, r.version, r.resource): r for r in RESOURCES}

# Custom resources of Established CRDs: (group, version, plural) -> Resource, and the CRD
# name -> its keys. Written by the controller thread, read by every request thread.
_custom_lock = threading.Lock()
_CUSTOM = {}
_CUSTOM_BY_CRD = {}


def serve_crd(crd):
    """Serve the custom resources of an Established CRD (every served version); a CRD
    served before is replaced, so a changed schema applies."""
    spec = crd["spec"]
    names = spec["names"]
    group, plural = spec["group"], names["plural"]
    storage_version = next(v["name"] for v in spec["versions"] if v.get("storage"))
    served = {}
    for version in spec["versions"]:
        if not version.get("served"):
            continue
        subresources = version.get("subresources") or {}
        served[(group, version["name"], plural)] = Resource(
            group, version["name"], plural, names["kind"], spec["scope"] == "Namespaced",
            short_names=names.get("shortNames") or (), categories=names.get("categories") or (),
            status="status" in subresources, unconditional_update=False,
            generation=ALL_BUT_META, storage=(group, plural),
            openapi=(version.get("schema") or {}).get("openAPIV3Schema") or {},
            crd=crd["metadata"]["name"], storage_version=storage_version)
    with _custom_lock:
        for key in _CUSTOM_BY_CRD.pop(crd["metadata"]["name"], ()):
            _CUSTOM.pop(key, None)
        _CUSTOM.update(served)
        _CUSTOM_BY_CRD[crd["metadata"]["name"]] = list(served)


def unserve_crd(name):
    with _custom_lock:
        for key in _CUSTOM_BY_CRD.pop(name, ()):
            _CUSTOM.pop(key, None)


def _all():
    with _custom_lock:
        return RESOURCES + list(_CUSTOM.values())


def lookup(group, version, resource):
    found = _BY_PATH.get((group, version, resource))
    if found is None:
        with _custom_lock:
            found = _CUSTOM.get((group, version, resource))
    return found


def group_versions():
    """[(group, version)] in discovery order, the core group excluded."""
    seen = []
    for r in _all():
        if r.group and (r.group, r.version) not in seen:
            seen.append((r.group, r.version))
    return seen


def in_group_version(group, version):
    return [r for r in _all() if r.group == group and r.version == version]


def storage_resource(storage):
    """The Resource that defines a storage key's canonical (stored) form."""
    found = _BY_PATH.get((storage[0], "v1", storage[1]))
    if found is not None:
        return found
    with _custom_lock:
        custom = [r for r in _CUSTOM.values() if r.storage == storage]
    return next((r for r in custom if r.version == r.storage_version), None) or \
        next(iter(custom), None)
