#!/usr/bin/env python3
"""Independent reference for the witness formats of rcpt.

Written from the C2SP texts only (signed-note, tlog-checkpoint,
tlog-cosignature, tlog-witness, tlog-policy, tlog-proof) and RFC 6962 /
RFC 9162 section 2.1, never from the project's Rust sources. Where the texts
leave a choice open it follows rcpt's spec/witness.md, and says so at the
place ("spec/witness.md:").

Borrowed: Ed25519 from pyca/cryptography (OpenSSL), SHA-256 from hashlib.
Everything else is here. Every subcommand reads its inputs from files and
prints JSON on stdout; exit 2 on bad input to this tool itself.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives import serialization

EM_DASH = "\u2014"
MAX_NOTE_SIGS = 100  # rcpt's cap (DESIGN.md): more is a malformed note
MAX_PROOF_LINES = 63  # tlog-witness: "MUST NOT send more than 63"


class Refused(Exception):
    pass


def sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def b64d(s: str) -> bytes:
    """RFC 4648 section 4, padded, strict (no other alphabet, canonical)."""
    if not re.fullmatch(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?", s):
        raise Refused(f"not standard base64: {s[:40]!r}")
    raw = base64.b64decode(s, validate=True)
    if base64.b64encode(raw).decode() != s:
        raise Refused("non-canonical base64 (trailing bits)")
    return raw


def b64e(b: bytes) -> str:
    return base64.b64encode(b).decode()


def raw_pub(priv: Ed25519PrivateKey) -> bytes:
    return priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def ed_verify(pub: bytes, sig: bytes, msg: bytes) -> bool:
    if len(sig) != 64:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(pub).verify(sig, msg)
        return True
    except (InvalidSignature, ValueError):
        return False


# --- signed-note: key IDs and vkeys -------------------------------------------

def key_id(name: str, sig_type: int, pub: bytes) -> bytes:
    # signed-note: SHA-256(key name || 0x0A || signature type || public key)[:4]
    return sha256(name.encode() + b"\n" + bytes([sig_type]) + pub)[:4]


def check_name(name: str):
    if not name or "+" in name or any(c.isspace() for c in name):
        raise Refused(f"bad key name {name!r}")


def make_vkey(name: str, sig_type: int, pub: bytes) -> str:
    return f"{name}+{key_id(name, sig_type, pub).hex()}+{b64e(bytes([sig_type]) + pub)}"


def parse_vkey(text: str, want_type: int) -> tuple[str, bytes, bytes]:
    parts = text.split("+", 2)  # the base64 may hold '+'
    if len(parts) != 3:
        raise Refused("vkey needs name+id+key")
    name, h, k = parts
    check_name(name)
    if not re.fullmatch(r"[0-9a-f]{8}", h):
        raise Refused("vkey id is not 8 lowercase hex")
    raw = b64d(k)
    if len(raw) != 33:
        raise Refused("vkey key is not type byte + 32 bytes")
    if raw[0] != want_type:
        raise Refused(f"vkey type 0x{raw[0]:02x}, want 0x{want_type:02x}")
    pub = raw[1:]
    if key_id(name, want_type, pub) != bytes.fromhex(h):
        raise Refused("vkey id does not match")
    return name, bytes.fromhex(h), pub


# --- signed notes and checkpoints ---------------------------------------------

def parse_note(s: str):
    if len(s.encode()) > 16384:
        raise Refused("note too large")
    if not s.endswith("\n"):
        raise Refused("note does not end in newline")
    if any(ord(c) < 0x20 and c != "\n" for c in s):
        raise Refused("control character")
    i = s.rfind("\n\n")
    if i < 0:
        raise Refused("no blank line")
    text, block = s[: i + 1], s[i + 2 :]
    lines = block.split("\n")[:-1]
    if not lines:
        raise Refused("no signature lines")
    if len(lines) > MAX_NOTE_SIGS:
        raise Refused("too many signature lines")
    sigs = []
    for line in lines:
        if not line.startswith(EM_DASH + " "):
            raise Refused("bad signature line")
        parts = line[2:].split(" ")
        if len(parts) != 2:
            raise Refused("bad signature line")
        name, b = parts
        check_name(name)
        raw = b64d(b)
        if len(raw) < 5:
            raise Refused("short signature")
        sigs.append((name, raw[:4], raw[4:]))
    return text, sigs


def parse_checkpoint(text: str):
    lines = text.split("\n")
    if lines[-1] != "" or len(lines) < 4:
        raise Refused("checkpoint needs three lines")
    lines = lines[:-1]
    origin, size, root = lines[0], lines[1], lines[2]
    if not origin:
        raise Refused("empty origin")
    if not re.fullmatch(r"0|[1-9][0-9]*", size) or int(size) >= 2**64:
        raise Refused("bad tree size")
    r = b64d(root)
    if len(r) != 32:
        raise Refused("root not 32 bytes")
    if any(not x for x in lines[3:]):
        raise Refused("empty extension line")
    return origin, int(size), r


def note_log_check(text, sigs, logs) -> str:
    """signed-note: lines of unknown keys ignored; a known key's line must
    verify; 'pass' when one verified and none failed."""
    ok = bad = False
    for name, kid, sig in sigs:
        for lname, lid, pub in logs:
            if name == lname and kid == lid:
                if ed_verify(pub, sig, text.encode()):
                    ok = True
                else:
                    bad = True
    return "fail" if bad else ("pass" if ok else "none")


# --- cosignature/v1 -----------------------------------------------------------

def cosig_message(body: str, ts: int) -> bytes:
    # "cosignature/v1\ntime <ts>\n" + the note body
    return f"cosignature/v1\ntime {ts}\n".encode() + body.encode()


def cosign(priv: Ed25519PrivateKey, name: str, body: str, ts: int) -> str:
    pub = raw_pub(priv)
    sig = priv.sign(cosig_message(body, ts))
    raw = key_id(name, 0x04, pub) + ts.to_bytes(8, "big") + sig
    return f"{EM_DASH} {name} {b64e(raw)}\n"


def cosig_status(text, sigs, witness) -> dict:
    """One witness (name, id, pub) against a note: every line with its name
    and key ID must verify; its timestamp is the first line's."""
    name, kid, pub = witness
    status = {"status": "absent"}
    for n, k, payload in sigs:
        if n != name or k != kid:
            continue
        if len(payload) != 72:
            return {"status": "failed"}
        ts = int.from_bytes(payload[:8], "big")
        if ts > 2**63 - 1 or not ed_verify(pub, payload[8:], cosig_message(text, ts)):
            return {"status": "failed"}
        if status["status"] == "absent":
            status = {"status": "verified", "timestamp": ts}
    return status


