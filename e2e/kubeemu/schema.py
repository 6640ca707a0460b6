"""A small structural schema per kind: the Go types' JSON shape, as far as the emulator needs.

One description serves four purposes, so they can never disagree:
  * decoding like the Go JSON decoder: type errors (400), base64 for []byte, Time and
    MicroTime formats, null fields dropped (Go's zero value plus omitempty);
  * fieldValidation: unknown and duplicate fields (Strict -> error, Warn -> warning);
  * strategic merge patch: the patchStrategy/patchMergeKey struct tags;
  * server-side apply: list types (map by key, set, atomic) and managedFields paths.

Structs marked open=True are not described exhaustively: unknown fields inside them are
accepted silently (storage-only kinds such as Pod and Deployment).
"""

from . import codec


class DecodeError(ValueError):
    """The body cannot be decoded into the Go type (-> 400 "cannot be handled as a X")."""


class Node:
    open = True

    def decode(self, value, path, ctx):
        return value


class Any(Node):
    """Free-form JSON (RawExtension, JSONSchemaProps, IntOrString, status of storage kinds)."""


class Scalar(Node):
    _PY = {"string": (str,), "int32": (int,), "int64": (int,), "bool": (bool,),
           "float64": (int, float)}

    def __init__(self, go):
        self.go = go

    def decode(self, value, path, ctx):
        ok = self._PY[self.go]
        if isinstance(value, bool) and self.go != "bool":
            ctx.type_error(value, path, self.go)
        if not isinstance(value, ok):
            ctx.type_error(value, path, self.go)
        return value


class IntOrString(Node):
    """intstr.IntOrString: a JSON number or string."""

    def decode(self, value, path, ctx):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            ctx.type_error(value, path, "intstr.IntOrString")
        return value


class Bytes(Node):
    """[]byte: standard base64 with padding on the wire."""

    def decode(self, value, path, ctx):
        if not isinstance(value, str):
            ctx.type_error(value, path, "[]uint8")
        try:
            codec.go_b64decode(value)
        except codec.Base64Error as e:
            raise DecodeError(str(e)) from None
        return value


class Time(Node):
    def decode(self, value, path, ctx):
        if not isinstance(value, str):
            ctx.type_error(value, path, "v1.Time")
        try:
            return codec.parse_time(value)
        except ValueError as e:
            raise DecodeError(str(e)) from None


class MicroTime(Node):
    def decode(self, value, path, ctx):
        if not isinstance(value, str):
            ctx.type_error(value, path, "v1.MicroTime")
        try:
            return codec.parse_micro(value)
        except ValueError as e:
            raise DecodeError(str(e)) from None


class Struct(Node):
    def __init__(self, go, fields, open=False, retain_keys=False):
        self.go = go
        self.fields = fields
        self.open = open
        # patchStrategy:"retainKeys" (SMP $retainKeys directive applies here).
        self.retain_keys = retain_keys

    def child(self, name):
        return self.fields.get(name, ANY)

    def decode(self, value, path, ctx):
        if not isinstance(value, dict):
            ctx.type_error(value, path, self.go)
        out = {}
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            node = self.fields.get(k)
            if node is None and not self.open:
                ctx.unknown(sub)
                continue
            if v is None:
                continue  # Go: null leaves the zero value, omitempty drops it
            decoded = (node or ANY).decode(v, sub, ctx)
            if node is BYTES and decoded == "":
                continue  # "" is an empty []byte, which omitempty (every caBundle) leaves out
            out[k] = decoded
        return out


class MapOf(Node):
    def __init__(self, value):
        self.value = value

    def child(self, name):
        return self.value

    def decode(self, value, path, ctx):
        if not isinstance(value, dict):
            ctx.type_error(value, path, "map[string]" + getattr(self.value, "go", "string"))
        # Go decodes a null map value as the element's zero value.
        zero = "" if self.value is STRING else None
        return {k: (self.value.decode(v, f"{path}[{k}]", ctx) if v is not None else zero)
                for k, v in value.items() if v is not None or zero is not None}


class ListOf(Node):
    """A list. key: patchMergeKey (SMP merge, SSA listType=map); set: primitive set merge.

    ssa_key covers lists that are listType=map for server-side apply but carry no
    patchStrategy, so strategic merge replaces them (CRD status.conditions).
    """

    def __init__(self, item, key=None, set=False, ssa_key=None):
        self.item = item
        self.key = key
        self.set = set
        self.ssa_key = ssa_key or key

    def decode(self, value, path, ctx):
        if not isinstance(value, list):
            ctx.type_error(value, path, "[]" + getattr(self.item, "go", "interface {}"))
        return [self.item.decode(v, f"{path}[{i}]", ctx) if v is not None else v
                for i, v in enumerate(value)]


