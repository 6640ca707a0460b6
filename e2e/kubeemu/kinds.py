"""Per-kind registry strategies: defaults, create/update preparation, validation.

Mirrors the strategy.go/validation.go pairs of the real registry for the kinds the wire
spec (section 6) describes; the remaining kinds get the generic ObjectMeta checks only.
Validators return lists of errors.FieldError; the caller turns them into one 422.
"""

import ipaddress
import json
import random
import re
import ssl
import urllib.parse

from . import codec, errors
from .errors import duplicate, forbidden_field, invalid, not_supported, required
from .selectors import label_key_errors, label_value_errors

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
             "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
             "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
               "start with an alphabetic character, and end with an alphanumeric character "
               "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
               "'[a-z]([-a-z0-9]*[a-z0-9])?')")
CONFIG_KEY_MSG = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                  "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                  "is '[-._a-zA-Z0-9]+')")
SECRET_MAX_BYTES = 1024 * 1024
ANNOTATIONS_MAX_BYTES = 256 * 1024


def subdomain_errors(value):
    msgs = []
    if len(value) > 253:
        msgs.append("must be no more than 253 characters")
    if not _SUBDOMAIN.match(value):
        msgs.append(SUBDOMAIN_MSG)
    return msgs


def label_errors(value):
    msgs = []
    if len(value) > 63:
        msgs.append("must be no more than 63 characters")
    if not _LABEL.match(value):
        msgs.append(LABEL_MSG)
    return msgs


def dns1035_errors(value):
    msgs = []
    if len(value) > 63:
        msgs.append("must be no more than 63 characters")
    if not _DNS1035.match(value):
        msgs.append(DNS1035_MSG)
    return msgs


def go_bytes(b64):
    """%#v of a []byte, as field.Invalid prints a caBundle."""
    data = codec.go_b64decode(b64)
    return errors.GoRepr("[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}")


def _condition(type_, status, reason, message):
    return {"type": type_, "status": status, "lastTransitionTime": codec.fmt_time(codec.now()),
            "reason": reason, "message": message}


# --- generic ObjectMeta -------------------------------------------------------------------

def validate_meta(obj, name_rule):
    meta = obj.get("metadata") or {}
    errs = []
    name = meta.get("name", "")
    if name:
        check = {"label": label_errors, "dns1035": dns1035_errors}.get(name_rule,
                                                                       subdomain_errors)
        if name_rule != "any":
            errs += [invalid("metadata.name", name, m) for m in check(name)]
    for k, v in (meta.get("labels") or {}).items():
        errs += [invalid("metadata.labels", k, m) for m in label_key_errors(k)]
        errs += [invalid("metadata.labels", v, m) for m in label_value_errors(v)]
    annotations = meta.get("annotations") or {}
    for k in annotations:
        errs += [invalid("metadata.annotations", k, m) for m in label_key_errors(k.lower())]
    if sum(len(k) + len(v) for k, v in annotations.items()) > ANNOTATIONS_MAX_BYTES:
        errs.append(errors.FieldError("TooLong", "metadata.annotations",
                                      detail=f"must have at most {ANNOTATIONS_MAX_BYTES} bytes"))
    return errs


def validate_label_selector(sel, path):
    errs = []
    if not isinstance(sel, dict):
        return errs
    for k, v in (sel.get("matchLabels") or {}).items():
        errs += [invalid(f"{path}.matchLabels", k, m) for m in label_key_errors(k)]
        errs += [invalid(f"{path}.matchLabels", v, m) for m in label_value_errors(v)]
    for i, req in enumerate(sel.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op, values = req.get("operator", ""), req.get("values") or []
        if op in ("In", "NotIn") and not values:
            errs.append(required(f"{p}.values", "must be specified when `operator` is 'In' or "
                                                "'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            errs.append(forbidden_field(f"{p}.values", "may not be specified when `operator` "
                                                       "is 'Exists' or 'DoesNotExist'"))
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errs.append(invalid(f"{p}.operator", op, "not a valid selector operator"))
        errs += [invalid(f"{p}.key", req.get("key", ""), m)
                 for m in label_key_errors(req.get("key", ""))]
    return errs


class Kind:
    """The default strategy: ObjectMeta validation only."""
    name_rule = "subdomain"

    def defaults(self, obj):
        pass

    def prepare_create(self, obj):
        pass

    def prepare_update(self, new, old):
        pass

    def allocate(self, obj, old, store):
        """Values the registry hands out from cluster-wide pools (after defaults)."""

    def validate(self, obj, old):
        return []

    def present(self, obj):
        """Shape a copy of the stored object as the API server serializes it."""


class NamespaceKind(Kind):
    name_rule = "label"

    def defaults(self, obj):
        name = obj["metadata"].get("name", "")
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name

    def prepare_create(self, obj):
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}

    def prepare_update(self, new, old):
        new["spec"] = old.get("spec", {})


class SecretKind(Kind):
    # Extra keys each well-known Secret type requires (ValidateSecret).
    _TYPE_KEYS = {"kubernetes.io/tls": ["tls.crt", "tls.key"],
                  "kubernetes.io/ssh-auth": ["ssh-privatekey"],
                  "kubernetes.io/dockercfg": [".dockercfg"],
                  "kubernetes.io/dockerconfigjson": [".dockerconfigjson"]}

    def defaults(self, obj):
        obj.setdefault("type", "Opaque")
        # stringData is write-only: merged into data on every write, never stored.
        string_data = obj.pop("stringData", None) or {}
        if string_data:
            data = obj.setdefault("data", {})
            for k, v in string_data.items():
                data[k] = codec.b64encode(v.encode("utf-8"))

    def validate(self, obj, old):
        errs = []
        data = obj.get("data") or {}
        total = 0
        for k, v in data.items():
            if not _CONFIG_KEY.match(k) or len(k) > 253 or k in (".", "..") or \
                    k.startswith(".."):
                errs.append(invalid(f"data[{k}]", k, CONFIG_KEY_MSG))
            total += len(codec.go_b64decode(v))
        if total > SECRET_MAX_BYTES:
            errs.append(errors.too_long("data", SECRET_MAX_BYTES))
        type_ = obj.get("type", "")
        for key in self._TYPE_KEYS.get(type_, []):
            if key not in data:
                errs.append(required(f"data[{key}]"))
        if type_ == "kubernetes.io/service-account-token" and not \
                (obj["metadata"].get("annotations") or {}).get(
                    "kubernetes.io/service-account.name"):
            errs.append(required("metadata.annotations[kubernetes.io/service-account.name]"))
        if type_ == "kubernetes.io/basic-auth" and "username" not in data and \
                "password" not in data:
            errs.append(required("data[username]"))
        if old is not None:
            if type_ != old.get("type", ""):
                errs.append(invalid("type", type_, "field is immutable"))
            if old.get("immutable"):
                if not obj.get("immutable"):
                    errs.append(forbidden_field("immutable", "field is immutable when "
                                                             "`immutable` is set"))
                if data != (old.get("data") or {}):
                    errs.append(forbidden_field("data", "field is immutable when `immutable` is "
                                                        "set"))
        return errs


class ConfigMapKind(Kind):
    def validate(self, obj, old):
        errs = []
        data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
        for field, values in (("data", data), ("binaryData", binary)):
            for k in values:
                if not _CONFIG_KEY.match(k) or len(k) > 253 or k in (".", ".."):
                    errs.append(invalid(f"{field}[{k}]", k, CONFIG_KEY_MSG))
        for k in set(data) & set(binary):
            errs.append(invalid(f"data[{k}]", k, "duplicate of key present in binaryData"))
        if old is not None and old.get("immutable"):
            if not obj.get("immutable"):
                errs.append(forbidden_field("immutable", "field is immutable when `immutable` "
                                                         "is set"))
            if data != (old.get("data") or {}) or binary != (old.get("binaryData") or {}):
                errs.append(forbidden_field("data", "field is immutable when `immutable` is "
                                                    "set"))
        return errs


# --- core/v1 Service ----------------------------------------------------------------------

SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
PORT_NUM_MSG = "must be between 1 and 65535, inclusive"
IP_MSG = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
CIDR_MSG = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
# A default single-stack cluster's --service-cluster-ip-range and --service-node-port-range.
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
NODE_PORT_MIN, NODE_PORT_MAX = 30000, 32767
# A real cluster's `kubernetes` Service holds the range's first address.
_RESERVED_CLUSTER_IPS = {"10.96.0.1"}
# The allocators hand out addresses and ports above a band kept for explicit requests.
_CLUSTER_IP_STATIC_BAND = 256
_NODE_PORT_STATIC_BAND = 86
_PORT_NAME = re.compile(r"^[-a-z0-9]+$")
_KUBELET_PORT = 10250
_TOPOLOGY_HINTS = "service.kubernetes.io/topology-aware-hints"
_TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"
_LB_SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"


def parse_ip(value):
    """netutils.ParseIPSloppy, without zones (Go's parser has none)."""
    if not isinstance(value, str) or "%" in value:
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def _unmapped(ip):
    """Go's net.IP treats an IPv4-mapped IPv6 address as the IPv4 address."""
    return ip.ipv4_mapped if ip.version == 6 and ip.ipv4_mapped else ip


def ip_family(ip):
    return "IPv4" if _unmapped(ip).version == 4 else "IPv6"


def port_name_errors(name):
    """IsValidPortName."""
    msgs = []
    if len(name) > 15:
        msgs.append("must be no more than 15 characters")
    if not _PORT_NAME.match(name):
        msgs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", name):
        msgs.append("must contain at least one letter (a-z)")
    if "--" in name:
        msgs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        msgs.append("must not begin or end with a hyphen")
    return msgs


def endpoint_ip_errors(value, path):
    """ValidateEndpointIP: addresses that make no sense as a destination."""
    ip = parse_ip(value)
    if ip is None:
        return [invalid(path, value, "must be a valid IP address")]
    ip = _unmapped(ip)
    errs = []
    if ip.is_unspecified:
        errs.append(invalid(path, value, f"may not be unspecified ({value})"))
    if ip.is_loopback:
        errs.append(invalid(path, value, "may not be in the loopback range (127.0.0.0/8, "
                                         "::1/128)"))
    if ip.is_link_local:
        errs.append(invalid(path, value, "may not be in the link-local range (169.254.0.0/16, "
                                         "fe80::/10)"))
    packed = ip.packed
    if ip.version == 4 and packed[:3] == b"\xe0\x00\x00" or \
            ip.version == 6 and packed[0] == 0xff and packed[1] & 0x0f == 0x02:
        errs.append(invalid(path, value, "may not be in the link-local multicast range "
                                         "(224.0.0.0/24, ff02::/10)"))
    return errs


