"""managedFields and server-side apply (simplified structured-merge-diff).

Field ownership is tracked as sets of paths, the same paths the real FieldsV1 encoding
uses (f:<field>, k:{<merge key>}, v:<set value>, "." for a list element itself). List
types come from the schema: merge-keyed lists are listType=map, primitive merge lists are
sets, everything else is atomic (owned and replaced whole).

What is emulated: ownership per manager and operation (Apply / Update), conflicts on
changed fields owned by another manager (409 unless force=true, which takes ownership),
removal of fields a manager applied before and no longer applies (unless someone else
owns them), and the upgrade path from client-side apply (manager "kubectl" may take
over fields listed in the last-applied-configuration annotation). What is not: the exact element ordering of merged lists and composite list
keys (Service/container ports use one key field).
"""

import copy
import json

from . import codec, errors, schema

# Fields never tracked: identity and server-managed metadata.
_SKIP_ROOT = {"apiVersion", "kind"}
_SKIP_META = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
              "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink",
              "generateName"}


def _key_json(item, key):
    return json.dumps({key: item.get(key)}, separators=(",", ":"), sort_keys=True)


def leaf_paths(obj, node, prefix=()):
    """The set of owned paths an object's fields make up (intermediate maps implied)."""
    out = set()
    if not isinstance(obj, dict):
        return out
    for k, v in obj.items():
        if not prefix and k in _SKIP_ROOT:
            continue
        if prefix == (("f", "metadata"),) and k in _SKIP_META:
            continue
        child = schema.child(node, k)
        p = prefix + (("f", k),)
        if isinstance(v, dict) and v and not isinstance(child, schema.Scalar):
            out |= leaf_paths(v, child, p)
        elif isinstance(v, list) and isinstance(child, schema.ListOf) and child.ssa_key and \
                all(isinstance(i, dict) and child.ssa_key in i for i in v):
            for item in v:
                ip = p + (("k", _key_json(item, child.ssa_key)),)
                out.add(ip + ((".", ""),))
                out |= leaf_paths(item, child.item, ip)
        elif isinstance(v, list) and isinstance(child, schema.ListOf) and child.set:
            for item in v:
                out.add(p + (("v", json.dumps(item, separators=(",", ":"))),))
        else:
            out.add(p)
    return out


def _find(container, elem):
    """Resolve one path element inside a value; returns (found, value)."""
    kind, arg = elem
    if kind == "f":
        if isinstance(container, dict) and arg in container:
            return True, container[arg]
        return False, None
    if isinstance(container, list):
        want = json.loads(arg)
        for item in container:
            if kind == "k" and isinstance(item, dict) and \
                    all(item.get(k) == v for k, v in want.items()):
                return True, item
            if kind == "v" and item == want:
                return True, item
    return False, None


def value_at(obj, path):
    cur = obj
    for elem in path:
        if elem[0] == ".":
            return True, cur
        found, cur = _find(cur, elem)
        if not found:
            return False, None
    return True, cur


def remove_path(obj, path):
    """Delete the field or list element a path names (no-op when absent)."""
    if path and path[-1][0] == ".":
        path = path[:-1]
    cur = obj
    for elem in path[:-1]:
        found, cur = _find(cur, elem)
        if not found:
            return
    kind, arg = path[-1]
    if kind == "f" and isinstance(cur, dict):
        cur.pop(arg, None)
    elif isinstance(cur, list):
        found, item = _find(cur, path[-1])
        if found:
            cur.remove(item)


def format_path(path):
    """fieldpath.Path.String(): .webhooks[name="a.example.com"].clientConfig.caBundle"""
    s = ""
    for kind, arg in path:
        if kind == "f":
            s += "." + arg
        elif kind == "k":
            s += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(arg).items()) + "]"
        elif kind == "v":
            s += "[=" + arg + "]"
    return s


def encode(paths):
    """Paths -> FieldsV1 JSON."""
    root = {}
    for path in sorted(paths):
        cur = root
        for kind, arg in path:
            key = "." if kind == "." else f"{kind}:{arg}"
            cur = cur.setdefault(key, {})
    return root


def decode(fields, prefix=()):
    out = set()
    for key, sub in (fields or {}).items():
        if key == ".":
            out.add(prefix + ((".", ""),))
            continue
        kind, _, arg = key.partition(":")
        p = prefix + ((kind, arg),)
        if sub:
            out |= decode(sub, p)
        else:
            out.add(p)
    return out


class Entry:
    def __init__(self, manager, operation, api_version, time, paths, subresource=""):
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.time = time
        self.paths = paths
        self.subresource = subresource

    def same_owner(self, other):
        return (self.manager, self.operation, self.subresource) == \
            (other.manager, other.operation, other.subresource)

    def printed(self):
        s = json.dumps(self.manager)
        if self.subresource:
            s += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            s += f" using {self.api_version}"
        return s

    def to_json(self):
        d = {"manager": self.manager, "operation": self.operation,
             "apiVersion": self.api_version, "time": self.time, "fieldsType": "FieldsV1",
             "fieldsV1": encode(self.paths)}
        if self.subresource:
            d["subresource"] = self.subresource
        return d


