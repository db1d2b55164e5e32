"""The structural resolver's rules on generated fixtures: each settles the shape it names, and
declines, saying why, where the merge is not unambiguous."""
from __future__ import annotations

import time
from pathlib import Path

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.resolvers.structural import StructuralResolver
from tests.test_conflicts import make_case


def _propose(case: ConflictCase) -> tuple[bytes | None, str]:
    r = StructuralResolver()
    p = r.propose(case)
    return (p.content, p.note) if p is not None else (None, r.last_reason)


# -- an insertion beside lines the other side rewrote ----------------------------------------

BESIDE_BASE = "def f(x):\n    y = g(x)\n    return y\n"


def test_insertion_beside_a_rewrite_goes_beside_it(tmp_path: Path) -> None:
    ours = "def f(x):\n    y = g(x)\n    log(x)\n    return y\n"
    theirs = "def f(x):\n    y = g(x, scale=2)\n    return y\n"
    case = make_case(tmp_path, BESIDE_BASE, ours, theirs)
    assert case.region_count == 1  # git's touching edits conflict
    content, note = _propose(case)
    assert content == b"def f(x):\n    y = g(x, scale=2)\n    log(x)\n    return y\n", note
    assert note == "an insertion beside lines the other side rewrote"
    assert guardrails.check(case, content).ok
    # the same with the sides swapped: upstream inserts beside the fork's rewrite
    content, _ = _propose(make_case(tmp_path, BESIDE_BASE, theirs, ours))
    assert content == b"def f(x):\n    y = g(x, scale=2)\n    log(x)\n    return y\n"


def test_insertion_beside_a_deletion_keeps_names_the_deleting_side_still_has(tmp_path: Path) -> None:
    tail = "\n\ndef g(cap):\n    if cap:\n        return 1\n"
    base = "def f(cap):\n    if cap >= 9:\n        lower(cap)\n    return cap\n" + tail
    ours = ("def f(cap):\n    if cap >= 9:\n        lower(cap)\n    if cap >= 10:\n        tune(cap)\n"
            "    return cap\n" + tail)
    theirs = "def f(cap):\n    return cap\n" + tail  # upstream deleted the block; `cap`, `if` are still in its file
    content, note = _propose(make_case(tmp_path, base, ours, theirs))
    assert content == ("def f(cap):\n    if cap >= 10:\n        tune(cap)\n    return cap\n" + tail).encode(), note
    # the same insertion using `lower`, which the deletion took out of upstream's whole file
    ours = ours.replace("tune(cap)", "lower(cap + 1)")
    content, why = _propose(make_case(tmp_path, base, ours, theirs))
    assert content is None and "uses lower, which the rewrite removed" in why


def test_insertion_using_a_word_the_rewrite_removed_declines(tmp_path: Path) -> None:
    base = "def f(x):\n    y = g(x)\n    return x\n"
    ours = "def f(x):\n    y = g(x)\n    log(y)\n    return x\n"
    theirs = "def f(x):\n    h(x)\n    return x\n"
    content, why = _propose(make_case(tmp_path, base, ours, theirs))
    assert content is None and "uses y, which the rewrite removed" in why


def test_insertion_using_a_call_form_the_rewrite_stopped_using_declines(tmp_path: Path) -> None:
    base = "void f() {\n  b.create<CondBrOp>(c, x, y);\n}\n"
    ours = "void f() {\n  b.create<BarrierOp>(c);\n  b.create<CondBrOp>(c, x, y);\n}\n"
    theirs = "void f() {\n  CondBrOp::create(b, loc, c, x, y);\n}\n"
    content, why = _propose(make_case(tmp_path, base, ours, theirs, path="f.cpp"))
    assert content is None and "calls .create<(, a form the rewrite stopped using" in why


def test_insertion_repeating_the_rewrites_lines_declines(tmp_path: Path) -> None:
    base = "a = 1\nb = 2\nc = 3\n"
    ours = "a = 1\nb = 2\nd = 4\nc = 3\n"
    theirs = "a = 1\nd = 4\nc = 3\n"  # upstream replaced b by d; the fork added d beside b
    content, why = _propose(make_case(tmp_path, base, ours, theirs))
    assert content is None and "repeats the rewrite's lines" in why


# -- an insertion that already holds the other side's ------------------------------------------