def validate_labels(labels, path):
    """metav1 ValidateLabels."""
    errs = []
    for k, v in (labels or {}).items():
        errs += [invalid(path, k, m) for m in label_key_errors(k)]
        errs += [invalid(path, v, m) for m in label_value_errors(v)]
    return errs


def _service_port_repr(protocol, port):
    """%#v of the core.ServicePort key a duplicate (protocol, port) is reported with."""
    return errors.GoRepr(
        f'core.ServicePort{{Name:"", Protocol:{json.dumps(protocol)}, '
        f'AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, '
        f'IntVal:0, StrVal:""}}, NodePort:0}}')


def _ports(spec):
    return [p for p in spec.get("ports") or [] if isinstance(p, dict)]


def _headless(spec):
    return spec.get("clusterIPs") == ["None"]


def _externally_accessible(spec):
    t = spec.get("type")
    return t in ("LoadBalancer", "NodePort") or t == "ClusterIP" and bool(spec.get("externalIPs"))


def _needs_cluster_ip(spec):
    return spec.get("type") != "ExternalName"


def _needs_node_port(spec):
    return spec.get("type") in ("NodePort", "LoadBalancer")


def _needs_health_check(spec):
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def _allocates_node_ports(spec):
    return spec.get("type") == "NodePort" or \
        spec.get("type") == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True)


def _node_ports(spec):
    return {p["nodePort"] for p in _ports(spec) if p.get("nodePort")}


def _patch_allocated_values(spec, old):
    """Allocated values a resubmitted manifest leaves out are kept (patchAllocatedValues)."""
    if _needs_cluster_ip(old) and _needs_cluster_ip(spec):
        if not spec.get("clusterIP") and old.get("clusterIP"):
            spec["clusterIP"] = old["clusterIP"]
        if not spec.get("clusterIPs") and old.get("clusterIPs"):
            spec["clusterIPs"] = list(old["clusterIPs"])
    if _needs_node_port(old) and _needs_node_port(spec):
        used = _node_ports(old) & _node_ports(spec)
        by_name = {p.get("name", ""): p.get("nodePort", 0) for p in _ports(old)}
        for p in _ports(spec):
            value = by_name.get(p.get("name", ""), 0)
            if not p.get("nodePort") and value and value not in used:
                p["nodePort"] = value
    if _needs_health_check(old) and _needs_health_check(spec) and \
            not spec.get("healthCheckNodePort") and old.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = old["healthCheckNodePort"]


def _normalize_cluster_ips(spec, old):
    """Keeps clusterIPs in step with clusterIP for clients that set only the singular."""
    if old is None:
        if spec.get("clusterIP") and not spec.get("clusterIPs"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        return
    ip, old_ip = spec.get("clusterIP", ""), old.get("clusterIP", "")
    if old.get("clusterIPs") and not spec.get("clusterIPs") and ip == old_ip:
        spec["clusterIPs"] = list(old["clusterIPs"])
    if ip != old_ip:
        same_plural = (spec.get("clusterIPs") or []) == (old.get("clusterIPs") or [])
        if old_ip and not ip:
            if same_plural:
                spec.pop("clusterIPs", None)
        elif same_plural:
            spec["clusterIPs"] = [ip]


def _drop_type_dependent_fields(new, old):
    """What a type change leaves behind and the user did not also change is wiped."""
    spec, ospec = new["spec"], old.get("spec") or {}

    def same(field):
        return spec.get(field) == ospec.get(field)
    if _needs_cluster_ip(ospec) and not _needs_cluster_ip(spec):
        if same("clusterIP") and (spec.get("clusterIPs") or []) == (ospec.get("clusterIPs")
                                                                      or []):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        if same("ipFamilies"):
            spec.pop("ipFamilies", None)
        if same("ipFamilyPolicy"):
            spec.pop("ipFamilyPolicy", None)
    if _needs_node_port(ospec) and not _needs_node_port(spec) and \
            _node_ports(spec) <= _node_ports(ospec):
        for p in _ports(spec):
            p.pop("nodePort", None)
    if _needs_health_check(ospec) and not _needs_health_check(spec) and \
            same("healthCheckNodePort"):
        spec.pop("healthCheckNodePort", None)
    if ospec.get("type") == "LoadBalancer" and spec.get("type") != "LoadBalancer":
        if "allocateLoadBalancerNodePorts" in spec and same("allocateLoadBalancerNodePorts"):
            del spec["allocateLoadBalancerNodePorts"]
        if same("loadBalancerClass"):
            spec.pop("loadBalancerClass", None)
    if _externally_accessible(ospec) and not _externally_accessible(spec) and \
            same("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)
    if spec.get("type") != "LoadBalancer":
        new.setdefault("status", {})["loadBalancer"] = {}


def _cluster_ips_errors(spec):
    """ValidateServiceClusterIPsRelatedFields."""
    if spec.get("type") == "ExternalName":
        return []
    errs = []
    ip, ips, families = spec.get("clusterIP", ""), spec.get("clusterIPs") or [], \
        spec.get("ipFamilies") or []
    if ip:
        if not ips:
            errs.append(required("spec.clusterIPs"))
        elif ips[0] != ip:
            errs.append(invalid("spec.clusterIPs", ips, "first value must match `clusterIP`"))
    elif ips:
        errs.append(invalid("spec.clusterIPs", ips, "must be empty when `clusterIP` is not "
                                                    "specified"))
    seen = set()
    for i, family in enumerate(families):
        if family not in ("IPv4", "IPv6"):
            errs.append(not_supported(f"spec.ipFamilies[{i}]", family, ["IPv4", "IPv6"]))
        if family in seen:
            errs.append(duplicate(f"spec.ipFamilies[{i}]", family))
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in ("PreferDualStack", "RequireDualStack",
                                             "SingleStack"):
        errs.append(not_supported("spec.ipFamilyPolicy", policy,
                                  ["PreferDualStack", "RequireDualStack", "SingleStack"]))
    bad_ips = False
    for i, value in enumerate(ips):
        if i == 0 and value == "None":
            if len(ips) > 1:
                bad_ips = True
                errs.append(invalid("spec.clusterIPs", ips, "'None' must be the first and only "
                                                            "value"))
            continue
        if parse_ip(value) is None:
            bad_ips = True
            errs.append(invalid(f"spec.clusterIPs[{i}]", value, IP_MSG))
    if len(ips) > 2:
        errs.append(invalid("spec.clusterIPs", ips, "may only hold up to 2 values"))
    if bad_ips:
        return errs
    if len(ips) > 1 and len({ip_family(parse_ip(v)) for v in ips}) != len(ips):
        errs.append(invalid("spec.clusterIPs", ips, "may specify no more than one IP for each "
                                                    "IP family"))
    if not _headless(spec):
        for i, (value, family) in enumerate(zip(ips, families)):
            actual = ip_family(parse_ip(value))
            if family in ("IPv4", "IPv6") and actual != family:
                errs.append(invalid(f"spec.clusterIPs[{i}]", value, f"expected an {family} "
                                    f"value as indicated by `ipFamilies[{i}]`"))
    return errs


def _init_ip_families(spec, old):
    """initIPFamilyFields for a single-stack IPv4 cluster; returns field errors."""
    if spec.get("type") == "ExternalName":
        return []
    if old is not None and spec.get("ipFamilyPolicy") == "PreferDualStack" and \
            old.get("ipFamilyPolicy") == "PreferDualStack" and \
            spec.get("clusterIPs") == old.get("clusterIPs") and \
            spec.get("ipFamilies") == old.get("ipFamilies"):
        return []
    if "ipFamilyPolicy" not in spec:
        if old is not None and old.get("ipFamilyPolicy"):
            spec["ipFamilyPolicy"] = old["ipFamilyPolicy"]
        elif spec.get("clusterIP") == "None" and not spec.get("selector"):
            spec["ipFamilyPolicy"] = "RequireDualStack"
        else:
            spec["ipFamilyPolicy"] = "SingleStack"
    errs = _cluster_ips_errors(spec)
    if errs:
        return errs
    policy, ips = spec["ipFamilyPolicy"], spec.get("clusterIPs") or []
    families = spec.setdefault("ipFamilies", [])
    if policy == "SingleStack":
        if len(ips) == 2:
            errs.append(invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or "
                                "'PreferDualStack' when multiple cluster IPs are specified"))
        if len(families) == 2:
            errs.append(invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or "
                                "'PreferDualStack' when multiple IP families are specified"))
    for i, value in enumerate(ips):
        if value == "None":
            break
        family = ip_family(parse_ip(value))
        if i >= len(families):
            if family != "IPv4":
                errs.append(invalid(f"spec.clusterIPs[{i}]", ips,
                                    f"{family} is not configured on this cluster"))
            else:
                families.append(family)
    if errs:
        return errs
    if spec.get("clusterIP") == "None" and not spec.get("selector"):
        # Headless without a selector may claim both families even on a single-stack cluster.
        if not families:
            families.append("IPv4")
        if len(families) < 2 and policy != "SingleStack":
            families.append("IPv6" if families[0] == "IPv4" else "IPv4")
        return []
    if policy == "RequireDualStack":
        errs.append(invalid("spec.ipFamilyPolicy", policy, "this cluster is not configured for "
                                                           "dual-stack services"))
    for i, family in enumerate(families):
        if family != "IPv4":
            errs.append(invalid(f"spec.ipFamilies[{i}]", family, "not configured on this "
                                                                 "cluster"))
    if not errs and not families:
        families.append("IPv4")
    return errs


def _cluster_ip_problem(value, in_use):
    ip = parse_ip(value)
    if ip not in SERVICE_CIDR or ip in (SERVICE_CIDR.network_address,
                                        SERVICE_CIDR.broadcast_address):
        return (f"the provided IP ({value}) is not in the valid range. The range of valid IPs "
                f"is {SERVICE_CIDR}")
    if str(ip) in in_use:
        return "provided IP is already allocated"
    return None