def entries_of(obj):
    return [Entry(e.get("manager", ""), e.get("operation", ""), e.get("apiVersion", ""),
                  e.get("time", ""), decode(e.get("fieldsV1")), e.get("subresource", ""))
            for e in (obj.get("metadata") or {}).get("managedFields") or []]


def _store(obj, entries):
    entries = [e for e in entries if e.paths]
    meta = obj.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = [e.to_json() for e in entries]
    else:
        meta.pop("managedFields", None)


def _upsert(entries, entry):
    for i, e in enumerate(entries):
        if e.same_owner(entry):
            entries[i] = entry
            return
    entries.append(entry)


def record_update(old, new, manager, api_version, node, subresource=""):
    """Track a non-apply write: the writer takes every field it changed.

    Ownership starts from new's managedFields, which the caller set to the stored ones
    (or to what the client explicitly wrote, as kubectl's client-side-apply migration does).
    """
    entries = entries_of(new)
    new_paths = leaf_paths(new, node)
    old_paths = leaf_paths(old, node) if old else set()
    changed = {p for p in new_paths
               if p not in old_paths or value_at(old, p) != value_at(new, p)}
    for e in entries:
        e.paths = (e.paths & new_paths) - changed
    mine = next((e for e in entries if e.manager == manager and e.operation == "Update" and
                 e.subresource == subresource), None)
    paths = (mine.paths if mine else set()) | changed
    _upsert(entries, Entry(manager, "Update", api_version, codec.fmt_time(codec.now()), paths,
                           subresource))
    _store(new, entries)


def apply(live, applied, manager, force, api_version, node):
    """Merge an apply configuration into the live object; returns the new object."""
    entries = entries_of(live) if live else []
    applied_paths = leaf_paths(applied, node)
    me = Entry(manager, "Apply", api_version, "", set())
    conflicts = []
    for e in entries:
        if e.same_owner(me):
            continue
        for p in sorted(e.paths & applied_paths):
            if p[-1][0] == ".":
                continue
            live_found, live_value = value_at(live, p)
            if live_found and live_value != value_at(applied, p)[1]:
                conflicts.append((e, p))
    if conflicts and not force and manager == "kubectl" and \
            all(p in _last_applied_paths(live, node) for _, p in conflicts):
        force = True  # the apiserver's lastAppliedManager: client- to server-side upgrade
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for e, p in conflicts:
        e.paths.discard(p)
    previous = next((e.paths for e in entries if e.same_owner(me)), set())
    others = set().union(*(e.paths for e in entries if not e.same_owner(me)))
    result = copy.deepcopy(live) if live else {}
    for p in sorted(previous - applied_paths - others, key=len, reverse=True):
        remove_path(result, p)
    result = merge(result, applied, node)
    _upsert(entries, Entry(manager, "Apply", api_version, codec.fmt_time(codec.now()),
                           applied_paths))
    _store(result, entries)
    return result


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _last_applied_paths(live, node):
    """Fields of kubectl's client-side-apply annotation: `kubectl apply --server-side` may
    take them over without a conflict."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        return leaf_paths(json.loads(text), node) if text else set()
    except ValueError:
        return set()


def merge(live, applied, node):
    """Structural merge of an apply configuration (maps granular, keyed lists per element)."""
    if isinstance(live, dict) and isinstance(applied, dict):
        out = dict(live)
        for k, v in applied.items():
            out[k] = merge(live.get(k), v, schema.child(node, k))
        return out
    if isinstance(node, schema.ListOf) and isinstance(live, list) and isinstance(applied, list):
        if node.ssa_key:
            out = list(live)
            for item in applied:
                idx = next((i for i, o in enumerate(out) if isinstance(o, dict) and
                            isinstance(item, dict) and o.get(node.ssa_key) ==
                            item.get(node.ssa_key)), None)
                if idx is None:
                    out.append(copy.deepcopy(item))
                else:
                    out[idx] = merge(out[idx], item, node.item)
            return out
        if node.set:
            return list(live) + [v for v in applied if v not in live]
    return copy.deepcopy(applied)


def strip_times(obj):
    """The object with managedFields timestamps blanked, for no-op detection."""
    o = copy.deepcopy(obj)
    for e in (o.get("metadata") or {}).get("managedFields") or []:
        e.pop("time", None)
    return o


def _conflict_error(conflicts):
    n = len(conflicts)
    if n == 1:
        e, p = conflicts[0]
        detail = f"conflict with {e.printed()}: {format_path(p)}"
    else:
        lines = []
        for printed in sorted({e.printed() for e, _ in conflicts}):
            lines.append(f"conflicts with {printed}:")
            lines += [f"- {format_path(p)}" for e, p in conflicts if e.printed() == printed]
        detail = "\n".join(lines)
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {e.printed()}",
               "field": format_path(p)} for e, p in conflicts]
    return errors.ApiError(409, "Conflict",
                           f"Apply failed with {n} conflict{'s' if n > 1 else ''}: {detail}",
                           {"causes": causes})