def test_insertion_that_holds_the_others_insertion_is_kept(tmp_path: Path) -> None:
    # the fork picked upstream's registration earlier and added its own after it
    base = "void reg(R &r) {\n  a(r);\n}\n"
    ours = "void reg(R &r) {\n  a(r);\n  llvm::inliner(r);\n  nvvm::inliner(r);\n  fork::dbg(r);\n}\n"
    theirs = "void reg(R &r) {\n  a(r);\n  llvm::inliner(r);\n  nvvm::inliner(r);\n}\n"
    case = make_case(tmp_path, base, ours, theirs, path="r.h")
    content, note = _propose(case)
    assert content == ours.encode() and note == "the fork's insertion already holds upstream's"
    assert guardrails.check(case, content).ok
    content, note = _propose(make_case(tmp_path, base, theirs, ours, path="r.h"))
    assert content == ours.encode() and note == "upstream's insertion already holds the fork's"


def test_include_lists_holding_the_others_include_decline(tmp_path: Path) -> None:
    # the fork's extra include may be one upstream's change makes unneeded: a person decides
    base = "#include \"a.h\"\n\nint x;\n"
    ours = "#include \"a.h\"\n#include \"gpu.h\"\n#include \"ws.h\"\n\nint x;\n"
    theirs = "#include \"a.h\"\n#include \"ws.h\"\n\nint x;\n"
    content, why = _propose(make_case(tmp_path, base, ours, theirs, path="w.cpp"))
    assert content is None and "overlapping lines" in why


# -- units named with their class and scope ----------------------------------------------------

def test_same_named_members_of_different_classes_are_different_units(tmp_path: Path) -> None:
    base = "#include \"d.h\"\n\nvoid init() {}\n"
    ours = base + "\nLogicalResult InitBarrierOp::verify() {\n  return success();\n}\n"
    theirs = base + "\nLogicalResult TDMCopyOp::verify() {\n  return check(getDesc());\n}\n"
    content, note = _propose(make_case(tmp_path, base, ours, theirs, path="d.cpp"))
    assert content is not None and "whole units" in note
    assert content.index(b"InitBarrierOp::verify") < content.index(b"TDMCopyOp::verify")
    # the same member of the same class, added by both sides, is a clash
    theirs = base + ("\nLogicalResult InitBarrierOp::verify() {\n  auto ty = getAlloc().getType();\n"
                     "  if (!ty.isInteger(64))\n    return emitOpError(\"i64\");\n  return check(ty);\n}\n")
    content, why = _propose(make_case(tmp_path, base, ours, theirs, path="d.cpp"))
    assert content is None and "InitBarrierOp::verify" in why
    # members inside class bodies carry their class too
    ours = base + "\nstruct ForkPass {\n  void reset() {\n    x = 0;\n  }\n};\n"
    theirs = base + ("\nclass UpPass : public Pass {\npublic:\n  int depth = 2;\n  void reset() {\n"
                     "    depth = compute(x, 1);\n    cache.clear();\n  }\n};\n")
    content, note = _propose(make_case(tmp_path, base, ours, theirs, path="d.h"))
    assert content is not None and b"struct ForkPass" in content and b"class UpPass" in content, note


def test_nested_kernels_of_different_test_functions_are_different_units(tmp_path: Path) -> None:
    base = "import triton\n\n\ndef test_a():\n    pass\n"
    test = ("\n\ndef {t}(device):\n    @triton.jit\n    def kernel(out_ptr):\n        tl.store(out_ptr, {v})\n\n"
            "    run(kernel, {v})\n")
    ours = base + test.format(t="test_fork", v=1)
    theirs = base + ("\n\ndef test_upstream(device, fresh_cache):\n    hooks = []\n\n    @triton.jit\n"
                     "    def kernel(x_ptr, n):\n        tl.store(x_ptr + n, n)\n\n    kernel.add_hook(hooks.append)\n"
                     "    assert len(hooks) == 0\n")
    case = make_case(tmp_path, base, ours, theirs, path="test_cache.py")
    content, note = _propose(case)
    assert content is not None and "whole units" in note, note
    assert content.count(b"def kernel") == 2 and guardrails.check(case, content).ok
    # one test function defined on both sides is still a clash
    content, why = _propose(make_case(tmp_path, base, ours, base + test.format(t="test_fork", v=3),
                                      path="test_cache.py"))
    assert content is None and ("test_fork" in why or "similar" in why)