def _node_port_problem(port, in_use):
    if not NODE_PORT_MIN <= port <= NODE_PORT_MAX:
        return (f"provided port is not in the valid range. The range of valid ports is "
                f"{NODE_PORT_MIN}-{NODE_PORT_MAX}")
    if port in in_use:
        return "provided port is already allocated"
    return None


def _next_free(candidates, in_use, what):
    """A random free value, preferring the dynamic band as the allocators do."""
    for band in candidates:
        free = [v for v in band if v not in in_use] if len(band) < 100000 else None
        if free is None:  # the address range: sample instead of listing a million values
            for _ in range(1000):
                value = band[random.randrange(len(band))]
                if value not in in_use:
                    return value
            continue
        if free:
            return random.choice(free)
    raise errors.internal(f"failed to allocate a {what}: range is full")


class ServiceKind(Kind):
    """core/v1 Service: SetDefaults_Service, the REST storage's cluster IP and node port
    allocation (a single-stack IPv4 cluster) and ValidateService."""
    name_rule = "dns1035"

    def defaults(self, obj):
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        if not spec.get("sessionAffinity"):
            spec["sessionAffinity"] = "None"
        if spec["sessionAffinity"] == "None":
            spec.pop("sessionAffinityConfig", None)
        elif spec["sessionAffinity"] == "ClientIP":
            client_ip = (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}
            if "timeoutSeconds" not in client_ip:
                spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
        if not spec.get("type"):
            spec["type"] = "ClusterIP"
        if "ports" in spec:
            # A null element decodes as a zero ServicePort.
            spec["ports"] = [p if isinstance(p, dict) else {} for p in spec["ports"]]
        for p in _ports(spec):
            if not p.get("protocol"):
                p["protocol"] = "TCP"
            if p.get("targetPort") in (None, 0, ""):
                p["targetPort"] = p.get("port", 0)
        if _externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
            spec["externalTrafficPolicy"] = "Cluster"
        if "internalTrafficPolicy" not in spec and \
                spec["type"] in ("ClusterIP", "NodePort", "LoadBalancer"):
            spec["internalTrafficPolicy"] = "Cluster"
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)
            for ingress in ((obj.get("status") or {}).get("loadBalancer") or {}).get(
                    "ingress") or []:
                if isinstance(ingress, dict) and ingress.get("ip"):
                    ingress.setdefault("ipMode", "VIP")

    def prepare_create(self, obj):
        obj["status"] = {"loadBalancer": {}}
        if isinstance(obj.get("spec"), dict):
            _normalize_cluster_ips(obj["spec"], None)

    def prepare_update(self, new, old):
        self.defaults(new)  # decoding defaults before the strategy and the storage run
        spec, ospec = new["spec"], old.get("spec") or {}
        _patch_allocated_values(spec, ospec)
        _normalize_cluster_ips(spec, ospec)
        _drop_type_dependent_fields(new, old)

    def allocate(self, obj, old, store):
        spec, meta = obj["spec"], obj["metadata"]
        ospec = None if old is None else old.get("spec") or {}
        errs = _init_ip_families(spec, ospec)
        if errs:
            raise errors.invalid_object("Service", "", meta.get("name", ""), errs)
        me = (meta.get("namespace", ""), meta.get("name", ""))
        others = [o["spec"] for o in store.list(("", "services"))[1]
                  if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) != me]
        errs = self._allocate_cluster_ips(spec, ospec, others)
        errs = errs or self._allocate_node_ports(spec, ospec, others)
        if errs:
            raise errors.invalid_object("Service", "", meta.get("name", ""), errs)

    @staticmethod
    def _allocate_cluster_ips(spec, old, others):
        # An update allocates only for a Service leaving ExternalName.
        if not _needs_cluster_ip(spec) or _headless(spec) or \
                old is not None and _needs_cluster_ip(old):
            return []
        in_use = set(_RESERVED_CLUSTER_IPS)
        for o in others:
            in_use.update(v for v in o.get("clusterIPs") or [] if v != "None")
        ips = list(spec.get("clusterIPs") or [])
        for i, _ in enumerate(spec.get("ipFamilies") or []):
            if i >= len(ips):
                ips.append("")
            if ips[i]:
                problem = _cluster_ip_problem(ips[i], in_use)
                if problem:
                    return [invalid("spec.clusterIPs", spec.get("clusterIPs") or [],
                                    f"failed to allocate IP {ips[i]}: {problem}")]
            else:
                first = int(SERVICE_CIDR.network_address) + 1
                size = SERVICE_CIDR.num_addresses - 2
                ips[i] = _next_free([range(first + _CLUSTER_IP_STATIC_BAND, first + size),
                                     range(first, first + _CLUSTER_IP_STATIC_BAND)],
                                    {int(ipaddress.ip_address(v)) for v in in_use},
                                    "serviceIP")
                ips[i] = str(ipaddress.ip_address(ips[i]))
            in_use.add(ips[i])
        if ips:
            spec["clusterIPs"] = ips
            spec["clusterIP"] = ips[0]
        return []

    @staticmethod
    def _allocate_node_ports(spec, old, others):
        if not _needs_node_port(spec) and not _needs_health_check(spec):
            return []
        in_use = set()
        for o in others:
            in_use |= _node_ports(o)
            if o.get("healthCheckNodePort"):
                in_use.add(o["healthCheckNodePort"])
        mine = set() if old is None else _node_ports(old) | {old.get("healthCheckNodePort")}
        ranges = [range(NODE_PORT_MIN + _NODE_PORT_STATIC_BAND, NODE_PORT_MAX + 1),
                  range(NODE_PORT_MIN, NODE_PORT_MIN + _NODE_PORT_STATIC_BAND)]
        taken = set()  # this Service's node ports so far
        by_port = {}  # on create, one node port serves a port number under every protocol
        ports = _ports(spec) if _needs_node_port(spec) else []
        for i, p in enumerate(ports):
            wanted = p.get("nodePort", 0)
            if not wanted and not _allocates_node_ports(spec):
                continue
            if not wanted and old is None:
                wanted = by_port.get(p.get("port")) or next(
                    (q.get("nodePort", 0) for q in ports[i + 1:]
                     if q.get("port") == p.get("port") and q.get("nodePort")), 0)
            if wanted:
                if wanted not in mine and wanted not in taken:
                    problem = _node_port_problem(wanted, in_use)
                    if problem:
                        return [invalid(f"spec.ports[{i}].nodePort", wanted, problem)]
            else:
                wanted = _next_free(ranges, in_use | taken | mine, "nodePort")
            p["nodePort"] = wanted
            taken.add(wanted)
            by_port.setdefault(p.get("port"), wanted)
        if _needs_health_check(spec):
            wanted = spec.get("healthCheckNodePort", 0)
            if wanted and wanted not in mine:
                problem = _node_port_problem(wanted, in_use | taken)
                if problem:
                    raise errors.internal(f"failed to allocate requested HealthCheck NodePort "
                                          f"{wanted}: {problem}")
            elif not wanted:
                spec["healthCheckNodePort"] = _next_free(ranges, in_use | taken | mine,
                                                         "nodePort")
        return []

    def validate(self, obj, old):
        spec = obj.get("spec") or {}
        errs = []
        if old is not None:
            errs += _service_update_errors(spec, old.get("spec") or {})
        annotations = obj["metadata"].get("annotations") or {}
        if _TOPOLOGY_MODE in annotations and _TOPOLOGY_HINTS in annotations and \
                annotations[_TOPOLOGY_MODE] != annotations[_TOPOLOGY_HINTS]:
            errs.append(invalid(f"metadata.annotations[{_TOPOLOGY_MODE}]",
                                annotations[_TOPOLOGY_MODE],
                                f"must match annotations[{_TOPOLOGY_HINTS}] when both are "
                                f"specified"))
        type_, ports = spec.get("type", ""), _ports(spec)
        if not ports and not _headless(spec) and type_ != "ExternalName":
            errs.append(required("spec.ports"))
        if type_ == "LoadBalancer":
            for i, p in enumerate(ports):
                if p.get("port") == _KUBELET_PORT:
                    errs.append(invalid(f"spec.ports[{i}]", _KUBELET_PORT,
                                        f"may not expose port {_KUBELET_PORT} externally since "
                                        f"it is used by kubelet"))
        if type_ in ("LoadBalancer", "NodePort") and _headless(spec):
            errs.append(invalid("spec.clusterIPs[0]", "None",
                                f"may not be set to 'None' for {type_} services"))
        if type_ == "ExternalName":
            for field in ("clusterIPs", "ipFamilies"):
                if spec.get(field):
                    errs.append(forbidden_field(f"spec.{field}", "may not be set for "
                                                                 "ExternalName services"))
            if "ipFamilyPolicy" in spec:
                errs.append(forbidden_field("spec.ipFamilyPolicy", "may not be set for "
                                                                   "ExternalName services"))
            cname = spec.get("externalName", "")
            cname = cname[:-1] if cname.endswith(".") else cname
            if cname:
                errs += [invalid("spec.externalName", cname, m) for m in subdomain_errors(cname)]
            else:
                errs.append(required("spec.externalName"))
        names = set()
        for i, p in enumerate(ports):
            errs += _service_port_errors(p, len(ports) > 1, names, f"spec.ports[{i}]")
        if spec.get("selector") is not None:
            errs += validate_labels(spec["selector"], "spec.selector")
        errs += _session_affinity_errors(spec)
        errs += _cluster_ips_errors(spec)
        for i, ip in enumerate(spec.get("externalIPs") or []):
            p = f"spec.externalIPs[{i}]"
            errs += [invalid(p, ip, IP_MSG)] if parse_ip(ip) is None else \
                endpoint_ip_errors(ip, p)
        if not type_:
            errs.append(required("spec.type"))
        elif type_ not in SERVICE_TYPES:
            errs.append(not_supported("spec.type", type_, SERVICE_TYPES))
        if type_ == "ClusterIP":
            for i, p in enumerate(ports):
                if p.get("nodePort"):
                    errs.append(forbidden_field(f"spec.ports[{i}].nodePort",
                                                "may not be used when `type` is 'ClusterIP'"))
        node_ports, seen = set(), set()
        for i, p in enumerate(ports):
            if p.get("nodePort"):
                key = (p.get("protocol", ""), p["nodePort"])
                if key in node_ports:
                    errs.append(duplicate(f"spec.ports[{i}].nodePort", p["nodePort"]))
                node_ports.add(key)
        for i, p in enumerate(ports):
            key = (p.get("protocol", ""), p.get("port", 0))
            if key in seen:
                errs.append(duplicate(f"spec.ports[{i}]", _service_port_repr(*key)))
            seen.add(key)
        errs += _source_range_errors(spec, annotations)
        if "allocateLoadBalancerNodePorts" in spec and type_ != "LoadBalancer":
            errs.append(forbidden_field("spec.allocateLoadBalancerNodePorts",
                                        "may only be used when `type` is 'LoadBalancer'"))
        if type_ == "LoadBalancer" and "allocateLoadBalancerNodePorts" not in spec:
            errs.append(required("allocateLoadBalancerNodePorts"))
        lb_class = spec.get("loadBalancerClass")
        if lb_class is not None:
            if type_ == "LoadBalancer":
                errs += [invalid("spec.loadBalancerClass", lb_class, m)
                         for m in label_key_errors(lb_class)]
            else:
                errs.append(forbidden_field("spec.loadBalancerClass",
                                            "may only be used when `type` is 'LoadBalancer'"))
        errs += _traffic_policy_errors(spec)
        errs += _lb_status_errors(obj)
        return errs


