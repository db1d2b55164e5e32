"""One test per general signature rule found on real CI logs (issue 14).  [pure]

Each rule is stated in general terms; the literal logs here are written for the test, in the
shape real CI prints them, not copied from the corpus.
"""
from __future__ import annotations

from forkflow.triage.signature import signature_of

DSA_FOOTER = ("CUDA kernel errors might be asynchronously reported at some other API call.\n"
              "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")


def test_trigger_words_in_a_footer_line_are_not_the_error() -> None:
    # the footer says `device-side assertions`: the error is the line above it
    log = "RuntimeError: CUDA error: misaligned address\n" + DSA_FOOTER
    assert signature_of(log).text == "CUDA_ERROR: CUDA runtime error: misaligned address"


def _ima(frame_file: str, func: str, short: bool = False) -> str:
    if short:
        frames = f"{frame_file}:12: in {func}\n    k.run(x)\n"
    else:
        frames = (f'Traceback (most recent call last):\n  File "/w/{frame_file}", line 12, in {func}\n'
                  "    k.run(x)\n")
    return frames + "RuntimeError: CUDA error: an illegal memory access was encountered\n" + DSA_FOOTER


def test_a_kernel_fault_is_told_apart_by_the_frame_that_launched_it() -> None:
    a, b = signature_of(_ima("attn.py", "forward")), signature_of(_ima("norm.py", "forward"))
    assert a.key != b.key
    assert a.text.endswith("@ attn.py:forward")
    # --tb=short prints the same frame differently: the same failure
    assert signature_of(_ima("attn.py", "forward", short=True)).key == a.key


def test_a_missing_kernel_image_is_the_machine_wherever_it_is_seen() -> None:
    def log(f: str) -> str:
        return (f'Traceback (most recent call last):\n  File "/w/{f}", line 3, in g\n    y = f(x)\n'
                "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert signature_of(log("a.py")).key == signature_of(log("b.py")).key