# --- tlog-policy -------------------------------------------------------------

def parse_policy(data: bytes) -> dict:
    # Character set: 0x09, 0x0A, 0x20-0x7E, 0x80-0xFF.
    for b in data:
        if not (b in (0x09, 0x0A) or 0x20 <= b <= 0x7E or b >= 0x80):
            raise Refused(f"byte 0x{b:02x}")
    if len(data) > 256 * 1024:
        raise Refused("too large")  # spec/witness.md: MAX_POLICY_BYTES
    if data and not data.endswith(b"\n"):
        raise Refused("last line without newline")  # "each line is terminated"
    logs, witnesses, groups, names = [], [], [], {}
    member_used = set()
    quorum = None
    for raw_line in data.split(b"\n")[:-1] if data else []:
        items = [w for w in re.split(rb"[ \t]+", raw_line) if w]
        if not items or items[0].startswith(b"#"):
            continue
        kw, args = items[0], items[1:]
        if kw == b"log":
            if len(args) not in (1, 2):
                raise Refused("log arity")
            if len(logs) == 256:
                raise Refused("too many logs")
            lg = parse_vkey(args[0].decode(), 0x01)
            if any(l[2] == lg[2] for l in logs):
                raise Refused("duplicate log key")
            logs.append(lg)
        elif kw == b"witness":
            if len(args) not in (2, 3):
                raise Refused("witness arity")
            if len(witnesses) == 256:
                raise Refused("too many witnesses")
            name = args[0]
            if name == b"none" or name in names:
                raise Refused("duplicate name")
            w = parse_vkey(args[1].decode(), 0x04)
            if any(x[2] == w[2] for x in witnesses):
                raise Refused("duplicate witness key")
            names[name] = ("w", len(witnesses))
            witnesses.append(w)
        elif kw == b"group":
            if len(args) < 3:
                raise Refused("group arity")
            if len(groups) == 256:
                raise Refused("too many groups")
            name, k, members = args[0], args[1], args[2:]
            if name == b"none" or name in names:
                raise Refused("duplicate name")
            n = len(members)
            if k == b"all":
                k = n
            elif k == b"any":
                k = 1
            elif re.fullmatch(rb"[1-9][0-9]*", k) and int(k) <= n:  # spec/witness.md: no leading zero
                k = int(k)
            else:
                raise Refused("threshold")
            refs = []
            for m in members:
                if m == b"none" or m not in names:
                    raise Refused("member none or undefined")
                if m in member_used:  # "listed as a group member at most once"
                    raise Refused("member listed twice")
                member_used.add(m)
                refs.append(names[m])
            names[name] = ("g", len(groups))
            groups.append((k, refs))
        elif kw == b"quorum":
            if len(args) != 1:
                raise Refused("quorum arity")
            if quorum is not None:
                raise Refused("second quorum")
            if args[0] == b"none":
                quorum = ("none", 0)
            elif args[0] in names:
                quorum = names[args[0]]
            else:
                raise Refused("quorum undefined")
        else:
            raise Refused("unknown keyword")
    if quorum is None:
        raise Refused("no quorum")
    return {"logs": logs, "witnesses": witnesses, "groups": groups, "quorum": quorum}


