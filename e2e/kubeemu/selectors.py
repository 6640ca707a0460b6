"""Label and field selectors: the k8s.io/apimachinery grammars and match rules."""

import re

from . import errors

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_errors(key):
    """Qualified-name checks for a label key; returns messages (empty when valid)."""
    prefix, _, name = key.rpartition("/")
    msgs = []
    if key.count("/") > 1:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')"]
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        msgs.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name:
        msgs.append("name part must be non-empty")
    elif len(name) > 63:
        msgs.append("name part must be no more than 63 characters")
    elif not _NAME_PART.match(name):
        msgs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and "
                    "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                    "'my.name',  or '123-abc', regex used for validation is "
                    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return msgs


def label_value_errors(value):
    msgs = []
    if len(value) > 63:
        msgs.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        msgs.append("a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    return msgs


# --- label selectors ---------------------------------------------------------------------

_SPECIAL = "!(),=<>"
_OPS = ["!=", "==", "=", "in", "notin", ">", "<"]


def _lex(s):
    """Tokens as (kind, text): kinds are 'id', 'op' and 'end'."""
    toks, i = [], 0
    while i < len(s):
        c = s[i]
        if c.isspace():
            i += 1
            continue
        if s.startswith("!=", i) or s.startswith("==", i):
            toks.append(("op", s[i:i + 2]))
            i += 2
        elif c in _SPECIAL:
            toks.append(("op", c))
            i += 1
        else:
            j = i
            while j < len(s) and not s[j].isspace() and s[j] not in _SPECIAL:
                j += 1
            word = s[i:j]
            toks.append(("op" if word in ("in", "notin") else "id", word))
            i = j
    toks.append(("end", ""))
    return toks


class LabelSelector:
    """A parsed selector: a list of (key, op, values) requirements, ANDed."""

    def __init__(self, requirements):
        self.requirements = requirements

    @staticmethod
    def parse(text):
        toks = _lex(text or "")
        pos = 0
        reqs = []

        def fail(expected):
            t = toks[pos][1] if toks[pos][0] != "end" else "end of string"
            raise errors.bad_request(f"unable to parse requirement: found '{t}', expected: "
                                     f"{expected}")

        if toks[0][0] == "end":
            return LabelSelector([])
        while True:
            negate = False
            if toks[pos] == ("op", "!"):
                negate = True
                pos += 1
            if toks[pos][0] != "id":
                fail("identifier")
            key = toks[pos][1]
            pos += 1
            for msg in label_key_errors(key):
                raise errors.bad_request(
                    f'unable to parse requirement: key: Invalid value: "{key}": {msg}')
            if negate:
                reqs.append((key, "!", []))
            elif toks[pos][0] == "end" or toks[pos] == ("op", ","):
                reqs.append((key, "exists", []))
            else:
                op = toks[pos][1]
                if toks[pos][0] != "op" or op not in _OPS:
                    fail("in, notin, =, ==, !=, gt, lt")
                pos += 1
                if op in ("in", "notin"):
                    if toks[pos] != ("op", "("):
                        fail("'('")
                    pos += 1
                    values = []
                    while True:
                        if toks[pos][0] == "id":
                            values.append(toks[pos][1])
                            pos += 1
                        elif toks[pos] in (("op", ","), ("op", ")")):
                            values.append("")
                        if toks[pos] == ("op", ")"):
                            pos += 1
                            break
                        if toks[pos] != ("op", ","):
                            fail("',' or ')'")
                        pos += 1
                else:
                    if toks[pos][0] == "id":
                        values = [toks[pos][1]]
                        pos += 1
                    elif toks[pos][0] == "end" or toks[pos] == ("op", ","):
                        values = [""]
                    else:
                        fail("identifier")
                    if op in (">", "<") and not re.match(r"^-?\d+$", values[0]):
                        raise errors.bad_request(
                            "unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                            "must be an integer")
                for v in values:
                    for msg in label_value_errors(v):
                        raise errors.bad_request(f'unable to parse requirement: values[0][{key}]: '
                                                 f'Invalid value: "{v}": {msg}')
                reqs.append((key, op, values))
            if toks[pos][0] == "end":
                return LabelSelector(reqs)
            if toks[pos] != ("op", ","):
                fail("',' or 'end of string'")
            pos += 1
            if toks[pos][0] != "id" and toks[pos] != ("op", "!"):
                fail("identifier after ','")

    def matches(self, labels):
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            val = labels.get(key)
            if op == "exists" and not present:
                return False
            if op == "!" and present:
                return False
            if op in ("=", "==", "in") and (not present or val not in values):
                return False
            if op in ("!=", "notin") and present and val in values:
                return False
            if op in (">", "<"):
                if not present or not re.match(r"^-?\d+$", val):
                    return False
                if (int(val) > int(values[0])) != (op == ">"):
                    return False
        return True


# --- field selectors ---------------------------------------------------------------------

def _event_source(obj):
    return (obj.get("source") or {}).get("component", "")


# Extra fields a kind accepts beyond metadata.name/metadata.namespace, as (group, resource).
_EXTRA_FIELDS = {
    ("", "secrets"): ["type"],
    ("", "namespaces"): ["status.phase"],
    ("", "services"): ["spec.clusterIP", "spec.type"],
    ("", "pods"): ["spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                   "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                   "status.podIP", "status.nominatedNodeName"],
    ("", "events"): ["involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                     "involvedObject.uid", "involvedObject.apiVersion",
                     "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                     "reportingComponent", "source", "type"],
    ("batch", "jobs"): ["status.successful"],
}
# Kinds whose field label conversion function words the rejection itself.
_REJECT = {("batch", "jobs"): 'field label "{}" not supported for batchv1.Job'}
# Selectable fields that are not the object's own path.
_FIELD_VALUES = {("batch", "jobs"): {
    "status.successful": lambda obj: str((obj.get("status") or {}).get("succeeded") or 0)}}


def _unescape(v):
    return re.sub(r"\\(.)", r"\1", v)


class FieldSelector:
    def __init__(self, terms, res=None):
        self.terms = terms  # [(field, op, value)], op in {"=", "!="}
        self.computed = _FIELD_VALUES.get((res.group, res.resource), {}) if res else {}

    @staticmethod
    def parse(text, res):
        terms = []
        if text:
            for part in re.split(r"(?<!\\),", text):
                m = re.match(r"^(.*?)(!=|==|=)(.*)$", part)
                if not m or not m.group(1):
                    raise errors.bad_request(f"invalid selector: '{text}'; can't understand "
                                             f"'{part}'")
                field, op, value = m.group(1).strip(), m.group(2), _unescape(m.group(3).strip())
                terms.append((field, "!=" if op == "!=" else "=", value))
        allowed = ["metadata.name"] + (["metadata.namespace"] if res.namespaced else [])
        if res.group == "events.k8s.io":
            allowed += _EXTRA_FIELDS[("", "events")]
        allowed += _EXTRA_FIELDS.get((res.group, res.resource), [])
        for field, _, _ in terms:
            # events.k8s.io/v1 names the involved object "regarding".
            if field not in allowed and not (res.group == "events.k8s.io" and
                                             field.startswith("regarding.")):
                reject = _REJECT.get((res.group, res.resource))
                if reject:
                    raise errors.bad_request(reject.format(field))
                if res.group == "":
                    raise errors.bad_request(f"field label not supported: {field}")
                raise errors.bad_request(f'"{field}" is not a known field selector: only '
                                         f'"metadata.name", "metadata.namespace"')
        return FieldSelector(terms, res)

    def exact_name(self):
        """The name when the selector pins metadata.name=X (used by RBAC, as the apiserver does)."""
        for field, op, value in self.terms:
            if field == "metadata.name" and op == "=":
                return value
        return ""

    def matches(self, obj):
        for field, op, value in self.terms:
            if field == "source":
                actual = _event_source(obj)
            elif field in self.computed:
                actual = self.computed[field](obj)
            else:
                field = field.replace("regarding.", "involvedObject.", 1) \
                    if field.startswith("regarding.") else field
                cur = obj
                for part in field.split("."):
                    cur = cur.get(part) if isinstance(cur, dict) else None
                actual = "" if cur is None else (str(cur).lower() if isinstance(cur, bool)
                                                 else str(cur))
            if (actual == value) != (op == "="):
                return False
        return True
