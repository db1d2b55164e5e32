"""Pure planning: symbols from real parsers, overlaps, and routing into chains and bundles."""
from __future__ import annotations

from dataclasses import replace

from forkflow.models import Sha
from forkflow.planning.lines import DepKind, Dependency
from forkflow.planning.model import ChainSpec, PendingCommit, Touch, UnitKind
from forkflow.planning.route import LOW_RISK, RoutingRules, path_matches, route
from forkflow.planning.symbols import definitions, header_symbol, line_owners, parses_cleanly, symbols_at

PY = b'''import os


def top():
    return 1


class K:
    def a(self):
        return 2

    @staticmethod
    def b():
        return 3
'''

CPP = b'''#include <vector>
namespace tt {
class Layout {
 public:
  int rank() const { return 2; }
};
int Layout::size() const {
  return 4;
}
}  // namespace tt
template <typename T> T twice(T x) { return x + x; }
'''

TD = b'''include "mlir/IR/OpBase.td"

def TT_LoadOp : TT_Op<"load"> {
  let summary = "load";
}

class TT_Op<string m> : Op<TT_Dialect, m>;
'''

MLIR = b'''module {
  tt.func @kernel(%arg0: i32) {
    tt.return
  }
  func.func private @helper() {
    return
  }
}
'''


def sha(n: int) -> Sha:
    return Sha(f"{n:040x}")


def test_planning_python_definitions_are_qualified() -> None:
    defs = {d.name: (d.start, d.end) for d in definitions("m.py", PY) or []}
    assert defs["top"] == (4, 5)
    assert defs["K"] == (8, 14)
    assert defs["K.a"] == (9, 10)
    assert defs["K.b"] == (12, 14)  # the decorator belongs to the method
    owners = line_owners(definitions("m.py", PY) or [])
    assert symbols_at("m.py", owners, [10, 14, 1]) == {"m.py::K.a", "m.py::K.b", "m.py::<top-level>"}


def test_planning_cpp_definitions_with_namespaces_and_classes() -> None:
    names = {d.name for d in definitions("lib/a.cpp", CPP) or []}
    assert {"tt::Layout", "tt::Layout::rank", "tt::Layout::size", "twice"} <= names


def test_planning_tablegen_records_and_mlir_ops_are_top_level_names() -> None:
    td = {d.name: (d.start, d.end) for d in definitions("Ops.td", TD) or []}
    assert td["TT_LoadOp"] == (3, 6)
    assert "TT_Op" in td
    mlir = {d.name for d in definitions("t.mlir", MLIR) or []}
    assert {"kernel", "helper"} <= mlir


def test_planning_unknown_languages_and_binaries_have_no_parser() -> None:
    assert definitions("CMakeLists.txt", b"project(x)\n") is None
    assert definitions("a.py", b"\0\1\2") is None
    assert header_symbol("x.txt", "@@ -1,2 +1,2 @@ section one") == "x.txt::section one"
    assert header_symbol("x.txt", "@@ -1 +1 @@") == "x.txt::<top-level>"


def test_planning_parses_cleanly() -> None:
    assert parses_cleanly("a.py", b"def f():\n    return 1\n") is True
    assert parses_cleanly("a.py", b"def f(:\n") is False
    assert parses_cleanly("a.cpp", b"int f() { return 1; }\n") is True
    assert parses_cleanly("a.cpp", b"int f( { return 1; }\n") is False
    assert parses_cleanly("a.txt", b"anything") is None


def test_planning_overlap_is_symbol_level_where_both_are_parsed() -> None:
    a = Touch(frozenset({"k.py"}), frozenset({"k.py::f"}), frozenset({"k.py"}))
    b = Touch(frozenset({"k.py"}), frozenset({"k.py::g"}), frozenset({"k.py"}))
    c = Touch(frozenset({"k.py"}), frozenset({"k.py::g"}), frozenset({"k.py"}))
    unparsed = Touch(frozenset({"k.py"}))
    assert a.overlap(b) is None
    assert b.overlap(c) == "symbol k.py::g"
    assert a.overlap(unparsed) == "file k.py"
    u = a.union(unparsed)
    assert "k.py" not in u.parsed  # once any side is file-level, the union is too


def test_planning_path_globs() -> None:
    assert path_matches("lib/Dialect/TritonGPU/IR/Ops.cpp", "lib/Dialect/**")
    assert path_matches("cmake/llvm-hash.txt", "cmake/*.txt")
    assert not path_matches("lib/Conversion/x.cpp", "lib/Dialect/**")