def quorum_met(policy, cosigned: list[bool]) -> bool:
    memo = {}

    def sat(ref):
        kind, i = ref
        if kind == "none":
            return True
        if kind == "w":
            return cosigned[i]
        if ref not in memo:
            k, refs = policy["groups"][i]
            memo[ref] = sum(1 for r in refs if sat(r)) >= k
        return memo[ref]

    return sat(policy["quorum"])


def evaluate(policy, note_text: str) -> dict:
    text, sigs = parse_note(note_text)
    origin, _, _ = parse_checkpoint(text)
    logs = [l for l in policy["logs"] if l[0] == origin]
    log = "unknown-origin" if not logs else {"pass": "verified", "fail": "failed", "none": "not-signed"}[
        note_log_check(text, sigs, logs)]
    ws = [cosig_status(text, sigs, w) for w in policy["witnesses"]]
    met = quorum_met(policy, [w["status"] == "verified" for w in ws])
    return {"log": log, "witnesses": ws, "quorum_met": met}


# --- RFC 6962 / RFC 9162 section 2.1 ----------------------------------------

def node(l: bytes, r: bytes) -> bytes:
    return sha256(b"\x01" + l + r)


def verify_inclusion(index, size, leaf, path, root) -> bool:
    # RFC 9162 2.1.3.2
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node(p, r)
            while not (fn & 1) and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(first, second, path, first_hash, second_hash) -> bool:
    # RFC 9162 2.1.4.2, for 0 < first < second
    if not 0 < first < second or not path:
        return False
    if first & (first - 1) == 0:
        path = [first_hash] + path
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node(c, fr)
            sr = node(c, sr)
            while not (fn & 1) and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == first_hash and sr == second_hash and sn == 0


# --- tlog-witness add-checkpoint ---------------------------------------------

def decide(logs, state, body: bytes) -> int:
    """The status tlog-witness assigns; state is None or (size, root)."""
    try:
        s = body.decode()
        first, rest = s.split("\n", 1)
        m = re.fullmatch(r"old (0|[1-9][0-9]*)", first)
        if not m or int(m.group(1)) >= 2**64:
            return 400
        old = int(m.group(1))
        proof = []
        while True:
            if "\n" not in rest:
                return 400
            line, rest = rest.split("\n", 1)
            if line == "":
                break
            h = b64d(line)
            if len(h) != 32:
                return 400
            proof.append(h)
            if len(proof) > MAX_PROOF_LINES:
                return 400
        text, sigs = parse_note(rest)
        origin, size, root = parse_checkpoint(text)
    except (Refused, UnicodeDecodeError, ValueError, binascii.Error):
        return 400
    known = [l for l in logs if l[0] == origin]
    if not known:
        return 404
    if note_log_check(text, sigs, known) != "pass":
        return 403
    if old > size:
        return 400
    cur_size, cur_root = state if state else (0, sha256(b""))
    if old != cur_size:
        return 409
    if size == 0 and root != sha256(b""):
        return 422
    if old == 0:
        return 422 if proof else 200
    if old == size:
        return 200 if not proof and root == cur_root else 422
    return 200 if verify_consistency(old, size, proof, cur_root, root) else 422


