"""REST semantics of the generic registry: get, list, watch, create, update, patch, delete.

The HTTP layer (server.py) authenticates, routes and authorizes; this module implements
what kube-apiserver's handlers and generic store do for one request, as described in the
wire spec (sections 3-6), and raises errors.ApiError for every failure.
"""

import base64
import copy
import json
import queue
import random
import threading
import time
import uuid

from . import codec, errors, kinds, managed, patch, protobuf, schema
from .errors import ApiError, FieldError
from .resources import lookup, serve_crd, storage_resource, unserve_crd
from .selectors import FieldSelector, LabelSelector
from .store import Compacted

JSON_TYPES = ("application/json", "")
PROTOBUF_TYPE = "application/vnd.kubernetes.protobuf"
PATCH_TYPES = {"application/json-patch+json": "json",
               "application/merge-patch+json": "merge",
               "application/strategic-merge-patch+json": "strategic",
               "application/apply-patch+yaml": "apply"}
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# A read or watch "not older than" a future revision waits this long before a 504.
FUTURE_RV_WAIT = 3.0
GENERATE_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def parse_bool(value, name):
    """Go strconv.ParseBool, as the apiserver's query decoding uses."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax for {name}')


class Request:
    """One API request after routing: who, which resource, and the raw HTTP parts."""

    def __init__(self, method, query, headers, body, user, res, namespace, name, subresource):
        self.method = method
        self.query = query
        self.headers = headers
        self.body = body
        self.user = user
        self.res = res
        self.namespace = namespace
        self.name = name
        self.subresource = subresource
        self.warnings = []

    def param(self, name, default=""):
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name):
        value = self.param(name, None)
        return False if value is None else parse_bool(value, name)

    @property
    def content_type(self):
        return (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()


class Reply:
    def __init__(self, code, body, warnings=()):
        self.code = code
        self.body = body
        self.warnings = list(warnings)


class API:
    def __init__(self, store, authenticator, bookmark_interval=60.0):
        self.store = store
        self.auth = authenticator
        self.bookmark_interval = bookmark_interval
        # How "drop watches" ends streams: cleanly (terminating chunk) or by a reset.
        self.abrupt_drop = False
        self._tasks = queue.Queue()
        self._worker = threading.Thread(target=self._run_tasks, name="controllers",
                                        daemon=True)
        self._worker.start()
        ns_res = lookup("", "v1", "namespaces")
        for name in INITIAL_NAMESPACES:
            self._create_object(ns_res, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": name}}, "kube-apiserver",
                                dry_run=False)

    # --- helpers ------------------------------------------------------------------------

    @staticmethod
    def present(res, obj):
        """The stored object as the requested group/version shows it."""
        obj = copy.deepcopy(obj)
        if res.group == "events.k8s.io":
            obj = kinds.event_to_v1(obj)
        out = {"kind": res.kind, "apiVersion": res.group_version}
        out.update({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")})
        kinds.strategy(res).present(out)
        return out

    @staticmethod
    def _to_storage(res, obj):
        if res.group == "events.k8s.io":
            obj = kinds.event_from_v1(obj)
            obj["apiVersion"], obj["kind"] = "v1", "Event"
        return obj

    def _wait_for_rev(self, rev):
        with self.store.cond:
            if not self.store.cond.wait_for(lambda: self.store.rev >= rev, FUTURE_RV_WAIT):
                raise errors.timeout(f"Too large resource version: {rev}, current: "
                                     f"{self.store.rev}", 1,
                                     [{"reason": "ResourceVersionTooLarge",
                                       "message": "Too large resource version"}])

    @staticmethod
    def _parse_rv(value):
        try:
            rv = int(value)
            if rv < 0:
                raise ValueError
            return rv
        except ValueError:
            raise errors.bad_request(f'invalid resource version: "{value}"') from None

    def _field_manager(self, req, default=""):
        manager = req.param("fieldManager") or default or \
            (req.headers.get("User-Agent") or "").split("/")[0][:128]
        if len(manager) > 128:
            raise errors.invalid_options(self._options_kind(req), [FieldError(
                "TooLong", "fieldManager", detail="must have at most 128 bytes")])
        return manager

    @staticmethod
    def _options_kind(req):
        return {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions",
                "DELETE": "DeleteOptions"}.get(req.method, "ListOptions")

    def _write_options(self, req, dry_run_values=None):
        """Validate dryRun and fieldValidation; returns (dry_run, field_validation)."""
        dry = dry_run_values if dry_run_values is not None else req.query.get("dryRun", [])
        if dry and dry != ["All"]:
            raise errors.invalid_options(self._options_kind(req), [errors.not_supported(
                "dryRun", errors.GoRepr("[]string{" + ", ".join(json.dumps(d) for d in dry) +
                                        "}"), ["All"])])
        validation = req.param("fieldValidation", "Warn") or "Warn"
        if validation not in ("Ignore", "Warn", "Strict"):
            raise errors.invalid_options(self._options_kind(req), [errors.not_supported(
                "fieldValidation", validation, ["Ignore", "Warn", "Strict"])])
        return bool(dry), validation

    def _decode_body(self, req, validation):
        """Decode a create/update body into the stored form of req.res."""
        res = req.res
        if req.content_type == PROTOBUF_TYPE:
            obj = protobuf.decode(req.body)
            duplicates = []
        elif req.content_type in JSON_TYPES:
            try:
                obj, duplicates = codec.loads(req.body or b"null")
            except ValueError as e:
                raise errors.bad_request(f"couldn't get version/kind; json parse error: {e}") \
                    from None
        else:
            raise errors.unsupported_media_type(
                f'the body of the request was in an unknown format - accepted media types '
                f'include: application/json, application/yaml, {PROTOBUF_TYPE}')
        if not isinstance(obj, dict):
            raise errors.bad_request(f"{res.kind} in version \"{res.version}\" cannot be "
                                     f"handled as a {res.kind}: json: cannot unmarshal "
                                     f"{type(obj).__name__} into Go value of type "
                                     f"struct")
        return self._decode_object(res, obj, duplicates, validation, req)

    def _decode_object(self, res, obj, duplicates, validation, req, patch_body=None):
        """Type-check an object against its schema; apply fieldValidation."""
        obj.setdefault("apiVersion", res.group_version)
        obj.setdefault("kind", res.kind)
        if obj["apiVersion"] != res.group_version:
            raise errors.bad_request(f"the API version in the data ({obj['apiVersion']}) does "
                                     f"not match the expected API version "
                                     f"({res.group_version})")
        if obj["kind"] != res.kind:
            raise errors.bad_request(f"the kind in the data ({obj['kind']}) does not match the "
                                     f"expected kind ({res.kind})")
        ctx = schema.DecodeContext(duplicates)
        name = (obj.get("metadata") or {}).get("name", "") if isinstance(
            obj.get("metadata"), dict) else ""
        try:
            decoded = schema.for_resource(res).decode(obj, "", ctx)
        except schema.DecodeError as e:
            if patch_body is not None:
                raise errors.invalid_object(res.qualified_kind, res.group, name,
                                            [errors.invalid("patch", patch_body, str(e))])
            raise errors.bad_request(f'{res.kind} in version "{res.version}" cannot be handled '
                                     f'as a {res.kind}: {e}') from None
        strict = ctx.strict_errors()
        if strict and validation == "Strict":
            msg = "strict decoding error: " + ", ".join(strict)
            if patch_body is not None:
                raise errors.invalid_object(res.qualified_kind, res.group, name,
                                            [errors.invalid("patch", patch_body, msg)])
            raise errors.bad_request(f'{res.kind} in version "{res.version}" cannot be handled '
                                     f'as a {res.kind}: {msg}')
        if validation == "Warn":
            req.warnings += strict
        decoded.setdefault("metadata", {})
        return self._to_storage(res, decoded)

    def _check_namespace(self, req, obj):
        meta = obj["metadata"]
        if not req.res.namespaced:
            meta.pop("namespace", None)
            return
        body_ns = meta.get("namespace", "")
        if body_ns and body_ns != req.namespace:
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        meta["namespace"] = req.namespace

    def _admit_namespace(self, res, obj):
        """The NamespaceLifecycle admission plugin, for creates of namespaced objects."""
        if not res.namespaced:
            return
        ns_name = obj["metadata"]["namespace"]
        ns = self.store.get(("", "namespaces"), "", ns_name)
        if ns is None:
            raise errors.ApiError(404, "NotFound", f'namespaces "{ns_name}" not found',
                                  {"name": ns_name, "kind": "namespaces"})
        if ns["metadata"].get("deletionTimestamp"):
            why = (f"unable to create new content in namespace {ns_name} because it is being "
                   f"terminated")
            raise errors.forbidden(res.gr, obj["metadata"].get("name", ""), why,
                                   [{"reason": "NamespaceTerminating", "message": why,
                                     "field": "metadata.namespace"}])

    def _validate(self, res, obj, old):
        strategy = kinds.strategy(res)
        errs = kinds.validate_meta(obj, strategy.name_rule) + strategy.validate(obj, old)
        if old is not None:
            errs += self._finalizer_errors(obj, old)
        if errs:
            raise errors.invalid_object(res.qualified_kind, res.group,
                                        obj["metadata"].get("name", ""), errs)

    @staticmethod
    def _finalizer_errors(obj, old):
        if not old["metadata"].get("deletionTimestamp"):
            return []
        added = set(obj["metadata"].get("finalizers") or []) - \
            set(old["metadata"].get("finalizers") or [])
        if added:
            return [errors.forbidden_field(
                "metadata.finalizers", f"no new finalizers can be added if the object is being "
                                       f"deleted, found new finalizers {sorted(added)}")]
        return []

    @staticmethod
    def _gone(storage, obj):
        """Whether an update leaves a deleting object without finalizers (-> remove it)."""
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        return not (storage == ("", "namespaces") and (obj.get("spec") or {}).get("finalizers"))

    # --- GET / LIST / WATCH -------------------------------------------------------------

    def get(self, req):
        rv = req.param("resourceVersion")
        if rv not in ("", "0"):
            self._wait_for_rev(self._parse_rv(rv))
        obj = self.store.get(req.res.storage, req.namespace, req.name)
        if obj is None:
            raise errors.not_found(req.res.gr, req.name)
        if req.subresource == "scale":
            return Reply(200, scale_of(obj))
        return Reply(200, self.present(req.res, obj))

    def _selectors(self, req):
        return (LabelSelector.parse(req.param("labelSelector")),
                FieldSelector.parse(req.param("fieldSelector"), req.res))

    def _matcher(self, req):
        labels, fields = self._selectors(req)

        def matches(obj):
            meta = obj["metadata"]
            if req.namespace and meta.get("namespace") != req.namespace:
                return False
            return labels.matches(meta.get("labels")) and fields.matches(obj)
        return matches, bool(labels.requirements or fields.terms)

    def _etcd_key(self, req, obj):
        meta = obj["metadata"]
        if req.res.namespaced and not req.namespace:
            return f"{meta.get('namespace', '')}/{meta['name']}"
        return meta["name"]

    def list(self, req):
        res = req.res
        matches, selective = self._matcher(req)
        rv, rv_match = req.param("resourceVersion"), req.param("resourceVersionMatch")
        token = req.param("continue")
        limit = req.param("limit")
        if rv_match:
            if not rv:
                raise errors.invalid_options("ListOptions", [errors.forbidden_field(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden unless "
                                            "resourceVersion is provided")])
            if rv_match not in ("NotOlderThan", "Exact"):
                raise errors.invalid_options("ListOptions", [errors.not_supported(
                    "resourceVersionMatch", rv_match, ["Exact", "NotOlderThan"])])
            if rv_match == "Exact" and rv == "0":
                raise errors.invalid_options("ListOptions", [errors.forbidden_field(
                    "resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for '
                                            'resourceVersion "0"')])
        at_rev, start = None, ""
        if token:
            if rv not in ("", "0"):
                raise errors.bad_request("specifying resource version is not allowed when "
                                         "using continue")
            at_rev, start = self._decode_continue(token)
        elif rv not in ("", "0"):
            wanted = self._parse_rv(rv)
            if rv_match == "Exact":
                at_rev = wanted
            self._wait_for_rev(wanted)
        try:
            list_rev, items = self.store.list(res.storage, req.namespace or None, at_rev)
        except Compacted:
            if token:
                raise errors.gone("The provided continue parameter is too old to display a "
                                  "consistent list result. You can start a new list without "
                                  "the continue parameter.") from None
            raise errors.gone("The resourceVersion for the provided list is too old.") from None
        keyed = sorted(((self._etcd_key(req, o), o) for o in items if matches(o)),
                       key=lambda kv: kv[0])
        if start:
            keyed = [kv for kv in keyed if kv[0] >= start]
        meta = {"resourceVersion": str(list_rev)}
        if limit:
            n = self._parse_limit(limit)
            if n and len(keyed) > n:
                meta["continue"] = self._encode_continue(list_rev, keyed[n][0])
                if not selective:
                    meta["remainingItemCount"] = len(keyed) - n
                keyed = keyed[:n]
        out = []
        for _, o in keyed:
            item = self.present(res, o)
            item.pop("kind")
            item.pop("apiVersion")
            out.append(item)
        return Reply(200, {"kind": res.list_kind, "apiVersion": res.group_version,
                           "metadata": meta, "items": out})

    @staticmethod
    def _parse_limit(value):
        try:
            return max(int(value), 0)
        except ValueError:
            raise errors.bad_request(f'invalid limit: "{value}"') from None

    @staticmethod
    def _encode_continue(rev, next_key):
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rev, "start": next_key + "\x00"},
                         separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token):
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            doc = json.loads(raw)
            if doc.get("v") != "meta.k8s.io/v1" or not isinstance(doc.get("rv"), int):
                raise ValueError("unsupported continue token")
            return doc["rv"], doc.get("start", "").rstrip("\x00")
        except (ValueError, TypeError) as e:
            raise errors.bad_request(f"continue key is not valid: {e}") from None

    def watch(self, req):
        """Validate a watch request; returns the WatchStream the server will run."""
        if req.flag("sendInitialEvents"):
            raise errors.invalid_options("ListOptions", [errors.forbidden_field(
                "sendInitialEvents", "sendInitialEvents is forbidden for watch unless the "
                                     "WatchList feature gate is enabled")])
        matches, _ = self._matcher(req)
        timeout = req.param("timeoutSeconds")
        try:
            seconds = int(timeout) if timeout else random.uniform(1800, 3600)
        except ValueError:
            raise errors.bad_request(f'invalid timeoutSeconds: "{timeout}"') from None
        rv = req.param("resourceVersion")
        initial = None
        if rv in ("", "0"):
            start, items = self.store.list(req.res.storage, req.namespace or None)
            initial = [o for o in items if matches(o)]
        else:
            start = self._parse_rv(rv)
            self._wait_for_rev(start)
        return WatchStream(self, req.res, matches, start, initial,
                           time.monotonic() + seconds, req.flag("allowWatchBookmarks"),
                           self.store.watch_epoch)

    # --- CREATE -------------------------------------------------------------------------

    def create(self, req):
        if req.res.resource == "selfsubjectaccessreviews":
            return self._access_review(req)
        dry_run, validation = self._write_options(req)
        obj = self._decode_body(req, validation)
        self._check_namespace(req, obj)
        manager = self._field_manager(req)
        with self.store.lock:
            created = self._create_object(req.res, obj, manager, dry_run)
        return Reply(201, self.present(req.res, created), req.warnings)

    def _create_object(self, res, obj, manager, dry_run, apply=False):
        """Admission, defaulting, validation and storage of a new object (lock held).

        apply: obj comes from server-side apply and already carries its managedFields.
        """
        meta = obj["metadata"]
        self._admit_namespace(res, obj)
        if not meta.get("name") and not meta.get("generateName"):
            raise errors.invalid_object(res.qualified_kind, res.group, "", [errors.required(
                "metadata.name", "name or generateName is required")])
        if res.status:
            obj.pop("status", None)
        server_set = ["creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "generation", "selfLink"] + ([] if apply else ["managedFields"])
        for field in server_set:
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = codec.fmt_time(codec.now())
        if res.generation:
            meta["generation"] = 1
        # The name is generated before the strategy runs (Job labels carry it).
        generate = not meta.get("name")
        if generate:
            meta["name"] = self._generate_name(meta["generateName"])
        strategy = kinds.strategy(res)
        strategy.prepare_create(obj)
        strategy.defaults(obj)
        strategy.allocate(obj, None, self.store)
        rv_set = meta.pop("resourceVersion", None)
        self._validate(res, obj, None)
        if rv_set:
            raise ApiError(500, "", "resourceVersion should not be set on objects to be "
                                    "created", {})
        attempts = 8 if generate else 1  # 1.32 retries generateName collisions
        while self.store.get(res.storage, meta.get("namespace", ""), meta["name"]) is not None:
            attempts -= 1
            if not attempts:
                raise errors.already_exists(res.gr, meta["name"])
            meta["name"] = self._generate_name(meta["generateName"])
        if not apply:
            managed.record_update(None, obj, manager, res.group_version, _storage_schema(res))
        if dry_run:
            return obj
        stored = self.store.write(res.storage, obj, "ADDED")
        if res.resource == "customresourcedefinitions":
            self._tasks.put(("establish", stored["metadata"]["name"]))
        return stored

    @staticmethod
    def _generate_name(prefix):
        return prefix[:58] + "".join(random.choice(GENERATE_NAME_CHARS) for _ in range(5))

    def _access_review(self, req):
        review = self._decode_body(req, "Ignore")
        spec = review.get("spec") or {}
        attrs, nonres = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if attrs:
            allowed = self.auth.authorize(
                req.user, attrs.get("verb", ""), attrs.get("group", ""),
                attrs.get("resource", ""), attrs.get("subresource", ""),
                attrs.get("namespace", ""), attrs.get("name", ""))
        elif nonres:
            allowed = req.user.admin or nonres.get("verb") == "get"
        else:
            raise errors.invalid_object(req.res.qualified_kind, req.res.group, "", [
                errors.invalid("spec.resourceAttributes", errors.GoRepr("nil"),
                               "exactly one of nonResourceAttributes or resourceAttributes "
                               "must be specified")])
        review["metadata"] = {"creationTimestamp": None}
        review["status"] = {"allowed": allowed}
        return Reply(201, self.present(req.res, review))

    # --- UPDATE / PATCH -----------------------------------------------------------------

    def update(self, req):
        if req.subresource == "scale":
            return self._write_scale(req, lambda current: self._decode_scale(req.body))
        dry_run, validation = self._write_options(req)
        obj = self._decode_body(req, validation)
        if obj["metadata"].get("name", "") != req.name:
            raise errors.bad_request(f"the name of the object ({obj['metadata'].get('name', '')}) "
                                     f"does not match the name on the URL ({req.name})")
        self._check_namespace(req, obj)
        manager = self._field_manager(req)
        with self.store.lock:
            old = self.store.get(req.res.storage, req.namespace, req.name)
            if old is None:
                if not req.res.create_on_update or req.subresource:
                    raise errors.not_found(req.res.gr, req.name)
                obj["metadata"].pop("resourceVersion", None)
                created = self._create_object(req.res, obj, manager, dry_run)
                return Reply(201, self.present(req.res, created), req.warnings)
            code, result = self._update_object(req, old, obj, manager, dry_run,
                                               require_rv=True)
        return Reply(code, self.present(req.res, result), req.warnings)

    def _update_object(self, req, old, new, manager, dry_run, require_rv, apply_done=False):
        """The generic store's update path (lock held); returns (code, object)."""
        res = req.res
        meta, old_meta = new["metadata"], old["metadata"]
        rv = meta.get("resourceVersion", "")
        if not rv and require_rv and not res.unconditional_update:
            raise errors.invalid_object(str(res.gr), res.group, req.name, [errors.invalid(
                "metadata.resourceVersion", errors.GoRepr("0x0"),
                "must be specified for an update")])
        if rv and rv != old_meta["resourceVersion"]:
            raise errors.conflict(res.gr, req.name)
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise errors.conflict(res.gr, req.name, self._precondition_msg(
                req, "UID", meta["uid"], old_meta["uid"]))
        if req.subresource == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            meta = new["metadata"]
        elif res.status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        for field in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        # managedFields are server-maintained unless the client explicitly rewrites them
        # (kubectl apply --server-side migrates client-side-apply ownership that way);
        # [{}] resets them.
        managed_fields = old_meta.get("managedFields")
        requested = meta.get("managedFields")
        if requested is not None and requested != managed_fields:
            managed_fields = [e for e in requested if e]
        if managed_fields:
            meta["managedFields"] = copy.deepcopy(managed_fields)
        else:
            meta.pop("managedFields", None)
        strategy = kinds.strategy(res)
        if req.subresource != "status":
            strategy.prepare_update(new, old)
            strategy.defaults(new)
            strategy.allocate(new, old, self.store)
        if res.generation and res.generation_part(new) != res.generation_part(old):
            meta["generation"] = old_meta.get("generation", 0) + 1
        self._validate(res, new, old)
        if not apply_done:
            managed.record_update(old, new, manager, res.group_version, _storage_schema(res),
                                  req.subresource)
        if managed.strip_times(new) == managed.strip_times(old):
            return 200, old  # no-op: no new revision, no watch event
        if dry_run:
            return 200, new
        if self._gone(res.storage, new):
            if res.namespaced:
                self._tasks.put(("namespace", req.namespace))
            return 200, self.store.write(res.storage, new, "DELETED")
        if res.resource == "customresourcedefinitions" and req.subresource != "status":
            self._tasks.put(("serve", req.name))  # a changed version or schema applies
        return 200, self.store.write(res.storage, new, "MODIFIED")

    def _precondition_msg(self, req, what, wanted, actual):
        key = f"/registry/{req.res.storage[1]}/" + \
            (f"{req.namespace}/" if req.res.namespaced else "") + req.name
        return (f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
                f"AdditionalErrorMsg: Precondition failed: {what} in precondition: {wanted}, "
                f"{what} in object meta: {actual}")

    def patch(self, req):
        kind = PATCH_TYPES.get(req.content_type)
        if kind is None:
            raise errors.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml, application/strategic-merge-patch+json")
        if kind == "strategic" and req.res.custom:
            raise errors.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml")
        dry_run, validation = self._write_options(req)
        force = req.param("force", None)
        if force is not None and kind != "apply":
            raise errors.invalid_options("PatchOptions", [errors.forbidden_field(
                "force", "may not be specified for non-apply patch")])
        manager = req.param("fieldManager")
        if kind == "apply" and not manager:
            raise errors.invalid_options("PatchOptions", [errors.required(
                "fieldManager", "is required for apply patch")])
        manager = self._field_manager(req)
        try:
            body, duplicates = codec.loads(req.body or b"null")
        except ValueError as e:
            if kind == "apply":
                raise errors.bad_request(f"error decoding YAML: the emulator accepts apply "
                                         f"configurations in JSON syntax only: {e}") from None
            raise errors.bad_request(f"invalid JSON document: {e}") from None
        patch_text = codec.dumps(body)
        res = req.res
        if req.subresource == "scale":
            if kind == "apply":
                raise errors.unsupported_media_type("the emulator does not apply to /scale")

            def patched_scale(current):
                if kind == "json":
                    return patch.json_patch(current, body)
                if kind == "merge":
                    return patch.merge_patch(current, body)
                return patch.strategic_merge(current, body, None)
            return self._write_scale(req, patched_scale)
        with self.store.lock:
            old = self.store.get(res.storage, req.namespace, req.name)
            if kind == "apply":
                return self._apply(req, old, body, duplicates, validation, manager,
                                   parse_bool(force, "force") if force else False, dry_run)
            if old is None:
                raise errors.not_found(res.gr, req.name)
            current = self.present(res, old)
            if kind == "json":
                patched = patch.json_patch(current, body)
            elif kind == "merge":
                patched = patch.merge_patch(current, body)
            else:
                patched = patch.strategic_merge(current, body, schema.for_resource(res))
            if not isinstance(patched, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            new = self._decode_object(res, patched, duplicates, validation, req,
                                      patch_body=patch_text)
            code, result = self._update_object(req, old, new, manager, dry_run,
                                               require_rv=False)
        return Reply(code, self.present(res, result), req.warnings)

    @staticmethod
    def _decode_scale(raw):
        try:
            scale, _ = codec.loads(raw or b"null")
        except ValueError as e:
            raise errors.bad_request(f"invalid JSON document: {e}") from None
        return scale

    def _write_scale(self, req, make):
        """PUT or PATCH of /scale: `make(current Scale)` gives the new Scale, whose
        spec.replicas becomes the object's (resourceVersion a precondition when given)."""
        dry_run, _ = self._write_options(req)
        manager = self._field_manager(req)
        with self.store.lock:
            old = self.store.get(req.res.storage, req.namespace, req.name)
            if old is None:
                raise errors.not_found(req.res.gr, req.name)
            scale = make(scale_of(old))
            if not isinstance(scale, dict) or not isinstance(scale.get("spec"), dict):
                raise errors.bad_request("the Scale has no spec")
            replicas = scale["spec"].get("replicas", 0)
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise errors.invalid_object("Scale.autoscaling", "autoscaling", req.name, [errors.invalid(
                    "spec.replicas", replicas, "must be greater than or equal to 0")])
            rv = (scale.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(req.res.gr, req.name)
            new = copy.deepcopy(old)
            new["spec"]["replicas"] = replicas
            new["metadata"].pop("resourceVersion", None)
            code, result = self._update_object(req, old, new, manager, dry_run,
                                               require_rv=False)
        return Reply(code, scale_of(result), req.warnings)

    def _apply(self, req, old, body, duplicates, validation, manager, force, dry_run):
        """Server-side apply (lock held): merge the configuration, then create or update."""
        res = req.res
        if not isinstance(body, dict):
            raise errors.bad_request("apply configuration must be a JSON object")
        applied = self._decode_object(res, body, duplicates, validation, req)
        if applied["metadata"].get("name", req.name) != req.name:
            raise errors.bad_request(f"the name of the object ({applied['metadata']['name']}) "
                                     f"does not match the name on the URL ({req.name})")
        self._check_namespace(req, applied)
        applied["metadata"]["name"] = req.name
        if res.status and req.subresource != "status":
            applied.pop("status", None)
        live = copy.deepcopy(old) if old else None
        merged = managed.apply(live, applied, manager, force, res.group_version,
                               _storage_schema(res))
        if old is None:
            created = self._create_object(res, merged, manager, dry_run, apply=True)
            return Reply(201, self.present(res, created), req.warnings)
        code, result = self._update_object(req, old, merged, manager, dry_run,
                                           require_rv=False, apply_done=True)
        return Reply(code, self.present(res, result), req.warnings)

    # --- DELETE -------------------------------------------------------------------------

    def _delete_options(self, req):
        opts = {}
        if req.body and req.body.strip():
            try:
                opts, _ = codec.loads(req.body)
            except ValueError as e:
                raise errors.bad_request(f"invalid DeleteOptions: {e}") from None
            if not isinstance(opts, dict):
                raise errors.bad_request("invalid DeleteOptions")
        for key in ("propagationPolicy", "gracePeriodSeconds"):
            if key not in opts and req.param(key):
                opts[key] = req.param(key)
        if "dryRun" not in opts and req.query.get("dryRun"):
            opts["dryRun"] = req.query["dryRun"]
        policy = opts.get("propagationPolicy")
        if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
            raise errors.invalid_options("DeleteOptions", [errors.not_supported(
                "propagationPolicy", policy, ["Foreground", "Background", "Orphan", "nil"])])
        dry_run, _ = self._write_options(req, opts.get("dryRun") or [])
        return opts, dry_run

    def delete(self, req):
        opts, dry_run = self._delete_options(req)
        res = req.res
        with self.store.lock:
            old = self.store.get(res.storage, req.namespace, req.name)
            if old is None:
                raise errors.not_found(res.gr, req.name)
            pre = opts.get("preconditions") or {}
            meta = old["metadata"]
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise errors.conflict(res.gr, req.name, self._precondition_msg(
                    req, "UID", pre["uid"], meta["uid"]))
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(res.gr, req.name, self._precondition_msg(
                    req, "ResourceVersion", pre["resourceVersion"], meta["resourceVersion"]))
            return self._delete_object(res, old, dry_run)

    def _delete_object(self, res, old, dry_run):
        """Delete now, or mark for deletion when finalizers (or a controller) must run first."""
        meta = old["metadata"]
        if res.resource == "namespaces":
            if meta["name"] in PROTECTED_NAMESPACES:
                raise errors.forbidden(res.gr, meta["name"], "this namespace may not be deleted")
            return self._mark_deleting(res, old, dry_run, ("namespace", meta["name"]),
                                       lambda o: o.setdefault("status", {}).update(
                                           phase="Terminating"))
        if res.resource == "customresourcedefinitions":
            def crd_cleanup(o):
                finalizers = o["metadata"].setdefault("finalizers", [])
                if "customresourcecleanup.apiextensions.k8s.io" not in finalizers:
                    finalizers.append("customresourcecleanup.apiextensions.k8s.io")
                kinds.mark_crd_terminating(o)
            return self._mark_deleting(res, old, dry_run, ("crd", meta["name"]), crd_cleanup)
        if meta.get("finalizers"):
            return self._mark_deleting(res, old, dry_run, None, lambda o: None)
        if dry_run:
            deleted = old
        else:
            deleted = self.store.write(res.storage, old, "DELETED")
        return Reply(200, errors.status_success({
            "name": meta["name"], "group": res.group, "kind": res.resource,
            "uid": deleted["metadata"]["uid"]}))

    def _mark_deleting(self, res, old, dry_run, task, mutate):
        if old["metadata"].get("deletionTimestamp"):
            return Reply(200, self.present(res, old))  # repeated DELETE: nothing changes
        new = copy.deepcopy(old)
        meta = new["metadata"]
        meta["deletionTimestamp"] = codec.fmt_time(codec.now())
        meta["deletionGracePeriodSeconds"] = 0
        if meta.get("generation", 0) > 0:
            meta["generation"] += 1
        mutate(new)
        if dry_run:
            return Reply(200, self.present(res, new))
        stored = self.store.write(res.storage, new, "MODIFIED")
        if task:
            self._tasks.put(task)
        return Reply(200, self.present(res, stored))

    def delete_collection(self, req):
        _, dry_run = self._delete_options(req)
        matches, _ = self._matcher(req)
        res = req.res
        deleted = []
        with self.store.lock:
            _, items = self.store.list(res.storage, req.namespace or None)
            for obj in items:
                if matches(obj):
                    self._delete_object(res, obj, dry_run)
                    item = self.present(res, obj)
                    item.pop("kind")
                    item.pop("apiVersion")
                    deleted.append(item)
            rev = self.store.rev
        return Reply(200, {"kind": res.list_kind, "apiVersion": res.group_version,
                           "metadata": {"resourceVersion": str(rev)}, "items": deleted})

    # --- controllers --------------------------------------------------------------------

    def _run_tasks(self):
        """What kube-controller-manager and apiextensions controllers do asynchronously."""
        while True:
            kind, name = self._tasks.get()
            with self.store.lock:
                if kind == "establish":
                    self._establish(name)
                elif kind == "serve":
                    self._serve(name)
                elif kind == "crd":
                    self._finish_crd(name)
                elif kind == "namespace":
                    self._finish_namespace(name)

    def _establish(self, name):
        storage = ("apiextensions.k8s.io", "customresourcedefinitions")
        crd = self.store.get(storage, "", name)
        if crd is None or crd["metadata"].get("deletionTimestamp"):
            return
        old = copy.deepcopy(crd)
        kinds.establish_crd(crd)
        managed.record_update(old, crd, "kube-apiserver", "apiextensions.k8s.io/v1",
                              schema.CRD, "status")
        self.store.write(storage, crd, "MODIFIED")
        self._serve(name)

    def _serve(self, name):
        """Serve the custom resources of an Established CRD, as it now stands."""
        crd = self.store.get(("apiextensions.k8s.io", "customresourcedefinitions"), "", name)
        if crd is not None and not crd["metadata"].get("deletionTimestamp") and \
                kinds.established(crd):
            serve_crd(crd)

    def _finish_crd(self, name):
        """Cleanup: the custom resources go at once (finalizers are not waited for), then the
        CRD's finalizer."""
        storage = ("apiextensions.k8s.io", "customresourcedefinitions")
        crd = self.store.get(storage, "", name)
        if crd is None:
            return
        unserve_crd(name)
        custom = (crd["spec"]["group"], crd["spec"]["names"]["plural"])
        _, items = self.store.list(custom)
        for obj in items:
            self.store.write(custom, obj, "DELETED")
        crd["metadata"]["finalizers"] = [f for f in crd["metadata"].get("finalizers", [])
                                         if f != "customresourcecleanup.apiextensions.k8s.io"]
        if not crd["metadata"]["finalizers"]:
            del crd["metadata"]["finalizers"]
        self.store.write(storage, crd, "DELETED" if self._gone(storage, crd)
                         else "MODIFIED")

    def _finish_namespace(self, name):
        """The namespace controller: delete the content, then drop the spec finalizer.

        Objects with finalizers are marked for deletion; the namespace stays Terminating
        until the last of them is gone (each final removal re-queues this task).
        """
        storage = ("", "namespaces")
        ns = self.store.get(storage, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        remaining = False
        for obj_storage, obj_name in self.store.namespaced_keys(name):
            obj = self.store.get(obj_storage, name, obj_name)
            if obj["metadata"].get("finalizers"):
                remaining = True
                self._delete_object(storage_resource(obj_storage), obj, dry_run=False)
            else:
                self.store.write(obj_storage, obj, "DELETED")
        if remaining:
            return
        ns["spec"] = {}
        self.store.write(storage, ns, "DELETED" if self._gone(storage, ns)
                         else "MODIFIED")


def _storage_schema(res):
    """Schema of the stored form (events.k8s.io/v1 Events are stored as core/v1 Events)."""
    return schema.for_resource(storage_resource(res.storage))


class WatchStream:
    """One watch: initial events, then history after `start`, filtered and translated."""

    def __init__(self, api, res, matches, start, initial, deadline, bookmarks, epoch):
        self.api = api
        self.res = res
        self.matches = matches
        self.start = start
        self.initial = initial
        self.deadline = deadline
        self.bookmarks = bookmarks
        self.epoch = epoch

    def _event(self, type_, obj):
        return {"type": type_, "object": self.api.present(self.res, obj)}

    def _bookmark(self, rev):
        return {"type": "BOOKMARK", "object": {
            "kind": self.res.kind, "apiVersion": self.res.group_version,
            "metadata": {"resourceVersion": str(rev), "creationTimestamp": None}}}

    def _translate(self, ev):
        """Selector transitions: a change in or out of the selection is ADDED/DELETED."""
        if ev.type == "ADDED":
            return self._event("ADDED", ev.obj) if self.matches(ev.obj) else None
        if ev.type == "DELETED":
            return self._event("DELETED", ev.obj) if self.matches(ev.obj) else None
        was, now = ev.prev is not None and self.matches(ev.prev), self.matches(ev.obj)
        if was and now:
            return self._event("MODIFIED", ev.obj)
        if now:
            return self._event("ADDED", ev.obj)
        if was:
            gone = copy.deepcopy(ev.prev)
            gone["metadata"]["resourceVersion"] = ev.obj["metadata"]["resourceVersion"]
            return self._event("DELETED", gone)
        return None

    def run(self, emit):
        """Stream events through emit(dict) -> bool until timeout, drop or a dead client.

        Returns "abort" when the stream must end without the terminating chunk.
        """
        store = self.api.store
        for obj in self.initial or []:
            if not emit(self._event("ADDED", obj)):
                return "abort"
        pos = self.start
        interval = self.api.bookmark_interval
        next_bookmark = time.monotonic() + interval
        while True:
            send_bookmark = False
            with store.cond:
                while True:
                    if store.closed:
                        return "end"
                    if store.watch_epoch != self.epoch:
                        return "abort" if self.api.abrupt_drop else "end"
                    try:
                        events = store.events_after(self.res.storage, pos)
                    except Compacted as e:
                        emit({"type": "ERROR", "object": errors.gone(str(e)).status()})
                        return "end"
                    if events:
                        break
                    now = time.monotonic()
                    if now >= self.deadline:
                        if self.bookmarks:
                            emit(self._bookmark(store.rev))
                        return "end"
                    if self.bookmarks and now >= next_bookmark:
                        send_bookmark = True
                        break
                    wake = min(self.deadline, next_bookmark) if self.bookmarks else self.deadline
                    store.cond.wait(wake - now)
                current = store.rev
            for ev in events:
                pos = ev.rev
                out = self._translate(ev)
                if out is not None and not emit(out):
                    return "abort"
            if send_bookmark:
                next_bookmark = time.monotonic() + interval
                if not emit(self._bookmark(current)):
                    return "abort"


def scale_of(obj):
    """The autoscaling/v1 Scale of a Deployment-like object."""
    meta = obj["metadata"]
    selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                               "creationTimestamp") if k in meta},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))}}
