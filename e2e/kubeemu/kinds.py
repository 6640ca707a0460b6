"""Per-kind registry strategies: defaults, create/update preparation, validation.

Mirrors the strategy.go/validation.go pairs of the real registry for the kinds the wire
spec (section 6) describes; the remaining kinds get the generic ObjectMeta checks only.
Validators return lists of errors.FieldError; the caller turns them into one 422.
"""

import json
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
        check = label_errors if name_rule == "label" else subdomain_errors
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

    def validate(self, obj, old):
        return []


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


# --- admissionregistration.k8s.io ---------------------------------------------------------

def _webhook_client_config_errors(cc, path, url_field="url"):
    errs = []
    url, svc = cc.get("url"), cc.get("service")
    if (url is None) == (svc is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        p = f"{path}.{url_field}"
        u = urllib.parse.urlsplit(url)
        if u.scheme != "https":
            errs.append(invalid(p, url, "'https' is the only allowed URL scheme"))
        if not u.hostname:
            errs.append(invalid(p, url, "host must be specified"))
        if u.username or u.password:
            errs.append(invalid(p, url, "user information is not permitted in the URL"))
        if u.fragment or url.endswith("#"):
            errs.append(invalid(p, url, "fragments are not permitted in the URL"))
        if u.query or url.endswith("?"):
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

def _established(crd):
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
            if _established(old):
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
        if old is not None and bundle and _established(old):
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
                ref = (env.get("valueFrom") or {}).get("fieldRef") if isinstance(env, dict) \
                    else None
                if isinstance(ref, dict):
                    ref.setdefault("apiVersion", "v1")
    for volume in spec.get("volumes") or []:
        for kind in _DEFAULT_MODE_VOLUMES:
            if isinstance(volume, dict) and isinstance(volume.get(kind), dict):
                volume[kind].setdefault("defaultMode", 420)


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


STRATEGIES = {
    ("", "namespaces"): NamespaceKind(),
    ("", "secrets"): SecretKind(),
    ("", "configmaps"): ConfigMapKind(),
    ("", "events"): EventKind(v1=False),
    ("events.k8s.io", "events"): EventKind(v1=True),
    ("", "pods"): PodKind(),
    ("batch", "jobs"): JobKind(),
    ("coordination.k8s.io", "leases"): LeaseKind(),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"):
        WebhookConfigurationKind(mutating=False),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"):
        WebhookConfigurationKind(mutating=True),
    ("apiextensions.k8s.io", "customresourcedefinitions"): CRDKind(),
    ("apiregistration.k8s.io", "apiservices"): APIServiceKind(),
}
_DEFAULT = Kind()


def strategy(res):
    return STRATEGIES.get((res.group, res.resource), _DEFAULT)