ANY = Any()
INT_OR_STRING = IntOrString()
STRING = Scalar("string")
INT32 = Scalar("int32")
INT64 = Scalar("int64")
BOOL = Scalar("bool")
BYTES = Bytes()
TIME = Time()
MICRO = MicroTime()
STRINGS = ListOf(STRING)


class DecodeContext:
    """Collects strict-decoding problems while a body is decoded into its kind's schema."""

    def __init__(self, duplicates=()):
        self.unknown_fields = []
        self.duplicates = list(duplicates)

    def unknown(self, path):
        self.unknown_fields.append(path)

    @staticmethod
    def type_error(value, path, go_type):
        what = {bool: "bool", str: "string", int: "number", float: "number", list: "array",
                dict: "object"}.get(type(value), "value")
        raise DecodeError(f"json: cannot unmarshal {what} into Go struct field .{path} of type "
                          f"{go_type}")

    def strict_errors(self):
        errs = [f'unknown field "{p}"' for p in self.unknown_fields]
        errs += [f'duplicate field "{d}"' for d in self.duplicates]
        return errs


# --- ObjectMeta and shared types ---------------------------------------------------------

OWNER_REF = Struct("OwnerReference", {
    "apiVersion": STRING, "kind": STRING, "name": STRING, "uid": STRING,
    "controller": BOOL, "blockOwnerDeletion": BOOL})
MANAGED_FIELDS_ENTRY = Struct("ManagedFieldsEntry", {
    "manager": STRING, "operation": STRING, "apiVersion": STRING, "time": TIME,
    "fieldsType": STRING, "fieldsV1": ANY, "subresource": STRING})
OBJECT_META = Struct("ObjectMeta", {
    "name": STRING, "generateName": STRING, "namespace": STRING, "selfLink": STRING,
    "uid": STRING, "resourceVersion": STRING, "generation": INT64, "creationTimestamp": TIME,
    "deletionTimestamp": TIME, "deletionGracePeriodSeconds": INT64,
    "labels": MapOf(STRING), "annotations": MapOf(STRING),
    "ownerReferences": ListOf(OWNER_REF, key="uid"),
    "finalizers": ListOf(STRING, set=True),
    "managedFields": ListOf(MANAGED_FIELDS_ENTRY)})
OBJECT_REF = Struct("ObjectReference", {
    "kind": STRING, "namespace": STRING, "name": STRING, "uid": STRING, "apiVersion": STRING,
    "resourceVersion": STRING, "fieldPath": STRING})
LOCAL_REF = Struct("LocalObjectReference", {"name": STRING})
CONDITION = Struct("Condition", {
    "type": STRING, "status": STRING, "lastTransitionTime": TIME, "reason": STRING,
    "message": STRING, "observedGeneration": INT64, "lastUpdateTime": TIME,
    "lastProbeTime": TIME})
LABEL_SELECTOR = Struct("LabelSelector", {
    "matchLabels": MapOf(STRING),
    "matchExpressions": ListOf(Struct("LabelSelectorRequirement", {
        "key": STRING, "operator": STRING, "values": STRINGS}))})


def top(go, **fields):
    """A kind's root struct: apiVersion, kind and metadata plus its own fields."""
    return Struct(go, {"apiVersion": STRING, "kind": STRING, "metadata": OBJECT_META, **fields})


# --- core/v1 ------------------------------------------------------------------------------

SECRET = top("Secret", data=MapOf(BYTES), stringData=MapOf(STRING), type=STRING,
             immutable=BOOL)
CONFIG_MAP = top("ConfigMap", data=MapOf(STRING), binaryData=MapOf(BYTES), immutable=BOOL)
NAMESPACE = top("Namespace",
                spec=Struct("NamespaceSpec", {"finalizers": STRINGS}),
                status=Struct("NamespaceStatus", {
                    "phase": STRING, "conditions": ListOf(CONDITION, key="type")}))
SERVICE_ACCOUNT = top("ServiceAccount", secrets=ListOf(OBJECT_REF, key="name"),
                      imagePullSecrets=ListOf(LOCAL_REF, key="name"),
                      automountServiceAccountToken=BOOL)