def _service_port_errors(p, require_name, names, path):
    """validateServicePort."""
    errs = []
    name = p.get("name", "")
    if require_name and not name:
        errs.append(required(f"{path}.name"))
    elif name:
        errs += [invalid(f"{path}.name", name, m) for m in label_errors(name)]
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
    port = p.get("port", 0)
    if not 1 <= port <= 65535:
        errs.append(invalid(f"{path}.port", port, PORT_NUM_MSG))
    protocol = p.get("protocol", "")
    if not protocol:
        errs.append(required(f"{path}.protocol"))
    elif protocol not in PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", protocol, PROTOCOLS))
    target = p.get("targetPort", 0)
    if isinstance(target, str):
        errs += [invalid(f"{path}.targetPort", target, m) for m in port_name_errors(target)]
    elif not 1 <= target <= 65535:
        errs.append(invalid(f"{path}.targetPort", target, PORT_NUM_MSG))
    if p.get("appProtocol") is not None:
        errs += [invalid(f"{path}.appProtocol", p["appProtocol"], m)
                 for m in label_key_errors(p["appProtocol"])]
    return errs


def _session_affinity_errors(spec):
    affinity = spec.get("sessionAffinity", "")
    if not affinity:
        return [required("spec.sessionAffinity")]
    if affinity not in ("ClientIP", "None"):
        return [not_supported("spec.sessionAffinity", affinity, ["ClientIP", "None"])]
    path, config = "spec.sessionAffinityConfig", spec.get("sessionAffinityConfig")
    if affinity == "None":
        return [] if config is None else [forbidden_field(
            path, "must not be set when session affinity is None")]
    why = "when session affinity type is ClientIP"
    if config is None:
        return [required(path, why)]
    if config.get("clientIP") is None:
        return [required(f"{path}.clientIP", why)]
    timeout = config["clientIP"].get("timeoutSeconds")
    if timeout is None:
        return [required(f"{path}.clientIP.timeoutSeconds", why)]
    if not 0 < timeout <= 86400:
        return [invalid(f"{path}.clientIP.timeoutSeconds", timeout,
                        "must be greater than 0 and less than 86400")]
    return []


def _source_range_errors(spec, annotations):
    errs = []
    ranges = spec.get("loadBalancerSourceRanges") or []
    if ranges:
        path, values = "spec.LoadBalancerSourceRanges", [r.strip() for r in ranges]
        indexed = [f"{path}[{i}]" for i in range(len(values))]
    elif _LB_SOURCE_RANGES in annotations:
        path = f"metadata.annotations[{_LB_SOURCE_RANGES}]"
        text = annotations[_LB_SOURCE_RANGES].strip()
        values = [v.strip() for v in text.split(",")] if text else []
        indexed = [path] * len(values)
    else:
        return errs
    if spec.get("type") != "LoadBalancer":
        errs.append(forbidden_field(path, "may only be used when `type` is 'LoadBalancer'"))
    for where, value in zip(indexed, values):
        try:
            ipaddress.ip_network(value, strict=False)
            if "/" not in value:
                raise ValueError(value)
        except ValueError:
            errs.append(invalid(where, value, CIDR_MSG))
    return errs


