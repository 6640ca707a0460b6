"""Bearer-token authentication and a per-token RBAC policy.

The policy file is JSON:
  {"users": {"<token>": {"name": "system:serviceaccount:ca:ctrl", "groups": ["..."],
             "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
                        "resourceNames": ["tls"], "namespaces": ["ca"]}]}}}
"*" is a wildcard in every list; a rule without "namespaces" is cluster-wide; a rule
with resourceNames never matches a request without a name (as in RBAC). As kube-apiserver's
RequestInfo does, the server passes a list or watch pinned by fieldSelector=metadata.name=X
(or ==X) as a request for X, so resourceNames can allow it (tests/emulator/
test_emu_rbac_field_selector.py). The file is
re-read whenever its mtime/size change. Users added through the admin API live in a
second layer that the file never overwrites. The admin token bypasses authorization.
"""

import json
import os
import sys
import threading

ADMIN_NAME = "admin"
ADMIN_GROUPS = ["system:masters", "system:authenticated"]


class User:
    def __init__(self, name, groups, rules, admin=False):
        self.name = name
        self.groups = list(groups)
        self.rules = list(rules)
        self.admin = admin


def _matches(values, wanted):
    return "*" in values or wanted in values


def _resource_matches(rule_resources, resource, subresource):
    combined = f"{resource}/{subresource}" if subresource else resource
    for r in rule_resources:
        if r in ("*", combined):
            return True
        if subresource and r in (f"*/{subresource}", f"{resource}/*"):
            return True
    return False


def rule_allows(rule, verb, group, resource, subresource, namespace, name):
    if not _matches(rule.get("verbs", []), verb):
        return False
    if not _matches(rule.get("apiGroups", []), group):
        return False
    if not _resource_matches(rule.get("resources", []), resource, subresource):
        return False
    names = rule.get("resourceNames") or []
    if names and name not in names:
        return False
    namespaces = rule.get("namespaces")
    if namespaces is not None and not _matches(namespaces, namespace):
        return False
    return True


def _parse_users(doc):
    users = {}
    for token, spec in (doc.get("users") or {}).items():
        users[token] = User(spec.get("name", ""), spec.get("groups", []), spec.get("rules", []))
    return users


class Authenticator:
    def __init__(self, admin_token, policy_path=None):
        self._lock = threading.Lock()
        self._admin_token = admin_token
        self._policy_path = policy_path
        self._file_stamp = None
        self._file_users = {}
        self._api_users = {}

    def _reload_if_changed(self):
        if not self._policy_path:
            return
        try:
            st = os.stat(self._policy_path)
        except FileNotFoundError:
            self._file_users, self._file_stamp = {}, None
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._file_stamp:
            return
        try:
            with open(self._policy_path, encoding="utf-8") as f:
                self._file_users = _parse_users(json.load(f))
            self._file_stamp = stamp
        except (OSError, ValueError) as e:
            # Keep the last good policy; a half-written file is re-read on the next request.
            print(f"kubeemu: policy {self._policy_path}: {e}", file=sys.stderr)

    def authenticate(self, authorization):
        """The User for an Authorization header value, or None (-> 401)."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        if token == self._admin_token:
            return User(ADMIN_NAME, ADMIN_GROUPS, [], admin=True)
        with self._lock:
            self._reload_if_changed()
            return self._api_users.get(token) or self._file_users.get(token)

    @staticmethod
    def authorize(user, verb, group, resource, subresource, namespace, name):
        if user.admin:
            return True
        return any(rule_allows(r, verb, group, resource, subresource, namespace, name)
                   for r in user.rules)

    def set_policy(self, doc):
        with self._lock:
            self._api_users = _parse_users(doc)

    def add_user(self, token, name, groups, rules):
        with self._lock:
            self._api_users[token] = User(name, groups, rules)

    def policy(self):
        """The effective policy (file layer overlaid by the admin-API layer)."""
        with self._lock:
            self._reload_if_changed()
            users = {**self._file_users, **self._api_users}
            return {"users": {t: {"name": u.name, "groups": u.groups, "rules": u.rules}
                              for t, u in users.items()}}