def _c(n: int, files: dict[str, set[str]] | None = None, reverts: int | None = None,
       deferred: str | None = None) -> PendingCommit:
    files = files or {f"f{n}.py": {f"f{n}.py::x"}}
    t = Touch(frozenset(files), frozenset(s for v in files.values() for s in v), frozenset(files))
    return PendingCommit(sha(n), f"commit {n}", t, pr=n, reverts=sha(reverts) if reverts else None,
                         deferred_chain=deferred)


def test_planning_route_every_commit_once_with_a_reason() -> None:
    commits = [_c(i) for i in range(1, 8)]
    units = route(commits, RoutingRules(max_bundle=3))
    assert [u.kind for u in units] == [UnitKind.BUNDLE] * 3
    assert [len(u.commits) for u in units] == [3, 3, 1]
    assert [s for u in units for s in u.commits] == [c.sha for c in commits]
    assert all(u.reasons[s] == LOW_RISK for u in units for s in u.commits)


def test_planning_route_declared_chain_by_path_and_symbol() -> None:
    chains = (ChainSpec("ws", paths=("lib/WS/**",), owner="@ws"), ChainSpec("api", symbols=("scale",)))
    commits = [_c(1, {"lib/WS/a.cpp": set()}), _c(2), _c(3, {"ops.py": {"ops.py::scale"}})]
    units = route(commits, RoutingRules(chains=chains))
    by = {u.name: u for u in units}
    assert by["ws"].commits == (sha(1),) and by["ws"].owner == "@ws"
    assert "declared in chain ws" in by["ws"].reasons[sha(1)]
    assert by["api"].commits == (sha(3),)
    assert "symbol ops.py::scale" in by["api"].reasons[sha(3)]
    assert [u.kind for u in units] == [UnitKind.CHAIN, UnitKind.BUNDLE, UnitKind.CHAIN]  # upstream order


def test_planning_route_fork_overlap_is_a_unit_of_its_own_and_pulls_nothing() -> None:
    commits = [
        _c(1),
        replace(_c(2), fork_overlap="k.py:10-12"),  # meets the fork's lines: a unit of its own
        _c(3),  # independent: stays in the open bundle
        replace(_c(4), deps=(Dependency(sha(2), DepKind.LINES, "k.py:11"),)),  # after the fork unit: a new bundle
        _c(5),
    ]
    units = route(commits, RoutingRules())
    assert [(u.kind, u.commits) for u in units] == [
        (UnitKind.BUNDLE, (sha(1), sha(3))),
        (UnitKind.BUNDLE, (sha(2),)),
        (UnitKind.BUNDLE, (sha(4), sha(5))),
    ]
    assert units[1].name == f"fork-{sha(2)[:10]}"
    assert units[1].reasons[sha(2)] == "meets the fork's own lines: k.py:10-12"


def test_planning_route_only_dependents_join_a_conflict() -> None:
    dep = Dependency(sha(1), DepKind.LINES, "a.py:3-4")
    commits = [_c(1), replace(_c(2), deps=(dep,)), _c(3), replace(_c(4), deps=(Dependency(sha(2), DepKind.SYMBOL, "f (a.py)"),))]
    waiting = {sha(2): dep, sha(4): commits[3].deps[0]}
    units = route(commits, RoutingRules(), conflicting={sha(1): "a.py"}, waiting=waiting)
    chain = units[0]
    assert chain.name == f"resolve-{sha(1)[:10]}" and chain.commits == (sha(1), sha(2), sha(4))
    assert chain.reasons[sha(2)] == f"waits for {sha(1)[:12]} (lines a.py:3-4), which is in chain {chain.name}"
    assert units[1].commits == (sha(3),) and units[1].kind is UnitKind.BUNDLE


def test_planning_route_conflicts_pins_and_earlier_deferrals() -> None:
    commits = [_c(1), _c(2, {"cmake/llvm-hash.txt": set()}), _c(3, deferred="fork:k.py"), _c(4)]
    units = route(commits, RoutingRules(pin_files=("cmake/llvm-hash.txt",)), conflicting={sha(4): "a.py"})
    by = {u.name: u for u in units}
    assert by["pin:cmake/llvm-hash.txt"].commits == (sha(2),)
    assert by["fork:k.py"].reasons[sha(3)] == "deferred earlier in chain fork:k.py"
    resolve = by[f"resolve-{sha(4)[:10]}"]
    assert resolve.needs_resolution and "conflicts when picked: a.py" in resolve.reasons[sha(4)]