def _traffic_policy_errors(spec):
    errs = []
    policy = spec.get("externalTrafficPolicy", "")
    if not _externally_accessible(spec):
        if policy:
            errs.append(invalid("spec.externalTrafficPolicy", policy,
                                "may only be set for externally-accessible services"))
    elif not policy:
        errs.append(required("spec.externalTrafficPolicy"))
    elif policy not in ("Cluster", "Local"):
        errs.append(not_supported("spec.externalTrafficPolicy", policy, ["Cluster", "Local"]))
    hc = spec.get("healthCheckNodePort", 0)
    if not _needs_health_check(spec):
        if hc:
            errs.append(invalid("spec.healthCheckNodePort", hc, "may only be set when `type` is "
                                "'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
    elif not hc:
        errs.append(required("spec.healthCheckNodePort"))
    elif not 1 <= hc <= 65535:
        errs.append(invalid("spec.healthCheckNodePort", hc, PORT_NUM_MSG))
    internal = spec.get("internalTrafficPolicy")
    if internal is None:
        if spec.get("type") in ("ClusterIP", "NodePort", "LoadBalancer"):
            errs.append(required("spec.internalTrafficPolicy"))
    elif internal not in ("Cluster", "Local"):
        errs.append(not_supported("spec.internalTrafficPolicy", internal, ["Cluster", "Local"]))
    distribution = spec.get("trafficDistribution")
    if distribution is not None and distribution != "PreferClose":
        errs.append(not_supported("spec.trafficDistribution", distribution, ["PreferClose"]))
    return errs


def _lb_status_errors(obj):
    ingress = (((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or [])
    if ingress and (obj.get("spec") or {}).get("type") != "LoadBalancer":
        return [forbidden_field("status.loadBalancer.ingress",
                                "may only be used when `spec.type` is 'LoadBalancer'")]
    errs = []
    for i, item in enumerate(ingress):
        if isinstance(item, dict) and item.get("ip") and parse_ip(item["ip"]) is None:
            errs.append(invalid(f"status.loadBalancer.ingress[{i}].ip", item["ip"], IP_MSG))
    return errs


def _service_update_errors(spec, old):
    """ValidateServiceUpdate's checks against the stored Service."""
    errs = []
    external = "ExternalName" in (spec.get("type"), old.get("type"))
    ips, old_ips = spec.get("clusterIPs") or [], old.get("clusterIPs") or []
    if not external and not (_headless(spec) and _headless(old)):
        path = "spec.clusterIPs"
        if len(ips) == len(old_ips):
            errs += [invalid(f"{path}[{i}]", ips, "may not change once set")
                     for i, v in enumerate(old_ips) if ips[i] != v]
        elif len(ips) < len(old_ips):
            if not ips:
                errs.append(invalid(f"{path}[0]", ips, "primary clusterIP can not be unset"))
            elif ips[0] != old_ips[0]:
                errs.append(invalid(f"{path}[0]", ips, "may not change once set"))
            if len(ips) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
                errs.append(invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                    "must be set to 'SingleStack' when releasing the secondary "
                                    "clusterIP"))
        elif old_ips and ips[0] != old_ips[0]:
            errs.append(invalid(f"{path}[0]", ips, "may not change once set"))
    families, old_families = spec.get("ipFamilies") or [], old.get("ipFamilies") or []
    if not external and _headless(spec) == _headless(old) and not _headless(spec):
        path = "spec.ipFamilies[0]"
        if len(families) == len(old_families):
            errs += [invalid(path, families, "may not change once set")
                     for i, v in enumerate(old_families) if families[i] != v]
        elif len(families) < len(old_families):
            if not ips:
                errs.append(invalid(path, families, "primary ipFamily can not be unset"))
            if families and families[0] != old_families[0]:
                errs.append(invalid(path, ips, "may not change once set"))
            if len(families) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
                errs.append(invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                    "must be set to 'SingleStack' when releasing the secondary "
                                    "ipFamily"))
        elif old_families and families[0] != old_families[0]:
            errs.append(invalid(path, ips, "may not change once set"))
    if spec.get("type") == "LoadBalancer" == old.get("type") and \
            spec.get("loadBalancerClass") != old.get("loadBalancerClass"):
        errs.append(invalid("spec.loadBalancerClass", spec.get("loadBalancerClass"),
                            "may not change once set"))
    if _needs_health_check(spec) and _needs_health_check(old) and \
            spec.get("healthCheckNodePort") != old.get("healthCheckNodePort"):
        errs.append(forbidden_field("spec.healthCheckNodePort", "field is immutable"))
    return errs


# --- admissionregistration.k8s.io ---------------------------------------------------------

def _webhook_client_config_errors(cc, path, url_field="url"):
    errs = []
    url, svc = cc.get("url"), cc.get("service")
    if (url is None) == (svc is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        p = f"{path}.{url_field}"
        # ValidateWebhookURL looks at Go's url.URL: Host is the authority after any user
        # information, port included ("https://:8443/" has one), and a bare "#" or "?" leaves
        # Fragment and RawQuery empty, so kube-apiserver stores such a URL.
        u = urllib.parse.urlsplit(url)
        _, at, host = u.netloc.rpartition("@")
        if u.scheme != "https":
            errs.append(invalid(p, url, "'https' is the only allowed URL scheme"))
        if not host:
            errs.append(invalid(p, url, "host must be specified"))
        if at:
            errs.append(invalid(p, url, "user information is not permitted in the URL"))
        if u.fragment:
            errs.append(invalid(p, url, "fragments are not permitted in the URL"))
        if u.query:
            errs.append(invalid(p, url, "query parameters are not permitted in the URL"))
    else:
        p = f"{path}.service"
        if not svc.get("name"):
            errs.append(required(f"{p}.name", "service name is required"))
        if not svc.get("namespace"):
            errs.append(required(f"{p}.namespace", "service namespace is required"))
        port = svc.get("port", 443)
        if not 1 <= port <= 65535:
            errs.append(invalid(f"{p}.port", port, "port is not valid: must be between 1 and "
                                                   "65535, inclusive"))
        svc_path = svc.get("path")
        if svc_path is not None and svc_path != "" and not svc_path.startswith("/"):
            errs.append(invalid(f"{p}.path", svc_path, "must start with a '/'"))
    return errs


def _review_versions_errors(versions, path):
    errs = []
    if not versions:
        return [required(path, "must specify one of v1, v1beta1")]
    seen = set()
    for i, v in enumerate(versions):
        errs += [invalid(f"{path}[{i}]", v, m) for m in dns1035_errors(v)]
        if v in seen:
            errs.append(duplicate(f"{path}[{i}]", v))
        seen.add(v)
    if not {"v1", "v1beta1"} & set(versions):
        errs.append(invalid(path, versions, "must include at least one of v1, v1beta1"))
    return errs


def _rule_errors(rule, path):
    errs = []
    ops = rule.get("operations") or []
    if not ops:
        errs.append(required(f"{path}.operations"))
    for i, op in enumerate(ops):
        if op not in ("*", "CONNECT", "CREATE", "DELETE", "UPDATE"):
            errs.append(not_supported(f"{path}.operations[{i}]", op,
                                      ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]))
    if len(ops) > 1 and "*" in ops:
        errs.append(invalid(f"{path}.operations", ops, "if '*' is present, must not specify "
                                                       "other operations"))
    for field, what in (("apiGroups", "API groups"), ("apiVersions", "API versions"),
                        ("resources", "resources")):
        values = rule.get(field) or []
        if not values:
            errs.append(required(f"{path}.{field}"))
        elif len(values) > 1 and "*" in values:
            errs.append(invalid(f"{path}.{field}", values,
                                f"if '*' is present, must not specify other {what}"))
    scope = rule.get("scope", "*")
    if scope not in ("*", "Cluster", "Namespaced"):
        errs.append(not_supported(f"{path}.scope", scope, ["*", "Cluster", "Namespaced"]))
    return errs


class WebhookConfigurationKind(Kind):
    def __init__(self, mutating):
        self.mutating = mutating

    def defaults(self, obj):
        for wh in obj.get("webhooks") or []:
            wh.setdefault("failurePolicy", "Fail")
            wh.setdefault("matchPolicy", "Equivalent")
            wh.setdefault("namespaceSelector", {})
            wh.setdefault("objectSelector", {})
            wh.setdefault("timeoutSeconds", 10)
            if self.mutating:
                wh.setdefault("reinvocationPolicy", "Never")
            for rule in wh.get("rules") or []:
                rule.setdefault("scope", "*")
            svc = (wh.get("clientConfig") or {}).get("service")
            if isinstance(svc, dict):
                svc.setdefault("port", 443)

    def validate(self, obj, old):
        errs = []
        webhooks = obj.get("webhooks") or []
        old_names = [w.get("name") for w in (old or {}).get("webhooks") or []]
        check_unique = old is None or len(old_names) == len(set(old_names))
        seen = set()
        for i, wh in enumerate(webhooks):
            p = f"webhooks[{i}]"
            name = wh.get("name", "")
            if not name:
                errs.append(required(f"{p}.name"))
            else:
                msgs = subdomain_errors(name)
                errs += [invalid(f"{p}.name", name, m) for m in msgs]
                if not msgs and len(name.split(".")) < 3:
                    errs.append(invalid(f"{p}.name", name, "should be a domain with at least "
                                                           "three segments separated by dots"))
                if check_unique and name in seen:
                    errs.append(duplicate(f"{p}.name", name))
                seen.add(name)
            for j, rule in enumerate(wh.get("rules") or []):
                errs += _rule_errors(rule, f"{p}.rules[{j}]")
            fp = wh.get("failurePolicy")
            if fp not in ("Fail", "Ignore"):
                errs.append(not_supported(f"{p}.failurePolicy", fp, ["Fail", "Ignore"]))
            mp = wh.get("matchPolicy")
            if mp not in ("Equivalent", "Exact"):
                errs.append(not_supported(f"{p}.matchPolicy", mp, ["Equivalent", "Exact"]))
            se = wh.get("sideEffects")
            if not se:
                errs.append(required(f"{p}.sideEffects", "must specify one of None, "
                                                         "NoneOnDryRun"))
            elif se not in ("None", "NoneOnDryRun"):
                errs.append(not_supported(f"{p}.sideEffects", se, ["None", "NoneOnDryRun"]))
            if self.mutating and wh.get("reinvocationPolicy") not in ("IfNeeded", "Never"):
                errs.append(not_supported(f"{p}.reinvocationPolicy",
                                          wh.get("reinvocationPolicy"), ["IfNeeded", "Never"]))
            ts = wh.get("timeoutSeconds", 10)
            if not 1 <= ts <= 30:
                errs.append(invalid(f"{p}.timeoutSeconds", ts, "the timeout value must be "
                                                               "between 1 and 30 seconds"))
            errs += validate_label_selector(wh.get("namespaceSelector"),
                                            f"{p}.namespaceSelector")
            errs += validate_label_selector(wh.get("objectSelector"), f"{p}.objectSelector")
            errs += _review_versions_errors(wh.get("admissionReviewVersions") or [],
                                            f"{p}.admissionReviewVersions")
            errs += _webhook_client_config_errors(wh.get("clientConfig") or {},
                                                  f"{p}.clientConfig")
            mc_seen = set()
            for j, mc in enumerate(wh.get("matchConditions") or []):
                if not mc.get("name"):
                    errs.append(required(f"{p}.matchConditions[{j}].name"))
                elif mc["name"] in mc_seen:
                    errs.append(duplicate(f"{p}.matchConditions[{j}].name", mc["name"]))
                mc_seen.add(mc.get("name"))
                if not mc.get("expression"):
                    errs.append(required(f"{p}.matchConditions[{j}].expression"))
        return errs


# --- apiextensions.k8s.io -----------------------------------------------------------------

def established(crd):
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def _pem_has_certificate(b64):
    data = codec.go_b64decode(b64)
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cadata=data.decode("ascii"))
        return True
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        return False


class CRDKind(Kind):
    name_rule = "any"

    def defaults(self, obj):
        spec = obj.setdefault("spec", {})
        names = spec.setdefault("names", {})
        if names.get("kind"):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        conv = spec.setdefault("conversion", {"strategy": "None"})
        conv.setdefault("strategy", "None")
        svc = ((conv.get("webhook") or {}).get("clientConfig") or {}).get("service")
        if isinstance(svc, dict):
            svc.setdefault("port", 443)

    def prepare_create(self, obj):
        storage = [v["name"] for v in obj["spec"].get("versions") or [] if v.get("storage")]
        obj["status"] = {"conditions": [], "acceptedNames": {"plural": "", "kind": ""},
                         "storedVersions": storage[:1]}

    def prepare_update(self, new, old):
        status = new.get("status") or {}
        stored = list(status.get("storedVersions") or [])
        for v in new["spec"].get("versions") or []:
            if v.get("storage") and v.get("name") not in stored:
                stored.append(v["name"])
        status["storedVersions"] = stored
        new["status"] = status

    def validate(self, obj, old):
        errs = []
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        group, plural = spec.get("group", ""), names.get("plural", "")
        name = obj["metadata"].get("name", "")
        if name != f"{plural}.{group}":
            errs.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+'
                                                       'spec.group'))
        if not group:
            errs.append(required("spec.group"))
        elif "." not in group:
            errs.append(invalid("spec.group", group, "should be a domain with at least one dot"))
        else:
            errs += [invalid("spec.group", group, m) for m in subdomain_errors(group)]
        if not plural:
            errs.append(required("spec.names.plural"))
        if not names.get("kind"):
            errs.append(required("spec.names.kind"))
        scope = spec.get("scope", "")
        if not scope:
            errs.append(required("spec.scope"))
        elif scope not in ("Cluster", "Namespaced"):
            errs.append(not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
        versions = spec.get("versions") or []
        if not versions:
            errs.append(invalid("spec.versions", versions, "must have exactly one version "
                                                           "marked as storage version"))
        elif sum(1 for v in versions if v.get("storage")) != 1:
            errs.append(invalid("spec.versions", [v.get("name", "") for v in versions],
                                "must have exactly one version marked as storage version"))
        for i, v in enumerate(versions):
            if not (v.get("schema") or {}).get("openAPIV3Schema"):
                errs.append(required(f"spec.versions[{i}].schema.openAPIV3Schema",
                                     "schemas are required"))
        errs += self._conversion_errors(spec, old)
        if old is not None:
            ospec = old.get("spec") or {}
            if group != ospec.get("group"):
                errs.append(invalid("spec.group", group, "field is immutable"))
            if plural != (ospec.get("names") or {}).get("plural"):
                errs.append(invalid("spec.names.plural", plural, "field is immutable"))
            if established(old):
                if scope != ospec.get("scope"):
                    errs.append(invalid("spec.scope", scope, "field is immutable"))
                if names.get("kind") != (ospec.get("names") or {}).get("kind"):
                    errs.append(invalid("spec.names.kind", names.get("kind"),
                                        "field is immutable"))
        return errs

    @staticmethod
    def _conversion_errors(spec, old):
        conv = spec.get("conversion") or {}
        strategy = conv.get("strategy", "None")
        webhook = conv.get("webhook")
        # The internal type flattens webhook.* into conversion.*: its paths are reported.
        base = "spec.conversion"
        if strategy not in ("None", "Webhook"):
            return [not_supported(f"{base}.strategy", strategy, ["None", "Webhook"])]
        if strategy == "None":
            if webhook and webhook.get("clientConfig"):
                return [forbidden_field(f"{base}.webhookClientConfig", "should not be set when "
                                        "strategy is not set to Webhook")]
            return []
        errs = []
        cc = (webhook or {}).get("clientConfig")
        if not cc:
            errs.append(required(f"{base}.webhookClientConfig", "required when strategy is "
                                                                "set to Webhook"))
        else:
            errs += _webhook_client_config_errors(cc, f"{base}.webhookClientConfig")
        errs += _review_versions_errors((webhook or {}).get("conversionReviewVersions") or [],
                                        f"{base}.conversionReviewVersions")
        if spec.get("preserveUnknownFields"):
            errs.append(invalid(f"{base}.strategy", strategy,
                                "must be None if spec.preserveUnknownFields is true"))
        # caBundle must be PEM on update of an Established CRD whose old bundle was fine.
        bundle = (cc or {}).get("caBundle", "")
        if old is not None and bundle and established(old):
            old_bundle = (((old.get("spec") or {}).get("conversion") or {}).get("webhook") or
                          {}).get("clientConfig", {}).get("caBundle", "")
            if (not old_bundle or _pem_has_certificate(old_bundle)) and \
                    not _pem_has_certificate(bundle):
                errs.append(invalid(f"{base}.webhookClientConfig.caBundle", go_bytes(bundle),
                                    "unable to load root certificates: unable to parse bytes "
                                    "as PEM block"))
        return errs


def establish_crd(crd):
    """What the apiextensions controllers do shortly after a CRD is created."""
    names = dict(crd["spec"].get("names") or {})
    status = crd.setdefault("status", {})
    status["acceptedNames"] = names
    bundle = (((crd["spec"].get("conversion") or {}).get("webhook") or {})
              .get("clientConfig") or {}).get("caBundle", "")
    conds = [_condition("NamesAccepted", "True", "NoConflicts", "no conflicts found")]
    if bundle and not _pem_has_certificate(bundle):
        conds.append(_condition("Established", "False", "InvalidCABundle",
                                "the conversion webhook caBundle is invalid"))
    else:
        conds.append(_condition("Established", "True", "InitialNamesAccepted",
                                "the initial names have been accepted"))
    status["conditions"] = conds


def mark_crd_terminating(crd):
    conds = [c for c in (crd.get("status") or {}).get("conditions") or []
             if c.get("type") != "Terminating"]
    conds.append(_condition("Terminating", "True", "InstanceDeletionInProgress",
                            "CustomResource deletion is in progress"))
    crd.setdefault("status", {})["conditions"] = conds


# --- apiregistration.k8s.io ---------------------------------------------------------------

class APIServiceKind(Kind):
    name_rule = "any"

    def defaults(self, obj):
        svc = (obj.get("spec") or {}).get("service")
        if isinstance(svc, dict):
            svc.setdefault("port", 443)

    def prepare_create(self, obj):
        if (obj.get("spec") or {}).get("service") is None:
            obj["status"] = {"conditions": [_condition(
                "Available", "True", "Local", "Local APIServices are always available")]}
        else:
            obj["status"] = {}

    def validate(self, obj, old):
        errs = []
        spec = obj.get("spec") or {}
        group, version = spec.get("group", ""), spec.get("version", "")
        name = obj["metadata"].get("name", "")
        if name != f"{version}.{group}":
            errs.append(invalid("metadata.name", name, 'must be `spec.version+"."+spec.group`'))
        if not group:
            if version != "v1":
                errs.append(required("spec.group", "only v1 may have an empty group and it "
                                                   "better be legacy kube"))
        else:
            errs += [invalid("spec.group", group, m) for m in subdomain_errors(group)]
        errs += [invalid("spec.version", version, m) for m in dns1035_errors(version)]
        gpm, vp = spec.get("groupPriorityMinimum", 0), spec.get("versionPriority", 0)
        if not 0 < gpm <= 20000:
            errs.append(invalid("spec.groupPriorityMinimum", gpm,
                                "must be positive and less than 20000"))
        if not 0 < vp <= 1000:
            errs.append(invalid("spec.versionPriority", vp, "must be positive and less than "
                                                            "1000"))
        bundle, insecure = spec.get("caBundle", ""), spec.get("insecureSkipTLSVerify", False)
        svc = spec.get("service")
        if svc is None:
            if bundle:
                errs.append(invalid("spec.caBundle", go_bytes(bundle),
                                    "local APIServices may not have a caBundle"))
            if insecure:
                errs.append(invalid("spec.insecureSkipTLSVerify", True,
                                    "local APIServices may not have insecureSkipTLSVerify"))
        else:
            if not svc.get("namespace"):
                errs.append(required("spec.service.namespace"))
            if not svc.get("name"):
                errs.append(required("spec.service.name"))
            port = svc.get("port", 443)
            if not 1 <= port <= 65535:
                errs.append(invalid("spec.service.port", port, "port is not valid: must be "
                                                               "between 1 and 65535, inclusive"))
            if insecure and bundle:
                errs.append(invalid("spec.insecureSkipTLSVerify", True,
                                    "may not be true if caBundle is present"))
        return errs


# --- coordination.k8s.io, events ----------------------------------------------------------

class LeaseKind(Kind):
    def validate(self, obj, old):
        errs = []
        spec = obj.get("spec") or {}
        if "leaseDurationSeconds" in spec and spec["leaseDurationSeconds"] <= 0:
            errs.append(invalid("spec.leaseDurationSeconds", spec["leaseDurationSeconds"],
                                "must be greater than 0"))
        if "leaseTransitions" in spec and spec["leaseTransitions"] < 0:
            errs.append(invalid("spec.leaseTransitions", spec["leaseTransitions"],
                                "must be greater than or equal to 0"))
        if spec.get("preferredHolder") and not spec.get("strategy"):
            errs.append(forbidden_field("spec.preferredHolder", "preferredHolder is only "
                                                                "allowed if strategy is set"))
        return errs


# core/v1 Event field <-> events.k8s.io/v1 Event field (pkg/apis/events/v1 conversion).
EVENT_V1_FIELDS = {"involvedObject": "regarding", "message": "note",
                   "reportingComponent": "reportingController", "source": "deprecatedSource",
                   "firstTimestamp": "deprecatedFirstTimestamp",
                   "lastTimestamp": "deprecatedLastTimestamp", "count": "deprecatedCount"}
_EVENT_CORE_FIELDS = {v: k for k, v in EVENT_V1_FIELDS.items()}


def event_to_v1(obj):
    return {EVENT_V1_FIELDS.get(k, k): v for k, v in obj.items()}


def event_from_v1(obj):
    return {_EVENT_CORE_FIELDS.get(k, k): v for k, v in obj.items()}


class EventKind(Kind):
    """Validation runs on the stored (core) form; v1 requests get v1 field names."""

    def __init__(self, v1):
        self.v1 = v1

    def _f(self, core_field):
        return EVENT_V1_FIELDS.get(core_field, core_field) if self.v1 else core_field

    def validate(self, obj, old):
        errs = []
        ns = obj["metadata"].get("namespace", "")
        inv_ns = (obj.get("involvedObject") or {}).get("namespace", "")
        inv_path = self._f("involvedObject") + ".namespace"
        if self.v1 and not obj.get("eventTime"):
            errs.append(required("eventTime"))
        if not obj.get("eventTime"):
            if inv_ns and inv_ns != ns or not inv_ns and ns not in ("", "default"):
                errs.append(invalid(inv_path, inv_ns, "does not match event.namespace"))
        else:
            if not inv_ns and ns not in ("default", "kube-system"):
                errs.append(invalid(inv_path, inv_ns, "does not match event.namespace"))
            for field in ("reportingComponent", "reportingInstance", "action", "reason"):
                if not obj.get(field):
                    errs.append(required(self._f(field)))
        if self.v1 and obj.get("type") not in ("Normal", "Warning"):
            errs.append(invalid("type", "", f"has invalid value: {obj.get('type', '')}"))
        return errs


class PodKind(Kind):
    def prepare_create(self, obj):
        obj["status"] = {"phase": "Pending"}


# --- discovery.k8s.io ---------------------------------------------------------------------

ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]