# --- tlog-proof --------------------------------------------------------------

def parse_tlog_proof(s: str) -> dict:
    lines = s.split("\n")
    if lines[0] != "c2sp.org/tlog-proof@v1":
        raise Refused("header")
    i, extra = 1, None
    if lines[i].startswith("extra "):
        extra = b64d(lines[i][6:])
        if not extra:
            raise Refused("empty extra")  # spec/witness.md: omit the line instead
        i += 1
    m = re.fullmatch(r"index (0|[1-9][0-9]*)", lines[i])
    if not m:
        raise Refused("index")
    i += 1
    proof = []
    while lines[i] != "":
        h = b64d(lines[i])
        if len(h) != 32:
            raise Refused("hash")
        proof.append(h)
        i += 1
    checkpoint = "\n".join(lines[i + 1 :])
    return {"extra": extra, "index": int(m.group(1)), "proof": proof, "checkpoint": checkpoint}


# --- commands ----------------------------------------------------------------

def priv_from_seed(hexseed: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(hexseed))


def cmd_cosign(a):
    """cosign SEEDHEX NAME TIMESTAMP BODYFILE: vkey, key ID and line."""
    priv = priv_from_seed(a[0])
    body = open(a[3], encoding="utf-8").read()
    print(json.dumps({
        "vkey": make_vkey(a[1], 0x04, raw_pub(priv)),
        "key_id": key_id(a[1], 0x04, raw_pub(priv)).hex(),
        "line": cosign(priv, a[1], body, int(a[2])),
    }))


def cmd_check(a):
    """check NOTEFILE VKEY...: status of each witness vkey."""
    text, sigs = parse_note(open(a[0], encoding="utf-8").read())
    print(json.dumps([cosig_status(text, sigs, parse_vkey(v, 0x04)) for v in a[1:]]))


def cmd_policies(a):
    """policies CASES.json: [{"policy_b64": base64 of the file, "notes": [text]}] ->
    [{"ok": bool, "counts": [l, w, g], "evaluations": [...]}]."""
    out = []
    for case in json.load(open(a[0], encoding="utf-8")):
        try:
            p = parse_policy(base64.b64decode(case["policy_b64"]))
        except (Refused, UnicodeDecodeError, ValueError) as e:
            out.append({"ok": False, "why": str(e)})
            continue
        evals = []
        for n in case.get("notes", []):
            try:
                evals.append(evaluate(p, n))
            except Refused as e:
                evals.append({"error": str(e)})
        out.append({"ok": True, "counts": [len(p["logs"]), len(p["witnesses"]), len(p["groups"])],
                    "evaluations": evals})
    print(json.dumps(out))


def cmd_decide(a):
    """decide CASES.json: [{"logs": [vkey], "state": null|[size, b64root],
    "body": text}] -> [status]."""
    out = []
    for case in json.load(open(a[0], encoding="utf-8")):
        logs = [parse_vkey(v, 0x01) for v in case["logs"]]
        st = case["state"]
        state = (st[0], b64d(st[1])) if st else None
        out.append(decide(logs, state, case["body"].encode()))
    print(json.dumps(out))


def cmd_tlog_proof(a):
    """tlog-proof FILE LOGVKEY: parse; the log signature, the leaf hash of
    extra and the inclusion proof against the checkpoint root."""
    p = parse_tlog_proof(open(a[0], encoding="utf-8").read())
    text, sigs = parse_note(p["checkpoint"])
    origin, size, root = parse_checkpoint(text)
    log = parse_vkey(a[1], 0x01)
    leaf = sha256(b"\x00" + p["extra"]) if p["extra"] is not None else None
    print(json.dumps({
        "origin": origin, "size": size, "index": p["index"],
        "log_signature": note_log_check(text, sigs, [log]),
        "inclusion": leaf is not None and verify_inclusion(p["index"], size, leaf, p["proof"], root),
    }))


COMMANDS = {"cosign": cmd_cosign, "check": cmd_check, "policies": cmd_policies,
            "decide": cmd_decide, "tlog-proof": cmd_tlog_proof}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    COMMANDS[sys.argv[1]](sys.argv[2:])
