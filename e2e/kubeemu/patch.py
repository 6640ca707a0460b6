"""The three client-side patch formats: JSON merge patch, JSON patch and strategic merge.

All work on plain JSON values and raise ApiError with the apiserver's status codes.
Strategic merge takes its list strategies (merge key, primitive set, atomic) from the
kind's schema, i.e. from the Go struct tags the real server reads.
"""

import copy
import json

from . import errors, schema

MAX_JSON_PATCH_OPS = 10000


# --- RFC 7386 JSON merge patch -------------------------------------------------------------

def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- RFC 6902 JSON patch -------------------------------------------------------------------

class _PatchFailed(Exception):
    pass


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise _PatchFailed(f'invalid JSON pointer "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, parts, path):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise _PatchFailed(f'doc is missing path: "{path}": missing value')
    return cur


def _index(container, token, path, allow_end=False):
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit():
        raise _PatchFailed(f'invalid array index "{token}" in "{path}"')
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise _PatchFailed(f"index out of range: {i}")
    return i


def _get(doc, path):
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path)]
    raise _PatchFailed(f'doc is missing key: "{path}": missing value')


def _remove(doc, path):
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _PatchFailed(f'remove operation does not apply: doc is missing key: "{path}"')
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path))
    raise _PatchFailed(f'remove operation does not apply: doc is missing path: "{path}"')


def _add(doc, path, value):
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise _PatchFailed(f'add operation does not apply: doc is missing path: "{path}"')
    return doc


def json_patch(doc, ops):
    """Apply an RFC 6902 patch; malformed -> 400, failed operation -> 422 (generic message)."""
    if not isinstance(ops, list):
        raise errors.bad_request("json: cannot unmarshal object into Go value of type "
                                 "jsonpatch.Patch")
    if len(ops) > MAX_JSON_PATCH_OPS:
        raise errors.ApiError(422, "Invalid",
                              f"The allowed maximum operations in a JSON patch is "
                              f"{MAX_JSON_PATCH_OPS}, got: {len(ops)}", {})
    doc = copy.deepcopy(doc)
    try:
        for op in ops:
            if not isinstance(op, dict) or "op" not in op or "path" not in op:
                raise errors.bad_request("json patch operation is missing 'op' or 'path'")
            kind, path = op["op"], op["path"]
            if kind in ("add", "replace", "test") and "value" not in op:
                raise _PatchFailed(f"missing value for {kind} operation")
            if kind == "add":
                doc = _add(doc, path, copy.deepcopy(op["value"]))
            elif kind == "remove":
                _remove(doc, path)
            elif kind == "replace":
                _get(doc, path)  # must exist
                if _pointer(path):
                    _remove(doc, path)
                    doc = _add(doc, path, copy.deepcopy(op["value"]))
                else:
                    doc = copy.deepcopy(op["value"])
            elif kind in ("move", "copy"):
                value = _get(doc, op.get("from", ""))
                if kind == "move":
                    _remove(doc, op["from"])
                doc = _add(doc, path, copy.deepcopy(value))
            elif kind == "test":
                if _get(doc, path) != op["value"]:
                    raise _PatchFailed(f'testing value {path} failed: test failed')
            else:
                raise errors.bad_request(f"Unexpected kind: {kind}")
    except _PatchFailed:
        # The real handler wraps every jsonpatch failure in a generic 422 (wire spec 3.6).
        raise errors.ApiError(422, "Invalid",
                              "the server rejected our request due to an error in our request",
                              {}) from None
    return doc


# --- strategic merge patch -----------------------------------------------------------------

_DELETE = object()
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def strategic_merge(original, patch, node):
    """Apply a strategic merge patch to an object of the kind described by `node`."""
    if not isinstance(patch, dict):
        raise errors.bad_request("invalid JSON document")
    result = _merge_map(original if isinstance(original, dict) else {}, patch, node)
    return {} if result is _DELETE else result


def _merge_map(original, patch, node):
    directive = patch.get("$patch")
    if directive == "replace":
        return _merge_map({}, {k: v for k, v in patch.items() if k != "$patch"}, node)
    if directive == "delete":
        return _DELETE
    if directive not in (None, "merge"):
        raise errors.bad_request(f"Unknown patch type: {directive} in map: {patch}")
    result = copy.deepcopy(original)
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise errors.bad_request("invalid patch format for retainKeys")
        result = {k: v for k, v in result.items() if k in retain}
    orders = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith(_ORDER):
            orders[key[len(_ORDER):]] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE):]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        child = schema.child(node, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and not isinstance(child, schema.Scalar):
            merged = _merge_map(result.get(key) if isinstance(result.get(key), dict) else {},
                                value, child)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, child)
        else:
            result[key] = copy.deepcopy(value)
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _apply_order(result[field], order, schema.child(node, field),
                                         original.get(field) or [])
    return result


def _merge_list(original, patch, node):
    if not isinstance(node, schema.ListOf) or not (node.key or node.set):
        return [_strip(v) for v in patch]  # atomic: replaced whole
    original = copy.deepcopy(original) if isinstance(original, list) else []
    if node.set:
        if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
            return [v for v in patch if not isinstance(v, dict)]
        return original + [v for v in patch if v not in original and not isinstance(v, dict)]
    key = node.key
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_merge_map({}, v, node.item) for v in patch
                if not (isinstance(v, dict) and v.get("$patch") == "replace")]
    result = original
    for item in patch:
        if not isinstance(item, dict):
            raise errors.bad_request(f"json: cannot unmarshal {type(item).__name__} into a "
                                     f"list merged by {key}")
        if key not in item:
            raise errors.bad_request(f"map: {_go_map(item)} does not contain declared merge "
                                     f"key: {key}")
        idx = next((i for i, o in enumerate(result)
                    if isinstance(o, dict) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        merged = _merge_map(result[idx] if idx is not None else {}, item, node.item)
        if idx is None:
            result.append(merged)
        else:
            result[idx] = merged
    return result


def _apply_order(items, order, node, original):
    """$setElementOrder: patched elements follow `order`; server-only ones keep their place."""
    if not isinstance(node, schema.ListOf):
        return items

    def ident(v):
        return v.get(node.key) if node.key and isinstance(v, dict) else v

    wanted = [ident(o) for o in order]
    in_order = sorted((v for v in items if ident(v) in wanted), key=lambda v: wanted.index(ident(v)))
    result = list(in_order)
    orig_ids = [ident(o) for o in original]
    for v in items:
        if ident(v) not in wanted:
            pos = orig_ids.index(ident(v)) if ident(v) in orig_ids else len(result)
            result.insert(min(pos, len(result)), v)
    return result


def _strip(value):
    """Drop SMP directives from a value that replaces rather than merges."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _go_map(m):
    return "map[" + " ".join(f"{k}:{json.dumps(v) if not isinstance(v, str) else v}"
                             for k, v in sorted(m.items())) + "]"