def fqdn_errors(value, path):
    """IsFullyQualifiedDomainName."""
    if not value:
        return [required(path)]
    name = value[:-1] if value.endswith(".") else value
    msgs = subdomain_errors(name)
    if msgs:
        return [invalid(path, name, ",".join(msgs))]
    if len(name.split(".")) < 2:
        return [invalid(path, name, "should be a domain with at least two segments separated "
                                    "by dots")]
    for label in name.split("."):
        msgs = label_errors(label)
        if msgs:
            return [invalid(path, label, ",".join(msgs))]
    return []


def _address_errors(address_type, value, path):
    ip = parse_ip(value)
    if address_type == "IPv4":
        errs = [] if ip is not None and _unmapped(ip).version == 4 else \
            [invalid(path, value, "must be a valid IPv4 address")]
        return errs + endpoint_ip_errors(value, path)
    if address_type == "IPv6":
        errs = [] if ip is not None and _unmapped(ip).version == 6 else \
            [invalid(path, value, "must be a valid IPv6 address")]
        return errs + endpoint_ip_errors(value, path)
    if address_type == "FQDN":
        return fqdn_errors(value, path)
    return []


class EndpointSliceKind(Kind):
    """discovery.k8s.io/v1 EndpointSlice: SetDefaults_EndpointPort, the strategy's generation
    and ValidateEndpointSlice."""

    def defaults(self, obj):
        for field in ("endpoints", "ports"):
            if field in obj:
                # A null element decodes as a zero struct; an empty list is stored as none.
                obj[field] = [v if isinstance(v, dict) else {} for v in obj[field]]
                if not obj[field]:
                    del obj[field]
        for endpoint in obj.get("endpoints") or []:
            endpoint.setdefault("conditions", {})  # a struct: serialized even when empty
        for port in obj.get("ports") or []:
            port.setdefault("name", "")
            port.setdefault("protocol", "TCP")

    def prepare_create(self, obj):
        obj["metadata"]["generation"] = 1
        for endpoint in obj.get("endpoints") or []:
            if isinstance(endpoint, dict):
                endpoint.pop("deprecatedTopology", None)  # not writable through v1

    def prepare_update(self, new, old):
        self.defaults(new)  # decoding defaults before the strategy runs
        if new.get("endpoints") != old.get("endpoints"):
            for endpoint in new.get("endpoints") or []:
                endpoint.pop("deprecatedTopology", None)

        def body(o):
            return {k: v for k, v in o.items() if k not in ("apiVersion", "kind", "metadata")}
        if body(new) != body(old) or (new["metadata"].get("labels") or {}) != \
                (old["metadata"].get("labels") or {}):
            new["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1

    def validate(self, obj, old):
        errs = []
        address_type = obj.get("addressType", "")
        if not address_type:
            errs.append(required("addressType"))
        elif address_type not in ADDRESS_TYPES:
            errs.append(not_supported("addressType", address_type, ADDRESS_TYPES))
        endpoints = obj.get("endpoints") or []
        if len(endpoints) > 1000:
            errs.append(errors.too_many("endpoints", len(endpoints), 1000))
            endpoints = []
        for i, endpoint in enumerate(endpoints):
            errs += self._endpoint_errors(endpoint, address_type, f"endpoints[{i}]")
        ports = obj.get("ports") or []
        if len(ports) > 20000:
            errs.append(errors.too_many("ports", len(ports), 20000))
            ports = []
        names = set()
        for i, port in enumerate(ports):
            path, name = f"ports[{i}]", port.get("name", "")
            if name:
                errs += [invalid(f"{path}.name", name, m) for m in label_errors(name)]
            if name in names:
                errs.append(duplicate(f"{path}.name", name))
            names.add(name)
            protocol = port.get("protocol")
            if protocol is None:
                errs.append(required(f"{path}.protocol"))
            elif protocol not in PROTOCOLS:
                errs.append(not_supported(f"{path}.protocol", protocol, PROTOCOLS))
            if port.get("appProtocol") is not None:
                errs += [invalid(f"{path}.appProtocol", port["appProtocol"], m)
                         for m in label_key_errors(port["appProtocol"])]
        if old is not None and address_type != old.get("addressType", ""):
            errs.append(invalid("addressType", address_type, "field is immutable"))
        return errs

    @staticmethod
    def _endpoint_errors(endpoint, address_type, path):
        errs = []
        addresses = endpoint.get("addresses") or []
        if not addresses:
            errs.append(required(f"{path}.addresses", "must contain at least 1 address"))
        elif len(addresses) > 100:
            errs.append(errors.too_many(f"{path}.addresses", len(addresses), 100))
        for j, address in enumerate(addresses):
            errs += _address_errors(address_type, address, f"{path}.addresses[{j}]")
        if endpoint.get("nodeName") is not None:
            errs += [invalid(f"{path}.nodeName", endpoint["nodeName"], m)
                     for m in subdomain_errors(endpoint["nodeName"])]
        topology = endpoint.get("deprecatedTopology") or {}
        if len(topology) > 16:
            errs.append(errors.too_many(f"{path}.deprecatedTopology", len(topology), 16))
        errs += validate_labels(topology, f"{path}.deprecatedTopology")
        if endpoint.get("hostname") is not None:
            errs += [invalid(f"{path}.hostname", endpoint["hostname"], m)
                     for m in label_errors(endpoint["hostname"])]
        zones = (endpoint.get("hints") or {}).get("forZones") or []
        if len(zones) > 8:
            return errs + [errors.too_many(f"{path}.hints.forZones", len(zones), 8)]
        seen = set()
        for k, zone in enumerate(zones):
            zpath, name = f"{path}.hints.forZones[{k}].name", (zone or {}).get("name", "")
            if name in seen:
                errs.append(duplicate(zpath, name))
            seen.add(name)
            errs += [invalid(zpath, name, m) for m in label_value_errors(name)]
        return errs

    def present(self, obj):
        # Both lists lack omitempty: the API server writes null for none.
        for field in ("endpoints", "ports"):
            if not obj.get(field):
                obj[field] = None


# --- batch/v1 -----------------------------------------------------------------------------

JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
_DEFAULT_MODE_VOLUMES = ("secret", "configMap", "projected", "downwardAPI")


def _image_pull_policy(image):
    """SetDefaults_Container: Always for :latest or an untagged image, else IfNotPresent."""
    if "@" in image:
        return "IfNotPresent"
    tail = image.rsplit("/", 1)[-1]
    tag = tail.split(":", 1)[1] if ":" in tail else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def default_pod_template(template):
    """The core/v1 defaults of a PodTemplateSpec (not those of a Pod: no enableServiceLinks)."""
    if not isinstance(template, dict):
        return
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    # v1 <-> internal conversion keeps the deprecated serviceAccount field in step.
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    elif spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    for field in ("initContainers", "containers"):
        for c in spec.get(field) or []:
            if not isinstance(c, dict):
                continue
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            if isinstance(c.get("image"), str):
                c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
            c.setdefault("resources", {})
            for port in c.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
            for env in c.get("env") or []:
                value_from = env.get("valueFrom") if isinstance(env, dict) else None
                if isinstance(value_from, dict):
                    _default_field_refs(value_from)
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                _default_probe(c.get(probe))
            for hook in ((c.get("lifecycle") or {}) if isinstance(c.get("lifecycle"), dict)
                         else {}).values():
                if isinstance(hook, dict):
                    _default_http_get(hook.get("httpGet"))
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        for kind in _DEFAULT_MODE_VOLUMES:
            if isinstance(volume.get(kind), dict):
                volume[kind].setdefault("defaultMode", 420)
        for item in (volume.get("downwardAPI") or {}).get("items") or []:
            if isinstance(item, dict):
                _default_field_refs(item)
        for source in (volume.get("projected") or {}).get("sources") or []:
            if not isinstance(source, dict):
                continue
            if isinstance(source.get("serviceAccountToken"), dict):
                source["serviceAccountToken"].setdefault("expirationSeconds", 3600)
            for item in (source.get("downwardAPI") or {}).get("items") or []:
                if isinstance(item, dict):
                    _default_field_refs(item)


def _default_field_refs(holder):
    """SetDefaults_ObjectFieldSelector and SetDefaults_ResourceFieldRef... as a quantity:
    a fieldRef's apiVersion v1, a resourceFieldRef's divisor "0"."""
    if isinstance(holder.get("fieldRef"), dict):
        holder["fieldRef"].setdefault("apiVersion", "v1")
    if isinstance(holder.get("resourceFieldRef"), dict):
        holder["resourceFieldRef"].setdefault("divisor", "0")


def _default_http_get(action):
    """SetDefaults_HTTPGetAction: path "/", scheme HTTP."""
    if isinstance(action, dict):
        action.setdefault("path", "/")
        action.setdefault("scheme", "HTTP")


def _default_probe(probe):
    """SetDefaults_Probe, with its handler's defaults."""
    if not isinstance(probe, dict):
        return
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    _default_http_get(probe.get("httpGet"))


class DeploymentKind(Kind):
    """apps/v1 Deployment: SetDefaults_Deployment and the pod template defaults (stored only:
    no controller acts on it)."""

    def defaults(self, obj):
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        spec.setdefault("replicas", 1)
        strategy = spec.get("strategy")
        if not isinstance(strategy, dict):
            strategy = spec["strategy"] = {}
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.get("rollingUpdate")
            if not isinstance(rolling, dict):
                rolling = strategy["rollingUpdate"] = {}
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        default_pod_template(spec.get("template"))

    def prepare_create(self, obj):
        obj["status"] = {}


class JobKind(Kind):
    """batch/v1 Job: SetDefaults_Job, the pod template defaults, generateSelector."""

    def defaults(self, obj):
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        if "completions" not in spec and "parallelism" not in spec:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        if "backoffLimit" not in spec:
            spec["backoffLimit"] = 2147483647 if "backoffLimitPerIndex" in spec else 6
        template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
        labels = (template.get("metadata") or {}).get("labels")
        if labels and not obj["metadata"].get("labels"):
            obj["metadata"]["labels"] = dict(labels)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy",
                        "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
        default_pod_template(template)

    def prepare_create(self, obj):
        """generateSelector: job-name and controller-uid labels, selector on the uid."""
        spec = obj.get("spec")
        if isinstance(spec, dict) and not spec.get("manualSelector"):
            meta = obj["metadata"]
            template = spec.setdefault("template", {})
            if isinstance(template, dict):
                tmeta = template.setdefault("metadata", {})
                labels = tmeta.setdefault("labels", {})
                for key in JOB_NAME_LABELS:
                    labels.setdefault(key, meta.get("name", ""))
                for key in CONTROLLER_UID_LABELS:
                    labels.setdefault(key, meta["uid"])
            selector = spec.get("selector")
            if not isinstance(selector, dict):
                selector = spec["selector"] = {}
            match = selector.get("matchLabels")
            if not isinstance(match, dict):
                match = selector["matchLabels"] = {}
            match.setdefault("batch.kubernetes.io/controller-uid", meta["uid"])
        obj["status"] = {}

    def validate(self, obj, old):
        errs = []
        spec = obj.get("spec") or {}
        for field in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit"):
            value = spec.get(field)
            if isinstance(value, int) and value < 0:
                errs.append(invalid(f"spec.{field}", value,
                                    "must be greater than or equal to 0"))
        pod = (spec.get("template") or {}).get("spec") or {}
        if not pod.get("containers"):
            errs.append(required("spec.template.spec.containers"))
        policy = pod.get("restartPolicy", "Always")
        if policy not in ("OnFailure", "Never"):
            errs.append(not_supported("spec.template.spec.restartPolicy", policy,
                                      ["OnFailure", "Never"]))
        selector = spec.get("selector")
        if not selector:
            errs.append(required("spec.selector"))
        else:
            errs += validate_label_selector(selector, "spec.selector")
            template_labels = ((spec.get("template") or {}).get("metadata") or {}).get(
                "labels") or {}
            wanted = selector.get("matchLabels") or {}
            if any(template_labels.get(k) != v for k, v in wanted.items()):
                errs.append(invalid("spec.template.metadata.labels", errors.GoRepr(
                    "map[string]string{" + ", ".join(
                        f"{json.dumps(k)}:{json.dumps(v)}"
                        for k, v in sorted(template_labels.items())) + "}"),
                    "`selector` does not match template `labels`"))
        if old is not None:
            old_spec = old.get("spec") or {}
            for field in ("selector", "completions", "completionMode"):
                if spec.get(field) != old_spec.get(field):
                    errs.append(invalid(f"spec.{field}", spec.get(field),
                                        "field is immutable"))
            if spec.get("template") != old_spec.get("template") and \
                    not old_spec.get("suspend"):
                # The real value is the Go struct dump of core.PodTemplateSpec.
                errs.append(invalid("spec.template", errors.GoRepr("core.PodTemplateSpec{...}"),
                                    "field is immutable"))
        return errs


# --- networking.k8s.io -----------------------------------------------------------------------

POLICY_TYPES = ["Egress", "Ingress"]


def _network_policy_port_errors(port, path):
    errs = []
    protocol = port.get("protocol", "TCP")
    if protocol not in PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", protocol, PROTOCOLS))
    number = port.get("port")
    end = port.get("endPort")
    if isinstance(number, int):
        if not 1 <= number <= 65535:
            errs.append(invalid(f"{path}.port", number, PORT_NUM_MSG))
    elif isinstance(number, str):
        errs += [invalid(f"{path}.port", number, m) for m in port_name_errors(number)]
    if end is not None:
        if isinstance(number, str):
            errs.append(forbidden_field(f"{path}.endPort", "may not be specified when `port` "
                                                            "is non-numeric"))
        elif number is None:
            errs.append(forbidden_field(f"{path}.endPort", "may not be specified when `port` "
                                                            "is not specified"))
        elif end < number:
            errs.append(invalid(f"{path}.endPort", end, "must be greater than or equal to "
                                                        "`port`"))
        elif end > 65535:
            errs.append(invalid(f"{path}.endPort", end, PORT_NUM_MSG))
    return errs


def _network_policy_peer_errors(peer, path):
    kinds_set = [k for k in ("podSelector", "namespaceSelector", "ipBlock") if k in peer]
    if not kinds_set:
        return [required(path, "must specify a peer")]
    errs = []
    if "ipBlock" in peer and len(kinds_set) > 1:
        errs.append(forbidden_field(path, "may not specify both ipBlock and another peer"))
    for key in ("podSelector", "namespaceSelector"):
        if key in peer:
            errs += validate_label_selector(peer[key], f"{path}.{key}")
    block = peer.get("ipBlock")
    if block is not None:
        cidr = block.get("cidr", "")
        if not cidr:
            errs.append(required(f"{path}.ipBlock.cidr"))
            return errs
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            errs.append(invalid(f"{path}.ipBlock.cidr", cidr, CIDR_MSG))
            return errs
        for i, item in enumerate(block.get("except") or []):
            try:
                inner = ipaddress.ip_network(item, strict=False)
            except ValueError:
                errs.append(invalid(f"{path}.ipBlock.except[{i}]", item, CIDR_MSG))
                continue
            if inner.version != network.version or not inner.subnet_of(network) or \
                    inner == network:
                errs.append(invalid(f"{path}.ipBlock.except[{i}]", item,
                                    "must be a strict subset of `cidr`"))
    return errs


class NetworkPolicyKind(Kind):
    """networking/v1 NetworkPolicy: SetDefaults_NetworkPolicy(Port), ValidateNetworkPolicy."""

    def defaults(self, obj):
        spec = obj.setdefault("spec", {})
        for rules in ("ingress", "egress"):
            for rule in spec.get(rules) or []:
                for port in rule.get("ports") or []:
                    port.setdefault("protocol", "TCP")
        if not spec.get("policyTypes"):
            spec["policyTypes"] = ["Ingress"] + (["Egress"] if spec.get("egress") else [])

    def validate(self, obj, old):
        spec = obj.get("spec") or {}
        errs = validate_label_selector(spec.get("podSelector") or {}, "spec.podSelector")
        for rules, peers in (("ingress", "from"), ("egress", "to")):
            for i, rule in enumerate(spec.get(rules) or []):
                path = f"spec.{rules}[{i}]"
                for j, port in enumerate(rule.get("ports") or []):
                    errs += _network_policy_port_errors(port, f"{path}.ports[{j}]")
                for j, peer in enumerate(rule.get(peers) or []):
                    errs += _network_policy_peer_errors(peer, f"{path}.{peers}[{j}]")
        types = spec.get("policyTypes") or []
        for i, type_ in enumerate(types):
            if type_ not in POLICY_TYPES:
                errs.append(not_supported(f"spec.policyTypes[{i}]", type_, POLICY_TYPES))
        if len(types) > 2:
            errs.append(invalid("spec.policyTypes", types, "may not specify more than two "
                                                           "policyTypes"))
        return errs


# --- policy -------------------------------------------------------------------------------------

_PERCENT = re.compile(r"^[0-9]+%$")
EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]


