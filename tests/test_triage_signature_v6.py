"""Signature version 6: lines that point at the error above, pydantic's validation items, a
docker step behind a bracketed tag, and the INFRA families of package mismatches, missing tools
and refused downloads.  Each pattern is checked for linear time on hostile input."""
from __future__ import annotations

import pytest

from pathlib import Path

from hypothesis import given, settings, strategies as st

from forkflow.triage.classify import classify_failure, Evidence, infra_family, suggested_action
from forkflow.triage.models import Classification, Failure, InfraFamily
from forkflow.triage.signature import signature_of
from tests.hostile import read_quickly


def test_a_line_pointing_at_the_stack_trace_above_is_not_the_error() -> None:
    log = ("ERROR 02-17 20:51:49 core.py:210]   File \"/x/vllm/v1/attention/backends/flash_attn.py\", line 156, in __init__\n"
           "ERROR 02-17 20:51:49 core.py:210]     assert is_supported(self.version)\n"
           "ERROR 02-17 20:51:49 core.py:210] AssertionError\n"
           "CRITICAL 02-17 20:51:49 core_client.py:158] Got fatal signal from worker processes, shutting "
           "down. See stack trace above for root cause issue.\n")
    sig = signature_of(log)
    assert "fatal signal" not in sig.text
    assert "AssertionError" in sig.text


def test_a_pydantic_validation_item_is_keyed_by_its_message() -> None:
    def log(model: str) -> str:
        return (f"FAILED tests/test_init.py::test_init[{model}] - pydantic_core._pydantic_core.ValidationError: "
                "1 validation error for ModelConfig\n"
                f"  Value error, The checkpoint you are trying to load has model type `{model}` but Transformers "
                "does not recognize this architecture. This could be because of an issue with the checkpoint.\n")
    a, b = signature_of(log("minimax")), signature_of(log("granite"))
    assert "does not recognize this architecture" in a.text and a.key != b.key
    assert infra_family(a) is InfraFamily.ENVIRONMENT
    assert "pin the package versions" in suggested_action(a)


def test_a_docker_step_behind_a_bracketed_tag_is_looked_through() -> None:
    def log(tag: str, step: int) -> str:
        return (f"{tag} #{step} 28.67       downloading and extracting https://example.org/llvm.tar.gz ...\n"
                f"{tag} #{step} 28.67       error: HTTP Error 409: Public access is not permitted on this storage account.\n"
                f"{tag} #{step} 28.67       [end of output]\n")
    a, b = signature_of(log("[]", 186)), signature_of(log("[linux/arm64]", 12))
    assert a.key == b.key and "#" not in a.text
    d = classify_failure(Failure("t", a), Evidence())
    assert d.classification is Classification.INFRA and d.family is InfraFamily.MACHINE


def test_a_missing_tool_and_a_module_without_an_attribute_are_environment_faults() -> None:
    tool = signature_of("+ /opt/conda/bin/anaconda upload dist/x.tar.bz2\n/bin/anaconda: No such file or directory\n")
    assert infra_family(tool) is InfraFamily.ENVIRONMENT
    assert "install the missing tool" in suggested_action(tool)
    api = signature_of("Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
                       "    x = tl.float8e4\nAttributeError: module 'triton.language' has no attribute 'float8e4'\n")
    assert infra_family(api) is InfraFamily.ENVIRONMENT
    # a missing file that is not a program, and an attribute missing from an object, stay the code's
    data = signature_of("error: data/input.json: No such file or directory\n")
    obj = signature_of("Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
                       "    x.y\nAttributeError: 'Foo' object has no attribute 'y'\n")
    assert infra_family(data) is None and infra_family(obj) is None


@pytest.mark.security
def test_the_new_patterns_are_linear_on_hostile_lines() -> None:
    hostile = ("[" + " " * 200_000 + "] #1 ",
               "see " + "word " * 200_000,
               "Value error, " + "x" * 500_000,
               "[] " * 200_000 + "#1 2.3 error",
               "HTTP Error 40" * 100_000)
    read_quickly(hostile, 1.0, infra_family)


@pytest.mark.security
@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["[", "]", " ", "#1", " 2.3 ", "see ", "above", "Value error, ",
                                 "HTTP Error 409", ": No such file or directory", "\n", "x", "error: "]),
                max_size=400))
def test_fuzzed_lines_of_the_new_structures_always_get_a_signature(parts: list[str]) -> None:
    (sig,) = read_quickly(["".join(parts)], 1.0, infra_family)
    assert len(sig.text) <= 700


def test_the_fresh_batch_never_reaches_the_train_or_heldout_parts(tmp_path: Path) -> None:
    import json

    from forkflow.testing import real_corpus

    urls = [f"https://github.com/o/r/issues/{i}" for i in range(12)]
    rows = [{"id": f"e{i}", "source_url": u, "project": "other", "class": "code", "cause": f"c{i}",
             "text": "x", "split": real_corpus.field_split(u)} for i, u in enumerate(urls)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    # the fresh batch keeps the hash's split in some rows: the file, not the field, decides
    (tmp_path / real_corpus.FRESH).write_text("".join(json.dumps(r) + "\n" for r in rows[6:]))
    train = real_corpus.load_field("train", tmp_path)
    held = real_corpus.load_field("heldout", tmp_path)
    fresh = real_corpus.load_field("fresh", tmp_path)
    assert {c.id for c in fresh} == {f"e{i}" for i in range(6, 12)}
    assert {c.id for c in train + held} == {f"e{i}" for i in range(6)}


def test_a_batch_read_after_scoring_is_all_train_and_never_held_aside(tmp_path: Path) -> None:
    import json

    from forkflow.testing import real_corpus

    urls = [f"https://github.com/o/r/issues/{i}" for i in range(12)]
    rows = [{"id": f"e{i}", "source_url": u, "project": "other", "class": "code", "cause": f"c{i}",
             "text": "x", "split": "fresh"} for i, u in enumerate(urls)]
    assert any(real_corpus.field_split(u) == "heldout" for u in urls)
    (tmp_path / "read-2026-12.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:8]))
    (tmp_path / "fresh-b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[8:]))
    assert {c.id for c in real_corpus.load_field("train", tmp_path)} == {f"e{i}" for i in range(8)}
    assert real_corpus.load_field("heldout", tmp_path) == []
    assert {c.id for c in real_corpus.load_field("fresh", tmp_path)} == {f"e{i}" for i in range(8, 12)}
