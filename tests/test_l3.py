"""L3: request, run, sign-off by a listed owner only, and the list."""
from __future__ import annotations

from pathlib import Path

from tests.test_tiers_support import PY, make_repo, suite_toml

BENCH = 'import json, sys\njson.dump({"metrics": [{"name": "fsdp.loss", "value": 1.25, "unit": "", "better": "lower"}]}, open(sys.argv[1], "w"))\n'


def test_l3_request_run_signoff_list(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    toml = suite_toml("fsdp", f"{PY} bench.py {{report}}", tier="L3", report="metrics",
                      owners=["training-oncall", "alice"]) + suite_toml("unit", "true")
    repo, sha = make_repo(tmp_path / "fork", toml, {"bench.py": BENCH})
    r = cli("l3", "request", "fsdp", "--rev", "HEAD", "--by", "bob", "--json", repo=repo)
    assert r.rc == 0, r.err
    rid = r.json()["request_id"]
    r = cli("l3", "signoff", str(rid), "--owner", "alice", "--verdict", "accept", repo=repo)
    assert r.rc == 1 and f"has no finished run to sign off; run: forkflow l3 run {rid}" in r.err
    r = cli("l3", "run", str(rid), "--json", repo=repo)
    assert r.rc == 0, r.out + r.err
    run_id = r.json()["run_id"]
    r = cli("l3", "signoff", str(rid), "--owner", "mallory", "--verdict", "accept", repo=repo)
    assert r.rc == 1 and "'mallory' is not an owner of suite 'fsdp' (owners: training-oncall, alice)" in r.err
    r = cli("l3", "signoff", str(rid), "--owner", "alice", "--verdict", "maybe", repo=repo)
    assert r.rc == 1 and "must be accept or reject" in r.err
    r = cli("l3", "signoff", str(rid), "--owner", "alice", "--verdict", "accept", "--note", "loss ok", repo=repo)
    assert r.rc == 0
    doc = cli("l3", "list", "--json", repo=repo).json()["requests"]
    assert len(doc) == 1 and doc[0]["state"] == "ACCEPTED" and doc[0]["rev"] == sha
    assert doc[0]["runs"][0]["run_id"] == run_id and doc[0]["runs"][0]["status"] == "PASS"
    assert [(x["owner"], x["verdict"], x["note"], x["run_id"]) for x in doc[0]["signoffs"]] == \
        [("alice", "accept", "loss ok", run_id)]
    assert "ACCEPTED" in cli("l3", "list", repo=repo).out


def test_l3_bad_requests(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    toml = suite_toml("fsdp", "true", tier="L3", report="metrics", owners=["alice"]) + suite_toml("unit", "true")
    repo, _ = make_repo(tmp_path / "fork", toml)
    assert "no suite named 'nope'" in cli("l3", "request", "nope", repo=repo).err
    assert "suite 'unit' is L1, not L3" in cli("l3", "request", "unit", repo=repo).err
    assert "--rev 'zzz' is not a commit" in cli("l3", "request", "fsdp", "--rev", "zzz", repo=repo).err
    assert "no L3 request 42" in cli("l3", "run", "42", repo=repo).err
    assert "no L3 requests yet" in cli("l3", "list", repo=repo).out