def test_mlir_split_test_cases_may_reuse_a_function_name(tmp_path: Path) -> None:
    base = "// RUN: triton-opt %s -split-input-file | FileCheck %s\n\ntt.func @a() {\n  tt.return\n}\n"
    ours = base + ("\n// -----\n\n// CHECK-LABEL: @kernel\ntt.func @kernel(%arg0: i32) {\n"
                   "  // CHECK: arith.addi\n  %0 = arith.addi %arg0, %arg0 : i32\n  tt.return\n}\n")
    theirs = base + ("\n// -----\n\n#blocked = #ttg.blocked<{sizePerThread = [1]}>\n"
                     "module attributes {\"ttg.num-warps\" = 4 : i32} {\n  // CHECK-LABEL: @kernel\n"
                     "  tt.func @kernel(%p: !tt.ptr<f32>) {\n    // CHECK: tt.load\n"
                     "    %x = tt.load %p : !tt.ptr<f32>\n    tt.return\n  }\n}\n")
    content, note = _propose(make_case(tmp_path, base, ours, theirs, path="t.mlir"))
    assert content is not None and content.count(b"tt.func @kernel") == 2, note


# -- MLIR: lit's directives and `#` attribute aliases are code --------------------------------

def test_mlir_lit_directive_beside_a_rewritten_run_line(tmp_path: Path) -> None:
    base = "// RUN: triton-opt %s -tritongpu-pipeline | FileCheck %s\n\ntt.func @a() {\n  tt.return\n}\n"
    ours = base.replace("FileCheck %s\n", "FileCheck %s\n// XFAIL: *\n")
    theirs = base.replace("-tritongpu-pipeline", "-tritongpu-assign-latencies -tritongpu-pipeline")
    content, note = _propose(make_case(tmp_path, base, ours, theirs, path="p.mlir"))
    assert content == theirs.replace("FileCheck %s\n", "FileCheck %s\n// XFAIL: *\n").encode(), note
    # in C++ the same comment line is a comment: an insertion of comments only declines
    content, why = _propose(make_case(tmp_path, base, ours, theirs, path="p.cpp"))
    assert content is None and "comments only" in why


def test_mlir_attribute_alias_beside_a_rewritten_alias(tmp_path: Path) -> None:
    base = "#blocked = #ttg.blocked<{sizePerThread = [1]}>\nmodule {\n}\n"
    ours = "#blocked = #ttg.blocked<{sizePerThread = [1]}>\n#shared = #ttg.swizzled_shared<{vec = 1}>\nmodule {\n}\n"
    theirs = "#blocked = #ttg.blocked<{sizePerThread = [4]}>\nmodule {\n}\n"
    content, note = _propose(make_case(tmp_path, base, ours, theirs, path="a.mlir"))
    assert content == (b"#blocked = #ttg.blocked<{sizePerThread = [4]}>\n"
                       b"#shared = #ttg.swizzled_shared<{vec = 1}>\nmodule {\n}\n"), note


def test_mlir_expected_error_below_is_not_a_comment_about_its_neighbours(tmp_path: Path) -> None:
    base = "// RUN: triton-opt %s -split-input-file -verify-diagnostics\n\ntt.func @a() {\n  tt.return\n}\n"
    ours = base + ("\n// -----\n\ntt.func @bad_count(%b: !ttg.memdesc<1xi64>) {\n"
                   "  // expected-error @below {{count must be greater than or equal to 1}}\n"
                   "  ttng.arrive_barrier %b, 0 : !ttg.memdesc<1xi64>\n  tt.return\n}\n")
    theirs = base + ("\n// -----\n\ntt.func @bad_layout(%d: !tt.tensordesc<tensor<64xf16>>) {\n"
                     "  %m = ttg.local_alloc : () -> !ttg.memdesc<64xf16, #padded, #smem>\n"
                     "  // expected-error @below {{TDM store does not support padding}}\n"
                     "  amdg.tdm_store %d, %m : !ttg.memdesc<64xf16, #padded, #smem>\n  tt.return\n}\n")
    content, note = _propose(make_case(tmp_path, base, ours, theirs, path="invalid.mlir"))
    assert content is not None and content.index(b"@bad_count") < content.index(b"@bad_layout"), note
    # the same words in a C++ comment still refer to the lines around it
    cbase = "void a();\n"
    content, why = _propose(make_case(tmp_path, cbase, cbase + "// keep in sync with below\nvoid f();\n",
                                      cbase + "void g(int x);\n", path="k.h"))
    assert content is None and "refers to the lines around it" in why


