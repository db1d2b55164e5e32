"""The agreement labellings (tests/data/agreement/) label exactly the failures of their batch."""
from __future__ import annotations

import json

import pytest

from forkflow.testing import real_corpus
from forkflow.triage.group import adjusted_rand_index

FOLDER = real_corpus.FIELD.parent / "agreement"


@pytest.mark.parametrize("name, field", [("read-2026-12b.second-labeller.jsonl", "cause"),
                                         ("read-2026-12b.text-only.jsonl", "group")])
def test_an_agreement_file_labels_its_whole_batch_once(name: str, field: str) -> None:
    batch = {c.id: c.cause for c in real_corpus.load_field("train") if c.batch.startswith("read-2026-12b-")}
    rows = [json.loads(line) for line in (FOLDER / name).open(encoding="utf-8")]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) and set(ids) == set(batch), "one label per failure of the batch"
    labels = {r["id"]: str(r[field]) for r in rows}
    assert all(v.strip() for v in labels.values())
    # an independent labelling: it agrees with the labels, but is not a copy of them
    ari = adjusted_rand_index([batch[i] for i in ids], [labels[i] for i in ids])
    assert 0.5 < ari < 1.0


def test_the_class_file_gives_each_failure_of_its_batch_a_class() -> None:
    batch = {c.id for c in real_corpus.load_field("train") if c.batch.startswith("read-2026-12b-")}
    rows = [json.loads(line) for line in (FOLDER / "read-2026-12b.text-only-class.jsonl").open(encoding="utf-8")]
    assert sorted(r["id"] for r in rows) == sorted(batch)
    assert {r["class"] for r in rows} <= set(real_corpus.FIELD_CLASSES)
