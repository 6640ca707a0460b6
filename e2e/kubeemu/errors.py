"""metav1.Status errors, built exactly as k8s.io/apimachinery/pkg/api/errors does.

Every failure inside the emulator is an ApiError; the HTTP layer renders it. The
message templates are the real ones, because clients (kubectl, client-go helpers
and our own controller) print or match them.
"""

import json


class ApiError(Exception):
    """A failed request: an HTTP code plus the metav1.Status body to send."""

    def __init__(self, code, reason, message, details=None, headers=None, plain_text=False):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        # APF's 429 is text/plain, not a Status (wire spec section 0.10).
        self.plain_text = plain_text

    def status(self):
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message}
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = {k: v for k, v in self.details.items() if v not in (None, "", [], 0)}
        body["code"] = self.code
        return body


def _details(gr, name, **extra):
    d = {"name": name, "group": gr.group, "kind": gr.resource}
    d.update(extra)
    return d


def not_found(gr, name):
    return ApiError(404, "NotFound", f'{gr} "{name}" not found', _details(gr, name))


def not_found_path():
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(gr, name):
    return ApiError(409, "AlreadyExists", f'{gr} "{name}" already exists', _details(gr, name))


OPTIMISTIC_LOCK = "the object has been modified; please apply your changes to the latest version and try again"


def conflict(gr, name, why=OPTIMISTIC_LOCK, causes=None):
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {gr} "{name}": {why}',
                    _details(gr, name, causes=causes))


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def forbidden(gr, name, why, causes=None):
    if not gr.resource:
        message = f"forbidden: {why}"
    elif name:
        message = f'{gr} "{name}" is forbidden: {why}'
    else:
        message = f"{gr} is forbidden: {why}"
    return ApiError(403, "Forbidden", message, _details(gr, name, causes=causes))


def unauthorized():
    return ApiError(401, "Unauthorized", "Unauthorized")


def gone(message):
    return ApiError(410, "Expired", message)


def timeout(message, retry_after=1, causes=None):
    return ApiError(504, "Timeout", f"Timeout: {message}",
                    {"retryAfterSeconds": retry_after, "causes": causes})


def internal(message):
    return ApiError(500, "InternalError", f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


def unsupported_media_type(message):
    return ApiError(415, "UnsupportedMediaType", message, {})


def not_acceptable(message):
    return ApiError(406, "NotAcceptable", message, {})


def method_not_allowed():
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource", {})


# --- field errors (k8s.io/apimachinery/pkg/util/validation/field) ---------------------------

_TYPES = {
    "Required": ("FieldValueRequired", "Required value"),
    "Invalid": ("FieldValueInvalid", "Invalid value"),
    "Duplicate": ("FieldValueDuplicate", "Duplicate value"),
    "NotSupported": ("FieldValueNotSupported", "Unsupported value"),
    "Forbidden": ("FieldValueForbidden", "Forbidden"),
    "TooLong": ("FieldValueTooLong", "Too long"),
    "TooMany": ("FieldValueTooMany", "Too many"),
}


class GoRepr(str):
    """A value already rendered the way Go's %#v would print it (e.g. 0x0, []string{"X"})."""


def go_value(value):
    """Render a bad value like field.Error.ErrorBody: %v for simple types, %q for strings."""
    if isinstance(value, GoRepr):
        return str(value)
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(json.dumps(v) for v in value) + "}"
    return GoRepr(json.dumps(value, separators=(",", ":")))


class FieldError:
    """One field.Error: type is a key of _TYPES."""

    def __init__(self, type_, field, value=None, detail=""):
        self.type = type_
        self.field = field
        self.value = value
        self.detail = detail

    def body(self):
        reason, text = _TYPES[self.type]
        if self.type in ("Required", "Forbidden", "TooLong"):
            s = text
        else:
            s = f"{text}: {go_value(self.value)}"
        if self.detail:
            s += f": {self.detail}"
        return s

    def cause(self):
        return {"reason": _TYPES[self.type][0], "message": self.body(), "field": self.field}

    def __str__(self):
        return f"{self.field}: {self.body()}"


def required(field, detail=""):
    return FieldError("Required", field, detail=detail)


def invalid(field, value, detail=""):
    return FieldError("Invalid", field, value, detail)


def duplicate(field, value):
    return FieldError("Duplicate", field, value)


def not_supported(field, value, supported):
    detail = "supported values: " + ", ".join(json.dumps(s) for s in supported) if supported else ""
    return FieldError("NotSupported", field, value, detail)


def forbidden_field(field, detail=""):
    return FieldError("Forbidden", field, detail=detail)


def too_long(field, limit):
    return FieldError("TooLong", field, detail=f"may not be more than {limit} bytes")


def too_many(field, actual, limit):
    return FieldError("TooMany", field, actual,
                      f"must have at most {limit} item" + ("" if limit == 1 else "s"))


def invalid_object(qualified_kind, group, name, errs):
    """NewInvalid: 422 '<Kind.group> "<name>" is invalid: <aggregate>'."""
    seen, msgs = set(), []
    for e in errs:
        s = str(e)
        if s not in seen:
            seen.add(s)
            msgs.append(s)
    agg = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    kind = qualified_kind.split(".", 1)[0]
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {agg}',
                    {"name": name, "group": group, "kind": kind,
                     "causes": [e.cause() for e in errs]})


def invalid_options(options_kind, errs):
    """Validation of CreateOptions/PatchOptions/... query parameters."""
    return invalid_object(f"{options_kind}.meta.k8s.io", "meta.k8s.io", "", errs)


def status_success(details):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {k: v for k, v in details.items() if v}}