SERVICE_PORT = Struct("ServicePort", {
    "name": STRING, "protocol": STRING, "appProtocol": STRING, "port": INT32,
    "targetPort": INT_OR_STRING, "nodePort": INT32})
SERVICE = top("Service", spec=Struct("ServiceSpec", {
    "ports": ListOf(SERVICE_PORT, key="port"), "selector": MapOf(STRING),
    "clusterIP": STRING, "clusterIPs": STRINGS, "type": STRING, "externalIPs": STRINGS,
    "sessionAffinity": STRING, "loadBalancerIP": STRING, "loadBalancerSourceRanges": STRINGS,
    "externalName": STRING, "externalTrafficPolicy": STRING, "healthCheckNodePort": INT32,
    "publishNotReadyAddresses": BOOL,
    "sessionAffinityConfig": Struct("SessionAffinityConfig", {
        "clientIP": Struct("ClientIPConfig", {"timeoutSeconds": INT32})}),
    "ipFamilies": STRINGS, "ipFamilyPolicy": STRING, "allocateLoadBalancerNodePorts": BOOL,
    "loadBalancerClass": STRING, "internalTrafficPolicy": STRING,
    "trafficDistribution": STRING}),
    status=Struct("ServiceStatus", {
        "loadBalancer": Struct("LoadBalancerStatus", {
            "ingress": ListOf(Struct("LoadBalancerIngress", {
                "ip": STRING, "hostname": STRING, "ipMode": STRING,
                "ports": ListOf(Struct("PortStatus", {
                    "port": INT32, "protocol": STRING, "error": STRING}))}))}),
        "conditions": ListOf(CONDITION, key="type")}))
EVENT_SOURCE = Struct("EventSource", {"component": STRING, "host": STRING})
EVENT = top("Event", involvedObject=OBJECT_REF, reason=STRING, message=STRING,
            source=EVENT_SOURCE, firstTimestamp=TIME, lastTimestamp=TIME, count=INT32,
            type=STRING, eventTime=MICRO,
            series=Struct("EventSeries", {"count": INT32, "lastObservedTime": MICRO}),
            action=STRING, related=OBJECT_REF, reportingComponent=STRING,
            reportingInstance=STRING)
EVENT_V1 = top("Event", eventTime=MICRO,
               series=Struct("EventSeries", {"count": INT32, "lastObservedTime": MICRO}),
               reportingController=STRING, reportingInstance=STRING, action=STRING,
               reason=STRING, regarding=OBJECT_REF, related=OBJECT_REF, note=STRING,
               type=STRING, deprecatedSource=EVENT_SOURCE, deprecatedFirstTimestamp=TIME,
               deprecatedLastTimestamp=TIME, deprecatedCount=INT32)

CONTAINER = Struct("Container", {
    "env": ListOf(Struct("EnvVar", {}, open=True), key="name"),
    "ports": ListOf(Struct("ContainerPort", {}, open=True), key="containerPort"),
    "volumeMounts": ListOf(Struct("VolumeMount", {}, open=True), key="mountPath"),
    "volumeDevices": ListOf(Struct("VolumeDevice", {}, open=True), key="devicePath"),
    "resizePolicy": ListOf(Struct("ContainerResizePolicy", {}, open=True),
                           key="resourceName"),
}, open=True)
POD_SPEC = Struct("PodSpec", {
    "containers": ListOf(CONTAINER, key="name"),
    "initContainers": ListOf(CONTAINER, key="name"),
    "ephemeralContainers": ListOf(CONTAINER, key="name"),
    "volumes": ListOf(Struct("Volume", {}, open=True, retain_keys=True), key="name"),
    "imagePullSecrets": ListOf(LOCAL_REF, key="name"),
    "hostAliases": ListOf(Struct("HostAlias", {}, open=True), key="ip"),
    "topologySpreadConstraints": ListOf(Struct("TopologySpreadConstraint", {}, open=True),
                                        key="topologyKey"),
}, open=True)
POD_TEMPLATE = Struct("PodTemplateSpec", {"metadata": OBJECT_META, "spec": POD_SPEC})
POD = top("Pod", spec=POD_SPEC, status=ANY)
DEPLOYMENT = top("Deployment", spec=Struct("DeploymentSpec", {
    "template": POD_TEMPLATE, "selector": LABEL_SELECTOR,
    "strategy": Struct("DeploymentStrategy", {}, open=True, retain_keys=True)}, open=True),
    status=ANY)
JOB = top("Job", spec=Struct("JobSpec", {"template": POD_TEMPLATE, "selector": LABEL_SELECTOR},
                             open=True), status=ANY)

