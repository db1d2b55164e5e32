"""The INFRA family model: trained on the field corpus's train part only, used where no rule spoke."""
from __future__ import annotations

import dataclasses
import importlib.util
import random
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from forkflow.testing import real_corpus
from forkflow.triage import infra_model
from forkflow.triage.classify import (Evidence, classify_failure, infra_family, model_read, rule_family,
                                      suggested_action)
from forkflow.triage.models import Classification, Failure, FailureKind, InfraFamily, Signature
from forkflow.triage.signature import SIGNATURE_VERSION, signature_of

ROOT = Path(__file__).resolve().parents[1]
# a real log of the train part (github.com/facebookresearch/xformers/issues/664): an extension
# built for another torch, which no rule names
XFORMERS = ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
            "    PyTorch 1.13.1+cu117 with CUDA 1107 (you have 1.12.1+cu113)\n"
            "    Python  3.10.9 (you have 3.10.9)")


def _trainer() -> object:
    spec = importlib.util.spec_from_file_location("train_infra_model", ROOT / "benchmarks" / "train_infra_model.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_shipped_model_is_the_one_the_train_part_gives() -> None:
    """Retrained from `load_field("train")` (never the held-aside part or a fresh batch), the model
    is the shipped one: the same failures, signature version and threshold, and nearly the same
    weights.  A new read batch or signature version needs `benchmarks/train_infra_model.py`."""
    shipped = infra_model.shipped()
    assert shipped is not None
    ids = [c.id for c in real_corpus.load_field("train")]
    assert shipped.train_digest == infra_model.train_ids_digest(ids), "run benchmarks/train_infra_model.py"
    assert shipped.signature_version == SIGNATURE_VERSION, "run benchmarks/train_infra_model.py"
    held = {c.id for c in real_corpus.load_field("heldout")} | {c.id for c in real_corpus.load_field("fresh")}
    assert held and infra_model.train_ids_digest(ids + sorted(held)[:1]) != shipped.train_digest
    fresh = _trainer().build()  # type: ignore[attr-defined]
    assert fresh.threshold == shipped.threshold and fresh.vocab == shipped.vocab
    assert np.allclose(fresh.weights, shipped.weights, atol=1e-3)
    figures = shipped.figures or {}
    for fam in infra_model.CALLS:  # cross-validated, its own calls were right nine times in ten
        assert figures[f"{fam}_model_right"] >= 0.9 * figures[f"{fam}_model_calls"] > 0


def test_an_environment_fault_no_rule_names_is_read_from_its_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped model's words, at a threshold low enough for this text (the shipped one is set
    by cross-validation and moves with the train part): the call, its reason and its action."""
    sig = signature_of(XFORMERS)
    assert rule_family(sig) is None
    shipped = infra_model.shipped()
    assert shipped is not None
    p_env = shipped.probabilities(infra_model.words(sig))[infra_model.CLASSES.index("environment")]
    assert p_env == max(shipped.probabilities(infra_model.words(sig)))  # environment is its best guess
    monkeypatch.setattr(infra_model, "shipped", lambda: dataclasses.replace(shipped, threshold=p_env - 0.01))
    assert infra_family(sig) is InfraFamily.ENVIRONMENT
    fam, p, top = model_read(sig)
    assert fam is InfraFamily.ENVIRONMENT and abs(p - p_env) < 1e-9 and top
    assert "read from its words" in suggested_action(sig) and "pin or rebuild" in suggested_action(sig)
    d = classify_failure(Failure("t", sig), Evidence())
    assert d.classification is Classification.INFRA and d.family is InfraFamily.ENVIRONMENT
    assert "read from its words" in d.reason
    # above the threshold only: a hair higher and the rules decide alone
    monkeypatch.setattr(infra_model, "shipped", lambda: dataclasses.replace(shipped, threshold=p_env + 0.01))
    assert infra_family(sig) is None and suggested_action(sig) == ""


def test_a_model_of_another_signature_version_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    sig = signature_of(XFORMERS)
    shipped = infra_model.shipped()
    assert shipped is not None
    old = dataclasses.replace(shipped, signature_version=SIGNATURE_VERSION - 1)
    monkeypatch.setattr(infra_model, "shipped", lambda: old)
    assert model_read(sig)[0] is None and infra_family(sig) is None
    assert classify_failure(Failure("t", sig), Evidence()).classification is Classification.NEW


def test_the_model_keeps_to_the_kinds_it_was_scored_on() -> None:
    """A device out of memory, a timeout or a compiler's error keeps its own rules: the model
    does not call it INFRA whatever its words."""
    for kind in (FailureKind.OOM, FailureKind.TIMEOUT, FailureKind.COMPILER_ERROR, FailureKind.CUDA_ERROR):
        sig = Signature(kind, f"{kind.value}: x", XFORMERS)
        assert model_read(sig) == (None, 0.0, ())
    assert model_read(signature_of("ModuleNotFoundError: No module named 'triton._C.libtriton'\n"))[0] is None


def test_a_model_file_that_does_not_fit_says_so() -> None:
    shipped = infra_model.shipped()
    assert shipped is not None
    again = infra_model.InfraModel.from_json(shipped.to_json())
    assert again.vocab == shipped.vocab and np.allclose(again.weights, shipped.weights, atol=1e-4)
    broken = shipped.to_json().replace('"classes": [', '"classes": ["other", ', 1)
    with pytest.raises(ValueError, match="classes"):
        infra_model.InfraModel.from_json(broken)


@pytest.mark.security
def test_the_model_reads_a_hostile_text_in_linear_time() -> None:
    """A stranger's log of megabytes of words, long words or digits costs the model a capped,
    linear read."""
    model = infra_model.shipped()
    assert model is not None
    r = random.Random(7)
    words = list(model.vocab)
    for text in (" ".join(r.choice(words) for _ in range(400_000)), "a" * 3_000_000, "9" * 3_000_000,
                 "_" * 1_000_000 + "x"):
        sig = Signature(FailureKind.GENERIC, "GENERIC: " + text[:5000], text)
        t0 = time.perf_counter()
        fam, p, top = model.read(sig)
        assert time.perf_counter() - t0 < 1.0
        assert 0.0 <= p <= 1.0 and len(top) <= 3 and all(len(w) <= 40 for w in top)
    assert len(infra_model.words(Signature(FailureKind.GENERIC, "", "ab " * 2_000_000))) <= 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
