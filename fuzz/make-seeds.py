#!/usr/bin/env python3
"""Write the seed corpus fuzz/corpus/<target>/ from the frozen receipts,
the spec examples and the vector sets. Run from anywhere; rewrites only
the seed-* files, so inputs the fuzzer added stay. Small on purpose."""
import base64, glob, hashlib, json, os, re, struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FROZEN = os.path.join(ROOT, "fixtures/frozen-receipts")
BUNDLES = ["verdict-admit", "verdict-deny", "size-9-index-4", "size-1107-index-512",
           "signature-two-one-untrusted", "envelope-url-safe-base64", "checkpoint-grease",
           "inclusion-wrong-sibling", "noncanonical-bytewise-keys", "payload-version-2",
           "schema-unknown-field", "receipt-id-mismatch", "bundle-duplicate-key"]


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def cbor_head(major, n):
    if n < 24:
        return bytes([major << 5 | n])
    for ai, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | ai]) + struct.pack(fmt, n)


def cbor_text(s):
    b = s.encode()
    return cbor_head(3, len(b)) + b


def cbor_bytes(b):
    return cbor_head(2, len(b)) + b


def b64(s):
    """Standard or URL-safe base64, padded or not."""
    s = s.replace("-", "+").replace("_", "/").rstrip("=")
    return base64.b64decode(s + "=" * (-len(s) % 4))


def entry(env):
    """The log-entry DAG-CBOR of an envelope (keys in canonical order)."""
    sigs = b"".join(
        cbor_head(5, 2) + cbor_text("sig") + cbor_bytes(b64(s["sig"]))
        + cbor_text("keyid") + cbor_text(s.get("keyid") or "")
        for s in env["signatures"])
    return (cbor_head(5, 3) + cbor_text("payload") + cbor_bytes(b64(env["payload"]))
            + cbor_text("signatures") + cbor_head(4, len(env["signatures"])) + sigs
            + cbor_text("payload_type") + cbor_text(env["payloadType"]))


for name in BUNDLES:
    raw = read(os.path.join(FROZEN, "bundles", name + ".json"))
    put("bundle", name, raw)
    try:
        b = json.loads(raw)
    except ValueError:
        continue
    env = b["envelope"]
    put("dsse_envelope", name, json.dumps(env, separators=(",", ":")))
    put("dsse_envelope", name + ".entry", entry(env))
    payload = b64(env["payload"])
    put("dagcbor", name, payload)
    put("note_checkpoint", name, b["log"]["checkpoint"])

put("note_checkpoint", "frozen-log", read(os.path.join(FROZEN, "log/checkpoint")))
for p in sorted(glob.glob(os.path.join(ROOT, "tests/vectors/signed-note/*.checkpoint")))[:4]:
    put("note_checkpoint", os.path.basename(p), read(p))
put("note_checkpoint", "c2sp-example",
    read(os.path.join(ROOT, "tests/vectors/signed-note/c2sp-signed-note-example.note")))

for p in sorted(glob.glob(os.path.join(ROOT, "tests/vectors/dagcbor/fixtures/*/*.dag-cbor")))[:24]:
    put("dagcbor", os.path.basename(os.path.dirname(p)), read(p))

examples = []
for md in sorted(glob.glob(os.path.join(ROOT, "spec/*.md"))):
    for block in re.findall(r"```json\n(.*?)```", read(md).decode(), re.S):
        try:
            v = json.loads(block)
        except ValueError:
            continue
        if isinstance(v, dict) and "version" in v and "verdict" in v:
            examples.append(block)
for i, block in enumerate(examples[:3]):
    put("receipt_json", "spec-%d" % i, block)
if examples:
    v = json.loads(examples[0])
    v["verdict"] = {"deny": {"reasons": ["a", "b"]}}
    v["applied"] = False
    put("receipt_json", "deny", json.dumps(v))
    v["verdict"] = {"escalate": {"ticket": "T-1"}}
    put("receipt_json", "escalate", json.dumps(v))
    v["version"] = 2
    put("receipt_json", "version-2", json.dumps(v))

