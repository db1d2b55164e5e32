"""The agreement labellings (tests/data/agreement/) label exactly the failures of their batch."""
from __future__ import annotations

import json

import pytest

from forkflow.testing import real_corpus
from forkflow.triage.group import adjusted_rand_index

FOLDER = real_corpus.FIELD.parent / "agreement"
BATCHES = ("read-2026-12b", "read-2026-12g")


def _batch(batch: str) -> dict[str, real_corpus.FieldCase]:
    return {c.id: c for c in real_corpus.load_field("train") if c.batch.startswith(batch + "-")}


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("kind, field", [("second-labeller", "cause"), ("text-only", "group")])
def test_an_agreement_file_labels_its_whole_batch_once(batch: str, kind: str, field: str) -> None:
    cases = _batch(batch)
    rows = [json.loads(line) for line in (FOLDER / f"{batch}.{kind}.jsonl").open(encoding="utf-8")]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) and set(ids) == set(cases), "one label per failure of the batch"
    labels = {r["id"]: str(r[field]) for r in rows}
    assert all(v.strip() for v in labels.values())
    # an independent labelling: it agrees with the labels, but is not a copy of them
    ari = adjusted_rand_index([cases[i].cause for i in ids], [labels[i] for i in ids])
    assert 0.5 < ari < 1.0


@pytest.mark.parametrize("batch", BATCHES)
def test_the_class_file_gives_each_failure_of_its_batch_a_class(batch: str) -> None:
    rows = [json.loads(line) for line in (FOLDER / f"{batch}.text-only-class.jsonl").open(encoding="utf-8")]
    assert sorted(r["id"] for r in rows) == sorted(_batch(batch))
    assert {r["class"] for r in rows} <= set(real_corpus.FIELD_CLASSES)
