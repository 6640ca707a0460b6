"""Decoding of application/vnd.kubernetes.protobuf request bodies (wire spec section 10).

client-go's typed clients (kubectl create secret|configmap|namespace|serviceaccount|service,
kubectl auth can-i) send protobuf. The body is the magic "k8s\\0" plus a runtime.Unknown
{1 typeMeta{1 apiVersion, 2 kind}, 2 raw}; raw is the object message. Only the kinds
those commands send are described; fields the server sets (uid, timestamps) are skipped.
"""

from . import codec, errors

MAGIC = b"k8s\x00"


def _varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(buf):
    """[(field number, value)]: ints for varints, bytes for length-delimited fields."""
    out, i = [], 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            length, i = _varint(buf, i)
            value = bytes(buf[i:i + length])
            if len(value) != length:
                raise ValueError("truncated field")
            i += length
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.append((number, value))
    return out


# Message descriptions: field number -> (json name, type). Types: "string", "bool", "int",
# "int0" and "bool0" (omitempty: a zero value is left out), "intstr" (IntOrString), "map"
# (string->string), "bmap" (string->bytes, base64 in JSON), a nested dict (a message), or a
# one-element list for repeated fields.
OWNER_REF = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"),
             5: ("apiVersion", "string"), 6: ("controller", "bool"),
             7: ("blockOwnerDeletion", "bool")}
OBJECT_META = {1: ("name", "string"), 2: ("generateName", "string"),
               3: ("namespace", "string"), 6: ("resourceVersion", "string"),
               11: ("labels", "map"), 12: ("annotations", "map"),
               13: ("ownerReferences", [OWNER_REF]), 14: ("finalizers", ["string"])}
OBJECT_REF = {1: ("kind", "string"), 2: ("namespace", "string"), 3: ("name", "string"),
              4: ("uid", "string"), 5: ("apiVersion", "string"),
              6: ("resourceVersion", "string"), 7: ("fieldPath", "string")}
INT_OR_STRING = "intstr"
SERVICE_PORT = {1: ("name", "string"), 2: ("protocol", "string"), 3: ("port", "int"),
                4: ("targetPort", INT_OR_STRING), 5: ("nodePort", "int0"),
                6: ("appProtocol", "string")}
SERVICE_SPEC = {
    1: ("ports", [SERVICE_PORT]), 2: ("selector", "map"), 3: ("clusterIP", "string"),
    4: ("type", "string"), 5: ("externalIPs", ["string"]), 7: ("sessionAffinity", "string"),
    8: ("loadBalancerIP", "string"), 9: ("loadBalancerSourceRanges", ["string"]),
    10: ("externalName", "string"), 11: ("externalTrafficPolicy", "string"),
    12: ("healthCheckNodePort", "int0"), 13: ("publishNotReadyAddresses", "bool0"),
    14: ("sessionAffinityConfig", {1: ("clientIP", {1: ("timeoutSeconds", "int")})}),
    17: ("ipFamilyPolicy", "string"), 18: ("clusterIPs", ["string"]),
    19: ("ipFamilies", ["string"]), 20: ("allocateLoadBalancerNodePorts", "bool"),
    21: ("loadBalancerClass", "string"), 22: ("internalTrafficPolicy", "string"),
    23: ("trafficDistribution", "string")}
MESSAGES = {
    "Secret": {1: ("metadata", OBJECT_META), 2: ("data", "bmap"), 3: ("type", "string"),
               4: ("stringData", "map"), 5: ("immutable", "bool")},
    "ConfigMap": {1: ("metadata", OBJECT_META), 2: ("data", "map"),
                  3: ("binaryData", "bmap"), 4: ("immutable", "bool")},
    "Namespace": {1: ("metadata", OBJECT_META),
                  2: ("spec", {1: ("finalizers", ["string"])}),
                  3: ("status", {1: ("phase", "string")})},
    "ServiceAccount": {1: ("metadata", OBJECT_META), 2: ("secrets", [OBJECT_REF]),
                       3: ("imagePullSecrets", [{1: ("name", "string")}]),
                       4: ("automountServiceAccountToken", "bool")},
    "Service": {1: ("metadata", OBJECT_META), 2: ("spec", SERVICE_SPEC)},
    "SelfSubjectAccessReview": {
        1: ("metadata", OBJECT_META),
        2: ("spec", {
            1: ("resourceAttributes", {
                1: ("namespace", "string"), 2: ("verb", "string"), 3: ("group", "string"),
                4: ("version", "string"), 5: ("resource", "string"),
                6: ("subresource", "string"), 7: ("name", "string")}),
            2: ("nonResourceAttributes", {1: ("path", "string"), 2: ("verb", "string")})})},
}


def _int(raw):
    """A varint as a signed 64-bit value (negative int32s are sign-extended)."""
    return raw - (1 << 64) if raw >= 1 << 63 else raw


def _value(kind, raw):
    if kind == "string":
        return raw.decode("utf-8")
    if kind in ("bool", "bool0"):
        return bool(raw)
    if kind in ("int", "int0"):
        return _int(raw)
    if kind == INT_OR_STRING:
        fields = dict(_fields(raw))
        return fields.get(3, b"").decode("utf-8") if fields.get(1) == 1 else \
            _int(fields.get(2, 0))
    return _message(kind, raw)


def _map_entry(raw, value_kind):
    entry = dict(_fields(raw))
    key = entry.get(1, b"").decode("utf-8")
    value = entry.get(2, b"")
    return key, codec.b64encode(value) if value_kind == "bmap" else value.decode("utf-8")


def _message(desc, raw):
    out = {}
    for number, value in _fields(raw):
        if number not in desc:
            continue
        name, kind = desc[number]
        if kind in ("map", "bmap"):
            k, v = _map_entry(value, kind)
            out.setdefault(name, {})[k] = v
        elif isinstance(kind, list):
            out.setdefault(name, []).append(_value(kind[0], value))
        else:
            out[name] = _value(kind, value)
    # Go's JSON encoding omits empty strings and empty messages (omitempty).
    zero_omitted = {name for name, kind in desc.values() if kind in ("int0", "bool0")}
    return {k: v for k, v in out.items()
            if not (isinstance(v, (str, dict)) and not v) and not (k in zero_omitted and not v)}


def decode(body):
    """Decode a protobuf body into the JSON object model; ApiError 400 when malformed."""
    if not body.startswith(MAGIC):
        raise errors.bad_request("provided input is not a protobuf-encoded object")
    try:
        unknown = dict(_fields(body[len(MAGIC):]))
        type_meta = dict(_fields(unknown.get(1, b"")))
        api_version = type_meta.get(1, b"").decode("utf-8")
        kind = type_meta.get(2, b"").decode("utf-8")
        if kind not in MESSAGES:
            raise errors.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json, application/yaml")
        obj = _message(MESSAGES[kind], unknown.get(2, b""))
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.bad_request(f"unable to decode protobuf body: {e}") from None
    obj["apiVersion"] = api_version
    obj["kind"] = kind
    return obj