def _int_or_percent_errors(value, path):
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if isinstance(value, int):
        return [] if value >= 0 else [invalid(path, value, "must be greater than or equal to 0")]
    if not _PERCENT.match(value):
        return [invalid(path, value, "a valid percent string must be a numeric string followed "
                                     "by an ending '%' (e.g. '1%',  or '93%', regex used for "
                                     "validation is '[0-9]+%')")]
    if int(value[:-1]) > 100:
        return [invalid(path, value, "must not be greater than 100%")]
    return []


class PodDisruptionBudgetKind(Kind):
    """policy/v1 PodDisruptionBudget: ValidatePodDisruptionBudgetSpec."""

    def validate(self, obj, old):
        spec = obj.get("spec") or {}
        errs = []
        if "minAvailable" in spec and "maxUnavailable" in spec:
            errs.append(invalid("spec", errors.GoRepr("policy.PodDisruptionBudgetSpec{...}"),
                                "minAvailable and maxUnavailable cannot be both set"))
        for key in ("minAvailable", "maxUnavailable"):
            if key in spec:
                errs += _int_or_percent_errors(spec[key], f"spec.{key}")
        errs += validate_label_selector(spec.get("selector") or {}, "spec.selector")
        policy = spec.get("unhealthyPodEvictionPolicy")
        if policy is not None and policy not in EVICTION_POLICIES:
            errs.append(not_supported("spec.unhealthyPodEvictionPolicy", policy,
                                      EVICTION_POLICIES))
        return errs


