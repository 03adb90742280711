#!/usr/bin/env python3
"""Reference implementation of eskv's scheme-2 audit value hash (docs/audit.md, "Hashes").

usage: audit-value-hash.py HEX_AUDIT_KEY ENTRY_KEY JSON_VALUE
prints the value's scheme-2 canonical form, then its hash (the after_hash of the row).
Standard library only; audit/canonical_test.go checks it against the Go implementation.
Values with duplicate member names have no canonical form (they hash as their bytes, see
docs/audit.md); Python's json module would keep the last member, so do not use this for them.
"""
import decimal
import hashlib
import hmac
import json
import sys


def canon(v):
    # v: the value as parsed by json.loads(text, parse_float=N, parse_int=N)
    if isinstance(v, N):
        return v.canon()
    if v is None: return "null"
    if v is True: return "true"
    if v is False: return "false"
    if isinstance(v, str): return string(v)
    if isinstance(v, list): return "[" + ",".join(canon(x) for x in v) + "]"
    items = sorted(v.items(), key=lambda kv: kv[0].encode("utf-16-be", "surrogatepass"))
    return "{" + ",".join(string(k) + ":" + canon(x) for k, x in items) + "}"

def string(s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch in '"\\': out.append("\\" + ch)
        elif ch in "\b\t\n\f\r": out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[ch])
        elif c < 0x20 or 0xD800 <= c < 0xE000: out.append("\\u%04x" % c)
        else: out.append(ch)
    return "".join(out) + '"'

class N:
    """A JSON number kept exactly: sign, digits d and exponent n with value 0.d × 10^n."""
    def __init__(self, text):
        self.neg = text.startswith("-")
        sign, digits, exp = decimal.Decimal(text).as_tuple()
        d = "".join(map(str, digits)).lstrip("0")
        self.n = len(d) + exp
        self.d = d.rstrip("0")
    def canon(self):
        d, n, k = self.d, self.n, len(self.d)
        s = "-" if self.neg else ""
        if not d: return s + "0"
        if k <= n <= 21: return s + d + "0" * (n - k)
        if 0 < n <= 21: return s + d[:n] + "." + d[n:]
        if -6 < n <= 0: return s + "0." + "0" * -n + d
        return s + d[0] + ("." + d[1:] if k > 1 else "") + "e" + ("+" if n - 1 >= 0 else "-") + str(abs(n - 1))

def value_input(key, text):
    c = canon(json.loads(text, parse_float=N, parse_int=N)).encode("utf-8", "surrogatepass")
    k = key.encode()
    return b"eskv-audit-value/2\n" + str(len(k)).encode() + b":" + k + c

if __name__ == "__main__":
    secret, key, text = bytes.fromhex(sys.argv[1]), sys.argv[2], sys.argv[3]
    msg = value_input(key, text)
    print(msg[msg.index(b":") + 1 + len(key.encode()):].decode("utf-8", "surrogatepass"))  # the canonical form
    print(hmac.new(secret, msg, hashlib.sha256).hexdigest())