put("tiles", "hash-tile-partial-3", read(os.path.join(FROZEN, "log/tile/0/000.p/3")))
put("tiles", "hash-tile-partial-8", read(os.path.join(FROZEN, "log/tile/0/000.p/8")))
for w in ("1", "2", "3"):
    put("tiles", "entries-partial-" + w, read(os.path.join(FROZEN, "log/tile/entries/000.p", w)))

put("trust", "frozen", read(os.path.join(FROZEN, "trust.json")))
t = json.loads(read(os.path.join(FROZEN, "trust.json")))
put("trust", "issuers-only", json.dumps({"issuers": t["issuers"]}))
put("trust", "logs-only", json.dumps({"logs": t["logs"]}))

# merkle: mode byte 1 = real proof from a small tree (size byte, index byte,
# mutation byte, mutation operands); mode byte 0 = raw u64 fields and hashes.
for n, i, mut in ((1, 0, 0), (7, 3, 0), (8, 7, 3), (9, 8, 1), (70, 33, 4), (64, 63, 5)):
    put("merkle_inclusion", "real-%d-%d-%d" % (n, i, mut), bytes([1, n - 1, i, mut, 130, 5, 7]))
    put("merkle_consistency", "real-%d-%d-%d" % (n, i, mut), bytes([1, n - 1, i, mut, 130, 5, 7]))
h = hashlib.sha256(b"seed").digest()
put("merkle_inclusion", "raw-max", b"\0" + struct.pack(">QQ", 2**64 - 2, 2**64 - 1) + h * 66)
put("merkle_inclusion", "raw-small", b"\0" + struct.pack(">QQ", 3, 5) + h * 5)
put("merkle_consistency", "raw-max", b"\0" + struct.pack(">QQ", 2**63 + 1, 2**64 - 1) + b"\1" + h * 66)
put("merkle_consistency", "raw-small", b"\0" + struct.pack(">QQ", 3, 7) + b"\1" + h * 5)

# Witnesses: the witnessed series' policies, cosigned checkpoints, an
# add-checkpoint body built from one, and its tlog-proofs.
WITNESSED = os.path.join(FROZEN, "witnessed")
for name in ("witnesses.policy", "other-log.policy"):
    put("tlog_policy", name, read(os.path.join(WITNESSED, name)))
put("tlog_policy", "quorum-none", "quorum none\n")
put("tlog_policy", "undefined-quorum", "quorum nobody\n")
put("tlog_policy", "cr-line", "quorum none\r\n")
policy = read(os.path.join(WITNESSED, "witnesses.policy")).decode()
put("tlog_policy", "nested-groups", policy.replace(
    "group witnesses 2 w1 w2 w3\nquorum witnesses\n",
    "group a any w1 w2\ngroup b all a w3\nquorum b\n"))
for stem in ("quorum-met", "bad-cosignature", "cosignature-other-checkpoint",
             "cosignature-short", "grease", "unknown-cosigner-ignored", "line-cap-met"):
    note = json.loads(read(os.path.join(WITNESSED, "bundles", stem + ".json")))["log"]["checkpoint"]
    put("cosignature", stem, note)
    if stem == "quorum-met":
        put("cosignature", "body", note.split("\n\n")[0] + "\n")
        put("add_checkpoint", "old-0", "old 0\n\n" + note)
        put("add_checkpoint", "old-3-proof", "old 3\n" + base64.b64encode(h).decode() + "\n\n" + note)
        put("add_checkpoint", "no-blank-line", "old 3\n" + note)
for line in policy.splitlines():
    if line.startswith("witness w1 "):
        put("cosignature", "vkey-w1", line.split(" ")[2])
for stem in ("tlog-proof-quorum-met", "tlog-proof-quorum-not-met"):
    put("tlog_proof", stem, read(os.path.join(WITNESSED, "bundles", stem + ".tlog-proof")))
proof = read(os.path.join(WITNESSED, "bundles", "tlog-proof-quorum-met.tlog-proof"))
put("tlog_proof", "no-extra", b"\n".join(l for l in proof.split(b"\n") if not l.startswith(b"extra ")))
put("tlog_proof", "version-2", proof.replace(b"tlog-proof@v1", b"tlog-proof@v2", 1))