# --- discovery.k8s.io/v1 ------------------------------------------------------------------

# Every list here is listType=atomic without a patch strategy: replaced whole.
ENDPOINT_SLICE = top("EndpointSlice", addressType=STRING, endpoints=ListOf(Struct("Endpoint", {
    "addresses": STRINGS,
    "conditions": Struct("EndpointConditions", {"ready": BOOL, "serving": BOOL,
                                                "terminating": BOOL}),
    "hostname": STRING, "targetRef": OBJECT_REF, "deprecatedTopology": MapOf(STRING),
    "nodeName": STRING, "zone": STRING,
    "hints": Struct("EndpointHints", {"forZones": ListOf(Struct("ForZone", {"name": STRING}))})})),
    ports=ListOf(Struct("EndpointPort", {"name": STRING, "protocol": STRING, "port": INT32,
                                         "appProtocol": STRING})))

# --- networking.k8s.io/v1 and policy/v1 ----------------------------------------------------

# Every list of a NetworkPolicy is atomic (no patch strategy, no list type).
NETWORK_POLICY_PORT = Struct("NetworkPolicyPort", {"protocol": STRING, "port": INT_OR_STRING,
                                                   "endPort": INT32})
NETWORK_POLICY_PEER = Struct("NetworkPolicyPeer", {
    "podSelector": LABEL_SELECTOR, "namespaceSelector": LABEL_SELECTOR,
    "ipBlock": Struct("IPBlock", {"cidr": STRING, "except": STRINGS})})
NETWORK_POLICY = top("NetworkPolicy", spec=Struct("NetworkPolicySpec", {
    "podSelector": LABEL_SELECTOR,
    "ingress": ListOf(Struct("NetworkPolicyIngressRule", {
        "ports": ListOf(NETWORK_POLICY_PORT), "from": ListOf(NETWORK_POLICY_PEER)})),
    "egress": ListOf(Struct("NetworkPolicyEgressRule", {
        "ports": ListOf(NETWORK_POLICY_PORT), "to": ListOf(NETWORK_POLICY_PEER)})),
    "policyTypes": STRINGS}))
POD_DISRUPTION_BUDGET = top("PodDisruptionBudget", spec=Struct("PodDisruptionBudgetSpec", {
    "minAvailable": INT_OR_STRING, "selector": LABEL_SELECTOR,
    "maxUnavailable": INT_OR_STRING, "unhealthyPodEvictionPolicy": STRING}),
    status=Struct("PodDisruptionBudgetStatus", {
        "observedGeneration": INT64, "disruptedPods": MapOf(TIME),
        "disruptionsAllowed": INT32, "currentHealthy": INT32, "desiredHealthy": INT32,
        "expectedPods": INT32, "conditions": ListOf(CONDITION, key="type")}))

# --- rbac.authorization.k8s.io/v1 ---------------------------------------------------------

POLICY_RULE = Struct("PolicyRule", {"verbs": STRINGS, "apiGroups": STRINGS,
                                    "resources": STRINGS, "resourceNames": STRINGS,
                                    "nonResourceURLs": STRINGS})
SUBJECT = Struct("Subject", {"kind": STRING, "apiGroup": STRING, "name": STRING,
                             "namespace": STRING})
ROLE_REF = Struct("RoleRef", {"apiGroup": STRING, "kind": STRING, "name": STRING})
ROLE = top("Role", rules=ListOf(POLICY_RULE))
CLUSTER_ROLE = top("ClusterRole", rules=ListOf(POLICY_RULE), aggregationRule=ANY)
ROLE_BINDING = top("RoleBinding", subjects=ListOf(SUBJECT), roleRef=ROLE_REF)
CLUSTER_ROLE_BINDING = top("ClusterRoleBinding", subjects=ListOf(SUBJECT), roleRef=ROLE_REF)

# --- coordination.k8s.io/v1 ---------------------------------------------------------------

LEASE = top("Lease", spec=Struct("LeaseSpec", {
    "holderIdentity": STRING, "leaseDurationSeconds": INT32, "acquireTime": MICRO,
    "renewTime": MICRO, "leaseTransitions": INT32, "strategy": STRING,
    "preferredHolder": STRING}))

# --- admissionregistration.k8s.io/v1 ------------------------------------------------------

SERVICE_REF = Struct("ServiceReference", {"namespace": STRING, "name": STRING, "path": STRING,
                                          "port": INT32})