def test_insertion_holding_the_rewrites_old_line_in_a_new_block_goes_beside_it(tmp_path: Path) -> None:
    # the fork's new block runs the pass manager again; upstream only named the first run
    base = "def make_llir(mod):\n    pm.run(mod)\n    return mod\n"
    ours = ("def make_llir(mod):\n    pm.run(mod)\n    if knobs.debug_info:\n        pm = ir.pass_manager(mod)\n"
            "        pm.run(mod)\n    return mod\n")
    theirs = "def make_llir(mod):\n    pm.run(mod, 'make_llir')\n    return mod\n"
    content, note = _propose(make_case(tmp_path, base, ours, theirs))
    assert content == ours.replace("pm.run(mod)\n    if", "pm.run(mod, 'make_llir')\n    if").encode(), note
    # an insertion repeating a line of the rewrite's new code is two versions of one change
    ours = "def make_llir(mod):\n    pm.run(mod)\n    pm.run(mod, 'make_llir')\n    log(mod)\n    return mod\n"
    content, why = _propose(make_case(tmp_path, base, ours, theirs))
    assert content is None and "repeats the rewrite's lines" in why


def test_mlir_units_with_attribute_aliases_in_signatures_are_whole(tmp_path: Path) -> None:
    base = "// RUN: triton-opt %s -split-input-file -verify-diagnostics\n"
    ours = base + ("\n// -----\n\n#shared = #ttg.nvmma_shared<{swizzlingByteWidth = 128}>\n#smem = #ttg.shared_memory\n"
                   "module {\n  tt.func @remote(%arg: !ttg.memdesc<1xi64, #shared, #smem, mutable>) {\n"
                   "    tt.return\n  }\n}\n")
    theirs = base + ("\n// -----\n\n#tmem = #ttng.tensor_memory_encoding<blockM = 128, colStride = 1>\n"
                     "#blocked = #ttg.blocked<{sizePerThread = [1, 128], threadsPerWarp = [32, 1]}>\n"
                     "module attributes {\"ttg.num-warps\" = 4 : i32} {\n"
                     "  tt.func @alloc(%t: !ttg.memdesc<128x128xf32, #tmem, #ttng.tensor_memory>) {\n"
                     "    %c = arith.constant dense<0.0> : tensor<128x128xf32, #blocked>\n"
                     "    // expected-error @below {{colStride must be 1 or 2}}\n"
                     "    ttng.tmem_store %c, %t : tensor<128x128xf32, #blocked>\n    tt.return\n  }\n}\n")
    content, note = _propose(make_case(tmp_path, base, ours, theirs, path="invalid.mlir"))
    assert content is not None and content.index(b"@remote") < content.index(b"@alloc"), note


# -- bad input, on the shapes these rules settle ----------------------------------------------

def test_fifty_thousand_lines_with_an_insertion_beside_a_deletion_every_200_lines(tmp_path: Path) -> None:
    # each region reads the deleting side's whole file for the names it still uses: once per file
    def block(i: int, ours: bool = False, theirs: bool = False) -> str:
        if theirs:
            return f"def f{i}(x):\n    return x\n\n"
        return f"def f{i}(x):\n    y = g{i}(x)\n" + ("    log(x)\n" if ours else "") + "    return x\n\n"
    base = "".join(block(i) for i in range(12_500))
    ours = "".join(block(i, ours=i % 50 == 0) for i in range(12_500))
    theirs = "".join(block(i, theirs=i % 50 == 0) for i in range(12_500))
    case = make_case(tmp_path, base, ours, theirs)
    assert base.count("\n") == 50_000 and case.region_count == 250
    content, note = _propose(case)
    expected = "".join(f"def f{i}(x):\n    log(x)\n    return x\n\n" if i % 50 == 0 else block(i)
                       for i in range(12_500))
    assert content == expected.encode() and note == "an insertion beside lines the other side rewrote"
    assert guardrails.check(case, content).ok


def test_crlf_on_one_side_declines_an_insertion_beside_a_rewrite(tmp_path: Path) -> None:
    ours = "def f(x):\r\n    y = g(x)\r\n    log(x)\r\n    return y\r\n"
    theirs = "def f(x):\n    y = g(x, scale=2)\n    return y\n"
    content, why = _propose(make_case(tmp_path, BESIDE_BASE, ours, theirs))
    assert content is None and "CRLF on one side only" in why


def test_very_long_lines_in_insertions_are_read_in_linear_time(tmp_path: Path) -> None:
    # untrusted input: lines of 20,000 words that are almost a qualified function head or a class
    # head once took minutes to name
    base = "#include \"a.h\"\n\nint x;\n"
    ours = base + "\n  " + "a::" * 20_000 + "f (y) {} ;\n"  # no function head: every split was tried
    theirs = base + "\nclass " + "A " * 20_000 + ";\n"
    case = make_case(tmp_path, base, ours, theirs, path="long.cpp")
    start = time.process_time()
    content, note = _propose(case)
    assert time.process_time() - start < 5
    assert content is None and note == "the merged file does not parse"  # named, then parsed: declined
