"""Wire encodings that must match Go byte for byte: base64 errors, timestamps, JSON.

The emulator decodes request bodies the way the apiserver's Go decoders do, so that a
client bug (unpadded base64, a MicroTime with 3 digits) fails here as it would in a
real cluster, with the same message.
"""

import datetime
import json
import re

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_MAP = {c: i for i, c in enumerate(_B64)}


class Base64Error(ValueError):
    def __init__(self, offset):
        super().__init__(f"illegal base64 data at input byte {offset}")
        self.offset = offset


def go_b64decode(s):
    """encoding/base64.StdEncoding.DecodeString, including its error offsets.

    A port of Go's decodeQuantum: '\\r' and '\\n' are skipped, padding is required.
    """
    src = s.encode("latin-1", "replace") if isinstance(s, str) else s
    out = bytearray()
    si, n = 0, len(src)
    while True:
        dbuf = [0, 0, 0, 0]
        dlen = 4
        j = 0
        while j < 4:
            if si == n:
                if j == 0:
                    return bytes(out)
                raise Base64Error(si - j)
            ch = chr(src[si])
            si += 1
            if ch in _B64_MAP:
                dbuf[j] = _B64_MAP[ch]
                j += 1
                continue
            if ch in "\r\n":
                continue
            if ch != "=":
                raise Base64Error(si - 1)
            # Padding: this quantum ends here.
            if j in (0, 1):
                raise Base64Error(si - 1)
            if j == 2:
                while si < n and chr(src[si]) in "\r\n":
                    si += 1
                if si == n:
                    raise Base64Error(n)
                if chr(src[si]) != "=":
                    raise Base64Error(si - 1)
                si += 1
            while si < n and chr(src[si]) in "\r\n":
                si += 1
            if si < n:
                raise Base64Error(si)
            dlen = j
            break
        val = dbuf[0] << 18 | dbuf[1] << 12 | dbuf[2] << 6 | dbuf[3]
        chunk = bytes([(val >> 16) & 0xFF, (val >> 8) & 0xFF, val & 0xFF])
        out += chunk[:dlen - 1]
        if dlen < 4:
            return bytes(out)


def b64encode(data):
    import base64
    return base64.b64encode(data).decode("ascii")


# --- timestamps ---------------------------------------------------------------------------

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_MICRO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})(Z|[+-]\d{2}:\d{2})$")


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def fmt_time(t):
    """metav1.Time: RFC 3339, UTC, second precision."""
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt_micro(t):
    """metav1.MicroTime: exactly six fractional digits."""
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _tz(s):
    if s in ("Z", "z"):
        return datetime.timezone.utc
    sign = 1 if s[0] == "+" else -1
    return datetime.timezone(sign * datetime.timedelta(hours=int(s[1:3]), minutes=int(s[4:6])))


def parse_time(s):
    """Parse a metav1.Time (time.RFC3339, any fraction); returns the normalised string."""
    m = _RFC3339.match(s)
    if not m:
        raise ValueError(f'parsing time "{s}" as "2006-01-02T15:04:05Z07:00": cannot parse '
                         f'"{s}" as "2006"')
    y, mo, d, h, mi, sec = (int(x) for x in m.groups()[:6])
    t = datetime.datetime(y, mo, d, h, mi, sec, tzinfo=_tz(m.group(8)))
    return fmt_time(t)


def parse_micro(s):
    """Parse a metav1.MicroTime with Go's fixed layout 2006-01-02T15:04:05.000000Z07:00."""
    m = _MICRO.match(s)
    if not m:
        tail = re.search(r"(\.\d*)?([Zz]|[+-]\d{2}:\d{2})?$", s)
        bad, want = (tail.group(0) or s), ".000000"
        if tail.group(1) and len(tail.group(1)) > 7:
            bad, want = tail.group(0)[7:], "Z07:00"
        raise ValueError(f'parsing time "{s}" as "2006-01-02T15:04:05.000000Z07:00": '
                         f'cannot parse "{bad}" as "{want}"')
    y, mo, d, h, mi, sec = (int(x) for x in m.groups()[:6])
    t = datetime.datetime(y, mo, d, h, mi, sec, int(m.group(7)), tzinfo=_tz(m.group(8)))
    return fmt_micro(t)


# --- JSON ---------------------------------------------------------------------------------

class DuplicateTracker:
    """object_pairs_hook that keeps the last value (as Go does) and records duplicates."""

    def __init__(self):
        self.duplicates = []

    def __call__(self, pairs):
        obj = {}
        for k, v in pairs:
            if k in obj:
                self.duplicates.append(k)
            obj[k] = v
        return obj


def loads(data):
    """Decode a JSON body; returns (value, duplicate_field_names)."""
    tracker = DuplicateTracker()
    value = json.loads(data, object_pairs_hook=tracker)
    return value, tracker.duplicates


def dumps(obj):
    """One compact JSON document on one line, like Go's json.Encoder (newline added by caller)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
