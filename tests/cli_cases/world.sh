# The world every CLI case starts from (tests/cli_cases.rs runs this once,
# with `rcpt` on PATH, in an empty directory, and copies the result for
# each case file). Made only with the commands a user has.
set -euo pipefail
git() { command git -c user.name=ci -c user.email=ci@example.com -c init.defaultBranch=main "$@"; }

# A work tree the receipts are about.
git init -q .
echo 'serde 1.0.210' > Cargo.lock
git add Cargo.lock && git commit -q -m lock

# Keys: a gate (issuer), a log, a witness.
rcpt key generate --name gate.example/ci --out gate > /dev/null
rcpt key generate --name log.example/receipts --out logkey > /dev/null
rcpt key generate --name witness.example/w1 --out w1 --witness > /dev/null
rcpt trust new --issuer gate.vkey --log logkey.vkey -o trust.json

# Four admitted receipts for one change, fresh for this tree, in a log.
CHANGE=blake3:1111111111111111111111111111111111111111111111111111111111111111
READ_SET=$(rcpt receipt read-set --root . Cargo.lock refs/heads/main)
NOW=$(date +%s)
for n in 1 2 3 4; do
  cat > payload$n.json <<JSON
{"version": 1, "issuer": "gate.example/ci", "issued_at": $((NOW - n)), "substrate": "git",
 "change_id": "$CHANGE", "inverse_delta_id": null, "reversibility": null,
 "read_set": $READ_SET, "precondition": null,
 "policy_id": "blake3:4444444444444444444444444444444444444444444444444444444444444444",
 "verdict": {"admit": {"proof": "blake3:5555555555555555555555555555555555555555555555555555555555555555"}},
 "applied": false, "replay": {"class": "deterministic_replay"}}
JSON
  rcpt receipt issue --key gate.key -o receipt$n.json payload$n.json
done
# One denied receipt, not in the log.
sed 's/"verdict": {"admit": {"proof": "[^"]*"}}/"verdict": {"deny": {"reasons": ["license.gpl", "owner.unknown"]}}/' \
  payload1.json > payload-deny.json
rcpt receipt issue --key gate.key -o receipt-deny.json payload-deny.json
rcpt log init log --origin log.example/receipts --key logkey.key --trust trust.json > /dev/null
rcpt log append log receipt1.json receipt2.json receipt3.json receipt4.json > /dev/null
rcpt log checkpoint log > old.checkpoint
rcpt log append log receipt-deny.json > /dev/null
mkdir bundles
for n in 1 2 3 4; do rcpt log prove log --receipt receipt$n.json -o bundles/$n.json; done
rcpt log prove log --receipt receipt-deny.json -o bundle-deny.json
cp bundles/1.json bundle.json