# --- custom resources -----------------------------------------------------------------------

_JSON_TYPES = (("boolean", bool), ("integer", int), ("number", float), ("string", str),
               ("array", list), ("object", dict))


def _json_type(value):
    return next(name for name, type_ in _JSON_TYPES if isinstance(value, type_))


def _has_type(value, type_):
    got = _json_type(value)
    return got == type_ or (type_ == "number" and got == "integer")


def _pattern(pattern):
    """Go's RE2 takes flags such as (?i) anywhere; Python only at the start."""
    flags = 0
    if "(?i)" in pattern:
        pattern, flags = pattern.replace("(?i)", ""), re.IGNORECASE
    return re.compile(pattern, flags)


def openapi_errors(value, props, path):
    """The apiextensions validation of a value against a structural openAPIV3Schema: type,
    enum, pattern, bounds, lengths, item counts, required properties, map-list keys."""
    if props.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            got = _json_type(value)
            return [invalid(path, got, f'{path} in body must be of type integer,string: '
                                       f'"{got}"')]
    elif props.get("type") and not _has_type(value, props["type"]):
        got = _json_type(value)
        return [invalid(path, got, f'{path} in body must be of type {props["type"]}: "{got}"')]
    errs = []
    if "enum" in props and value not in props["enum"]:
        errs.append(not_supported(path, value, props["enum"]))
    if isinstance(value, str):
        if "pattern" in props and not _pattern(props["pattern"]).search(value):
            errs.append(invalid(path, value, f"{path} in body should match "
                                             f"'{props['pattern']}'"))
        if "minLength" in props and len(value) < props["minLength"]:
            errs.append(invalid(path, value, f"{path} in body should be at least "
                                             f"{props['minLength']} chars long"))
        if "maxLength" in props and len(value) > props["maxLength"]:
            errs.append(errors.FieldError("TooLong", path, detail=f"may not be more than "
                                                                  f"{props['maxLength']} bytes"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in props and value < props["minimum"]:
            errs.append(invalid(path, value, f"{path} in body should be greater than or equal "
                                             f"to {props['minimum']}"))
        if "maximum" in props and value > props["maximum"]:
            errs.append(invalid(path, value, f"{path} in body should be less than or equal to "
                                             f"{props['maximum']}"))
    if isinstance(value, list):
        if "minItems" in props and len(value) < props["minItems"]:
            errs.append(invalid(path, len(value), f"{path} in body should have at least "
                                                  f"{props['minItems']} items"))
        if "maxItems" in props and len(value) > props["maxItems"]:
            errs.append(errors.too_many(path, len(value), props["maxItems"]))
        keys = props.get("x-kubernetes-list-map-keys") or []
        seen = set()
        for i, item in enumerate(value):
            if props.get("x-kubernetes-list-type") == "map" and isinstance(item, dict):
                key = json.dumps([item.get(k) for k in keys])
                if key in seen:
                    errs.append(duplicate(f"{path}[{i}]", errors.GoRepr(
                        "map[string]interface {}{" + ", ".join(
                            f'"{k}":{json.dumps(item.get(k))}' for k in keys) + "}")))
                seen.add(key)
            errs += openapi_errors(item, props.get("items") or {}, f"{path}[{i}]")
    if isinstance(value, dict):
        properties = props.get("properties") or {}
        for name in props.get("required") or []:
            if name not in value:
                errs.append(required(f"{path}.{name}" if path else name))
        for key, item in value.items():
            sub = f"{path}.{key}" if path else key
            if key in properties:
                errs += openapi_errors(item, properties[key], sub)
            elif isinstance(props.get("additionalProperties"), dict):
                errs += openapi_errors(item, props["additionalProperties"], sub)
    return errs


class CustomResourceKind(Kind):
    """A custom resource: its version's openAPIV3Schema; apiVersion, kind and metadata are
    the API server's, whatever the schema says about them."""

    def __init__(self, openapi):
        self.openapi = openapi

    def validate(self, obj, old):
        props = self.openapi
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        root = dict(props, properties={k: v for k, v in (props.get("properties") or {}).items()
                                       if k not in ("apiVersion", "kind", "metadata")},
                    required=[r for r in props.get("required") or []
                              if r not in ("apiVersion", "kind", "metadata")])
        return openapi_errors(body, root, "")


STRATEGIES = {
    ("", "namespaces"): NamespaceKind(),
    ("", "secrets"): SecretKind(),
    ("", "configmaps"): ConfigMapKind(),
    ("", "events"): EventKind(v1=False),
    ("events.k8s.io", "events"): EventKind(v1=True),
    ("", "pods"): PodKind(),
    ("batch", "jobs"): JobKind(),
    ("apps", "deployments"): DeploymentKind(),
    ("", "services"): ServiceKind(),
    ("coordination.k8s.io", "leases"): LeaseKind(),
    ("discovery.k8s.io", "endpointslices"): EndpointSliceKind(),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"):
        WebhookConfigurationKind(mutating=False),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"):
        WebhookConfigurationKind(mutating=True),
    ("apiextensions.k8s.io", "customresourcedefinitions"): CRDKind(),
    ("apiregistration.k8s.io", "apiservices"): APIServiceKind(),
    ("networking.k8s.io", "networkpolicies"): NetworkPolicyKind(),
    ("policy", "poddisruptionbudgets"): PodDisruptionBudgetKind(),
}
_DEFAULT = Kind()


def strategy(res):
    if res.custom:
        return CustomResourceKind(res.openapi)
    return STRATEGIES.get((res.group, res.resource), _DEFAULT)