WEBHOOK_CLIENT_CONFIG = Struct("WebhookClientConfig", {"url": STRING, "service": SERVICE_REF,
                                                       "caBundle": BYTES})
RULE_WITH_OPS = Struct("RuleWithOperations", {"operations": STRINGS, "apiGroups": STRINGS,
                                              "apiVersions": STRINGS, "resources": STRINGS,
                                              "scope": STRING})
MATCH_CONDITION = Struct("MatchCondition", {"name": STRING, "expression": STRING})
_WEBHOOK_FIELDS = {
    "name": STRING, "clientConfig": WEBHOOK_CLIENT_CONFIG, "rules": ListOf(RULE_WITH_OPS),
    "failurePolicy": STRING, "matchPolicy": STRING, "namespaceSelector": LABEL_SELECTOR,
    "objectSelector": LABEL_SELECTOR, "sideEffects": STRING, "timeoutSeconds": INT32,
    "admissionReviewVersions": STRINGS,
    "matchConditions": ListOf(MATCH_CONDITION, key="name")}
VALIDATING_WEBHOOK_CONFIGURATION = top(
    "ValidatingWebhookConfiguration",
    webhooks=ListOf(Struct("ValidatingWebhook", _WEBHOOK_FIELDS), key="name"))
MUTATING_WEBHOOK_CONFIGURATION = top(
    "MutatingWebhookConfiguration",
    webhooks=ListOf(Struct("MutatingWebhook", {**_WEBHOOK_FIELDS,
                                               "reinvocationPolicy": STRING}), key="name"))

# --- apiextensions.k8s.io/v1 --------------------------------------------------------------

CRD_NAMES = Struct("CustomResourceDefinitionNames", {
    "plural": STRING, "singular": STRING, "shortNames": STRINGS, "kind": STRING,
    "listKind": STRING, "categories": STRINGS})
CRD = top("CustomResourceDefinition", spec=Struct("CustomResourceDefinitionSpec", {
    "group": STRING, "names": CRD_NAMES, "scope": STRING,
    "versions": ListOf(Struct("CustomResourceDefinitionVersion", {
        "name": STRING, "served": BOOL, "storage": BOOL, "deprecated": BOOL,
        "deprecationWarning": STRING,
        "schema": Struct("CustomResourceValidation", {"openAPIV3Schema": ANY}),
        "subresources": ANY, "additionalPrinterColumns": ANY, "selectableFields": ANY})),
    "conversion": Struct("CustomResourceConversion", {
        "strategy": STRING,
        "webhook": Struct("WebhookConversion", {
            "clientConfig": WEBHOOK_CLIENT_CONFIG, "conversionReviewVersions": STRINGS})}),
    "preserveUnknownFields": BOOL}),
    status=Struct("CustomResourceDefinitionStatus", {
        "conditions": ListOf(CONDITION, ssa_key="type"), "acceptedNames": CRD_NAMES,
        "storedVersions": STRINGS}))

# --- apiregistration.k8s.io/v1 ------------------------------------------------------------

APISERVICE = top("APIService", spec=Struct("APIServiceSpec", {
    "service": Struct("ServiceReference", {"namespace": STRING, "name": STRING,
                                           "port": INT32}),
    "group": STRING, "version": STRING, "insecureSkipTLSVerify": BOOL, "caBundle": BYTES,
    "groupPriorityMinimum": INT32, "versionPriority": INT32}),
    status=Struct("APIServiceStatus", {"conditions": ListOf(CONDITION, key="type")}))

# --- authorization.k8s.io/v1 --------------------------------------------------------------

SSAR = top("SelfSubjectAccessReview", spec=Struct("SelfSubjectAccessReviewSpec", {
    "resourceAttributes": Struct("ResourceAttributes", {
        "namespace": STRING, "verb": STRING, "group": STRING, "version": STRING,
        "resource": STRING, "subresource": STRING, "name": STRING, "fieldSelector": ANY,
        "labelSelector": ANY}),
    "nonResourceAttributes": Struct("NonResourceAttributes", {"path": STRING,
                                                              "verb": STRING})}),
    status=ANY)

