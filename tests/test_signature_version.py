"""SIGNATURE_VERSION moves with the rules: their output on fixed samples is pinned to it.

Stored signatures carry the version they were computed with and are computed again when it is
older (forkflow.triage.records), so a rule change without a bump would leave stores with keys
that no longer match.  When this test fails because the rules changed on purpose, bump
SIGNATURE_VERSION in forkflow/triage/signature.py and record the new output:

    python -m tests.test_signature_version --update
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from forkflow.triage.signature import SIGNATURE_VERSION, signature_of

SAMPLES = Path(__file__).parent / "data" / "signature_samples.json"


def outputs(samples: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    out = {}
    for sample in samples:
        sig = signature_of(sample["text"].encode("utf-8", "surrogateescape"))
        out[sample["id"]] = {"kind": sig.kind.value, "text": sig.text, "key": sig.key}
    return out


def test_rules_output_is_pinned_to_signature_version() -> None:
    doc = json.loads(SAMPLES.read_text(encoding="utf-8"))
    got = outputs(doc["samples"])
    changed = sorted(k for k, v in got.items() if doc["expected"].get(k) != v)
    if doc["version"] == SIGNATURE_VERSION:
        assert not changed, (
            f"the signature rules' output changed on {len(changed)} sample(s) ({', '.join(changed[:5])}) "
            f"but SIGNATURE_VERSION is still {SIGNATURE_VERSION}: bump it, then run "
            "`python -m tests.test_signature_version --update`")
    else:
        raise AssertionError(
            f"SIGNATURE_VERSION is {SIGNATURE_VERSION} but the samples record version {doc['version']}: "
            "run `python -m tests.test_signature_version --update`")


def test_samples_cover_every_surface() -> None:
    doc = json.loads(SAMPLES.read_text(encoding="utf-8"))
    kinds = {v["kind"] for v in doc["expected"].values()}
    assert len(doc["samples"]) >= 20
    assert {"EXCEPTION", "CRASH", "FILECHECK", "INFRA", "NO_OUTPUT"} <= kinds


def _update() -> None:
    doc = json.loads(SAMPLES.read_text(encoding="utf-8"))
    doc["version"] = SIGNATURE_VERSION
    doc["expected"] = outputs(doc["samples"])
    SAMPLES.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    _update()
