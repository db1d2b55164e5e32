"""Tune once, store the choice, reuse it; the harness's steady-state rule."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from forkflow.workloads.harness import is_steady
from forkflow.workloads.tuning import (
    Choice,
    TuneKey,
    TuneStore,
    choose,
    config_label,
    public_version,
    software_version,
    stored_or_tuned,
)

KEY = TuneKey("matmul", "8192x8192x8192", "bf16", "NVIDIA H200", software_version("2.11.0+cu130", "3.6.0"))
CANDS = [{"BLOCK_M": 128, "BLOCK_N": 256, "num_warps": 8}, {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4},
         {"BLOCK_M": 256, "BLOCK_N": 128, "num_warps": 8}]


def test_versions_keep_their_public_part() -> None:
    assert public_version("3.6.0+git1a2b3c") == "3.6.0"
    assert KEY.software == "torch 2.11.0, triton 3.6.0"
    assert KEY.text == "matmul | 8192x8192x8192 | bf16 | NVIDIA H200 | torch 2.11.0, triton 3.6.0"


def test_config_label_puts_tiles_first() -> None:
    assert config_label({"num_stages": 3, "BLOCK_K": 64, "BLOCK_M": 128, "extra": 1}) == \
        "BLOCK_M=128 BLOCK_K=64 num_stages=3 extra=1"


def test_choose_keeps_the_fastest_median_and_skips_configs_that_fail() -> None:
    times = {128: [1.0, 1.2], 64: [0.9, 0.95], 256: []}
    calls: list[int] = []

    def time_ms(c: Mapping[str, int]) -> float:
        calls.append(c["BLOCK_M"])
        if c["BLOCK_M"] == 256:
            raise RuntimeError("out of resources: shared memory")
        return times[c["BLOCK_M"]].pop(0)

    ch = choose(CANDS, time_ms)
    assert dict(ch.params)["BLOCK_M"] == 64
    assert calls == [128, 64, 256, 128, 64]  # alternating rounds; a failed config is not retried
    assert set(dict(ch.timings_ms)) == {config_label(CANDS[0]), config_label(CANDS[1])}
    with pytest.raises(RuntimeError, match="no candidate config ran"):
        choose(CANDS[2:], time_ms)


def test_a_stored_choice_is_reused_until_retune(tmp_path: Path) -> None:
    store = TuneStore(tmp_path / "t" / "tuning.json")
    assert store.get(KEY) is None
    seen: list[int] = []

    def time_ms(c: Mapping[str, int]) -> float:
        seen.append(1)
        return float(c["BLOCK_M"])

    first, src = stored_or_tuned(store, KEY, CANDS, time_ms)
    assert src == "tuned" and dict(first.params)["BLOCK_M"] == 64 and len(seen) == 6
    again, src2 = stored_or_tuned(TuneStore(store.path), KEY, CANDS, time_ms)
    assert src2 == "stored" and again == first and len(seen) == 6  # no timing at all
    other = TuneKey(KEY.kernel, KEY.shape, KEY.dtype, KEY.device, software_version("2.12.0", "3.7.0"))
    assert stored_or_tuned(store, other, CANDS, time_ms)[1] == "tuned"  # a release bump tunes again
    _, src3 = stored_or_tuned(store, KEY, CANDS[:1], time_ms, retune=True)
    assert src3 == "tuned" and dict(store.get(KEY).params)["BLOCK_M"] == 128  # type: ignore[union-attr]


def test_a_broken_store_says_how_to_recover(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="remove it to tune again"):
        TuneStore(path).get(KEY)
    with pytest.raises(ValueError):
        Choice.from_json({"params": {"BLOCK_M": "big"}})


def test_steady_needs_two_windows_that_agree() -> None:
    assert not is_steady([1.0] * 15, 0.002)
    assert is_steady([1.0] * 16, 0.002)
    assert not is_steady([1.0] * 8 + [1.01] * 8, 0.002)  # still moving by 1%
    assert is_steady([1.05, 1.03] + [1.0] * 16, 0.002)