SCHEMAS = {
    ("", "Secret"): SECRET, ("", "ConfigMap"): CONFIG_MAP, ("", "Namespace"): NAMESPACE,
    ("", "ServiceAccount"): SERVICE_ACCOUNT, ("", "Service"): SERVICE, ("", "Event"): EVENT,
    ("", "Pod"): POD, ("events.k8s.io", "Event"): EVENT_V1,
    ("coordination.k8s.io", "Lease"): LEASE, ("discovery.k8s.io", "EndpointSlice"): ENDPOINT_SLICE,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"):
        VALIDATING_WEBHOOK_CONFIGURATION,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"):
        MUTATING_WEBHOOK_CONFIGURATION,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): CRD,
    ("apiregistration.k8s.io", "APIService"): APISERVICE,
    ("apps", "Deployment"): DEPLOYMENT, ("batch", "Job"): JOB,
    ("rbac.authorization.k8s.io", "Role"): ROLE,
    ("rbac.authorization.k8s.io", "ClusterRole"): CLUSTER_ROLE,
    ("rbac.authorization.k8s.io", "RoleBinding"): ROLE_BINDING,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): CLUSTER_ROLE_BINDING,
    ("authorization.k8s.io", "SelfSubjectAccessReview"): SSAR,
    ("networking.k8s.io", "NetworkPolicy"): NETWORK_POLICY,
    ("policy", "PodDisruptionBudget"): POD_DISRUPTION_BUDGET,
}


# --- custom resources ----------------------------------------------------------------------
#
# A custom resource is decoded as unstructured JSON: nothing is refused for its type (the
# openAPIV3Schema validation in kinds.py reports a wrong type as 422, as the apiextensions
# server does), but fields the structural schema does not have are pruned, and reported as
# unknown fields under fieldValidation. The nodes below are the lenient counterparts of the
# built-in ones, so that patches and server-side apply see the same list types.

class _CRStruct(Struct):
    def decode(self, value, path, ctx):
        return super().decode(value, path, ctx) if isinstance(value, dict) else value


class _CRMap(MapOf):
    def decode(self, value, path, ctx):
        if not isinstance(value, dict):
            return value
        return {k: self.value.decode(v, f"{path}[{k}]", ctx) for k, v in value.items()
                if v is not None}


class _CRList(ListOf):
    def decode(self, value, path, ctx):
        if not isinstance(value, list):
            return value
        return [self.item.decode(v, f"{path}[{i}]", ctx) for i, v in enumerate(value)]


class _CRScalar(Scalar):
    def decode(self, value, path, ctx):
        return value


_CR_SCALARS = {"string": "string", "integer": "int64", "number": "float64",
               "boolean": "bool"}


def from_openapi(props, name="Object"):
    """A node for a structural openAPIV3Schema (the subset CRDs use)."""
    if props.get("x-kubernetes-int-or-string"):
        return _CRScalar("string")  # its type is checked by the validation, not here
    if props.get("x-kubernetes-embedded-resource"):
        return ANY
    type_ = props.get("type")
    if type_ == "object" or "properties" in props:
        if "properties" in props:
            fields = {k: from_openapi(v, k) for k, v in props["properties"].items()}
            return _CRStruct(name, fields,
                             open=bool(props.get("x-kubernetes-preserve-unknown-fields")))
        additional = props.get("additionalProperties")
        if isinstance(additional, dict):
            return _CRMap(from_openapi(additional, name))
        if props.get("x-kubernetes-preserve-unknown-fields") or additional is True:
            return ANY
        return _CRStruct(name, {})  # an object without fields: everything in it is pruned
    if type_ == "array":
        keys = props.get("x-kubernetes-list-map-keys") or []
        list_type = props.get("x-kubernetes-list-type")
        return _CRList(from_openapi(props.get("items") or {}, name),
                       set=list_type == "set",
                       ssa_key=keys[0] if list_type == "map" and len(keys) == 1 else None)
    if type_ in _CR_SCALARS:
        return _CRScalar(_CR_SCALARS[type_])
    return ANY


def custom_resource_schema(res):
    """The node of a custom resource: apiVersion, kind and ObjectMeta whatever the schema
    says about them, the schema's own fields beside them."""
    root = from_openapi(res.openapi, res.kind)
    fields = dict(root.fields) if isinstance(root, Struct) else {}
    fields.update(apiVersion=STRING, kind=STRING, metadata=OBJECT_META)
    return _CRStruct(res.kind, fields, open=not isinstance(root, Struct) or root.open)


def for_resource(res):
    if res.custom:
        node = getattr(res, "schema_node", None)
        if node is None:
            node = res.schema_node = custom_resource_schema(res)
        return node
    return SCHEMAS[(res.group, res.kind)]


def child(node, name):
    """The schema of a map/struct member; ANY when unknown."""
    if isinstance(node, (Struct, MapOf)):
        return node.child(name)
    return ANY
