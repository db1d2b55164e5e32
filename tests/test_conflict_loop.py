"""A conflict is worked in minutes: `conflicts next` shows the oldest one's regions three ways,
`conflicts edit` writes the marked file and opens $EDITOR, `conflicts resolve` takes it back
through the guardrails, and the unit it names lands."""
from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from forkflow.conflicts import regions
from forkflow.conflicts.records import ConflictInfo
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder

FAR_UP, FAR_FORK = "    return 9090  # upstream, far away\n", "    return 555  # fork, far away\n"
# the editor: replaces every region of the file it is given (its last argument) with FIX's text
FIXER = r'''
import pathlib, re, sys
p = pathlib.Path(sys.argv[-1])
fix = pathlib.Path(__file__).with_name("fix.txt").read_text()
p.write_text(re.sub(r"<<<<<<< fork\n.*?>>>>>>> upstream\n", lambda m: fix, p.read_text(), flags=re.S))
'''
FIX = "    return 5500  # fork + upstream\n"


def _big(changes: dict[int, str]) -> str:
    """big.py: 100 two-line functions; `changes` replaces the body line of f<i>."""
    return "".join(f"def f{i}():\n" + changes.get(i, f"    return {i}\n") for i in range(100))


def long_fork(cli, builder: ForkBuilder, upstream_line: str = "    return 500\n",  # type: ignore[no-untyped-def]
              extra_toml: str = "") -> Path:
    """A fork of a 200-line file whose upstream commit #10 changes f50, as the fork did (a
    conflict), and f90 far away; the fork also changed f5 far away."""
    builder.upstream_commit({"big.py": _big({})}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"big.py": _big({5: FAR_FORK, 50: "    return 5000  # fork\n"})}, "[fork] f50")
    builder.upstream_commit({"big.py": _big({50: upstream_line, 90: FAR_UP})}, "Tune f50 (#10)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n' + extra_toml)
    assert cli("ingest", "--land", repo=fork).rc == 4  # the conflict waits on a person
    return fork


def _editor(tmp_path: Path, fix: str = FIX) -> str:
    script = tmp_path / "editor" / "fixer.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(FIXER)
    (script.parent / "fix.txt").write_text(fix)
    return f"{sys.executable} {script}"


def _one_line_error(r) -> None:  # type: ignore[no-untyped-def]
    assert r.rc == 1 and len(r.err.strip().splitlines()) == 1, (r.rc, r.err)


# -- the regions, pure ---------------------------------------------------------------------
MARKED = ("a\nb\nc\nd\n<<<<<<< fork\nmine\n||||||| base\nold\n=======\ntheirs\n>>>>>>> upstream\n"
          "e\nf\n<<<<<<< fork\nm2\n||||||| base\no2\n=======\nt2\n>>>>>>> upstream\n"
          + "".join(f"x{i}\n" for i in range(20)) + "<<<<<<< fork\nm3\n||||||| base\n=======\nt3\n>>>>>>> upstream\nz\n")


def test_regions_excerpts_number_lines_and_join_regions_whose_context_touches() -> None:
    ex = regions.excerpts(MARKED, context=2)
    assert [[s.index for s in e.spans] for e in ex] == [[1, 2], [3]]
    first = ex[0]
    assert (first.first, first.last) == (3, 22) and first.lines[0].text == "c"
    assert [ln.kind for ln in first.lines[2:9]] == ["open", "ours", "base-marker", "base", "separator", "theirs", "close"]
    assert ex[1].lines[-1] == regions.Line(len(MARKED.splitlines()), "context", "z")
    assert regions.excerpts("a\n<<<<<<< fork\nnever closed\n") == []  # markers that do not parse
    assert regions.region_count(MARKED) == 3


def test_regions_keep_only_the_hunks_that_touch_a_region() -> None:
    marked = "def f():\n<<<<<<< fork\n    return 10\n||||||| base\n    return 1\n=======\n    return 100\n>>>>>>> upstream\n"
    diff = ("diff --git a/k.py b/k.py\n--- a/k.py\n+++ b/k.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n"
            "+    return 100\n@@ -40,2 +40,2 @@ def g():\n-    pass\n+    return 'elsewhere'\n")
    kept, total = regions.near_regions(diff, marked, "theirs")
    assert total == 2 and [h.new_start for h in kept] == [1]
    assert regions.near_regions(diff, marked, "ours")[0] == [kept[0]]  # removes the base's line
    assert regions.near_regions("", marked, "theirs") == ([], 0)


def test_a_long_hunk_is_cut_to_the_lines_near_the_region() -> None:
    marked = "<<<<<<< fork\nmine\n||||||| base\nold\n=======\ntheirs\n>>>>>>> upstream\n"
    body = [f" same {i}" for i in range(60)]
    body[30:31] = ["-old", "+mine"]
    diff = "@@ -1,61 +1,61 @@\n" + "\n".join(body) + "\n"
    (part,), total = regions.near_regions(diff, marked, "ours")
    assert total == 1 and part.lines == (" same 27", " same 28", " same 29", "-old", "+mine", " same 31",
                                         " same 32", " same 33")
    assert (part.old_start, part.old_len, part.new_start, part.new_len) == (28, 7, 28, 7)
    assert part.header.startswith("@@ -28,7 +28,7 @@")


# -- the CLI ---------------------------------------------------------------------------------
def test_show_prints_the_region_three_ways_not_the_whole_file(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = long_fork(cli, builder)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    out = cli("conflicts", "show", str(c["id"]), repo=fork).out
    assert "region 1 of 1: lines" in out and "<<<<<<< fork" in out
    assert "    return 5000  # fork" in out and "    return 500" in out
    assert "def f20():" not in out and "def f80():" not in out  # far from the region: not printed
    # the upstream commit's hunk at f50 and the fork's, but neither far hunk
    assert "+    return 500" in out and "+    return 5000  # fork" in out
    assert FAR_UP.strip() not in out and FAR_FORK.strip() not in out
    assert out.count("1 of 2 hunk(s) touch the regions") == 2  # each diff has two hunks, one near the region
    assert f"forkflow conflicts edit {c['id']}" in out
    assert len(out.splitlines()) < 60, out
    full = cli("conflicts", "show", str(c["id"]), "--full", repo=fork).out
    assert "def f20():" in full and "def f80():" in full
    doc = cli("conflicts", "show", str(c["id"]), "--json", repo=fork).json()
    assert doc["conflicted"].count("\n") > 200  # the old keys keep their meaning
    assert doc["region_count"] == 1 and doc["upstream_change"]["total_hunks"] == 2
    assert len(doc["upstream_change"]["hunks"]) == 1 and "+    return 500" in doc["upstream_change"]["hunks"][0]
    (excerpt,) = doc["regions"]
    opening = next(ln for ln in excerpt["lines"] if ln["kind"] == "open")
    assert doc["conflicted"].splitlines()[opening["no"] - 1] == "<<<<<<< fork"


def test_next_edit_resolve_land_in_four_commands(cli, builder: ForkBuilder, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fork = long_fork(cli, builder)
    shown = cli("conflicts", "next", "--json", repo=fork).json()
    cid = shown["conflict"]["id"]
    assert shown["more_open"] == 0 and shown["conflict"]["unit"] is not None
    monkeypatch.setenv("EDITOR", _editor(tmp_path))
    r = cli("conflicts", "edit", str(cid), repo=fork)
    assert r.rc == 0 and "wrote the conflicted file to" in r.out, r.err
    r = cli("conflicts", "resolve", str(cid), repo=fork)
    assert r.rc == 0, r.err
    land = " ".join(r.out.split()).split("land it: forkflow ")[1].split(" (")[0].split()
    assert land == ["ingest", "--unit", str(shown["conflict"]["unit"])]
    doc = cli(*land, "--json", repo=fork).json()
    assert [u["status"] for u in doc["units"]] == ["landed"]
    text = builder.f.git("show", "main:big.py")
    assert FIX in text and FAR_UP in text and FAR_FORK in text
    assert not (fork / ".git" / "forkflow" / "conflicts" / str(cid)).exists()  # the scratch folder is gone
    assert cli("conflicts", "next", repo=fork).out.strip() == "no open conflicts"


def test_edit_keeps_a_persons_edits_and_resolve_meets_the_guardrails(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                     tmp_path: Path) -> None:
    fork = long_fork(cli, builder)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    cid = str(c["id"])
    _one_line_error(cli("conflicts", "resolve", cid, repo=fork))  # nothing written yet
    to = tmp_path / "work"
    to.mkdir()
    r = cli("conflicts", "checkout", cid, "--to", str(to), "--no-edit", repo=fork)
    assert r.rc == 0, r.err
    written = to / "big.py"
    marked = written.read_text()
    assert "<<<<<<< fork" in marked
    half = marked.replace("    return 5000  # fork\n", "    return 5500\n", 1)  # markers still there
    written.write_text(half)
    assert "kept your edits" in cli("conflicts", "edit", cid, "--to", str(to), "--no-edit", repo=fork).out
    assert written.read_text() == half
    r = cli("conflicts", "resolve", cid, repo=fork)  # takes it back from --to
    _one_line_error(r)
    assert "conflict markers left in the result" in r.err
    assert cli("conflicts", "--json", repo=fork).json()["conflicts"] != []  # nothing recorded
    assert cli("conflicts", "edit", cid, "--to", str(to), "--no-edit", "--fresh", repo=fork).rc == 0
    assert written.read_text() == marked
    written.write_text(marked.replace(marked[marked.index("<<<<<<< fork"):marked.index(">>>>>>> upstream\n") + 17],
                                      FIX))
    assert cli("conflicts", "resolve", cid, repo=fork).rc == 0
    assert written.exists()  # a file written with --to is the person's: it stays
    _one_line_error(cli("conflicts", "edit", cid, repo=fork))  # resolved: nothing to edit


def test_next_and_list_filter_by_owner(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = long_fork(cli, builder, extra_toml='\n[owners]\n"*.py" = ["@kay"]\n')
    assert cli("conflicts", "next", "--owner", "KAY", "--json", repo=fork).json()["conflict"]["owners"] == ["@kay"]
    assert cli("conflicts", "next", "--owner", "nobody", "--json", repo=fork).json() == {"conflict": None}
    assert "no open conflict is owned by nobody" in cli("conflicts", "--owner", "nobody", repo=fork).out
    assert len(cli("conflicts", "--owner", "kay", "--json", repo=fork).json()["conflicts"]) == 1


@pytest.mark.security
def test_editor_runs_without_a_shell(cli, builder: ForkBuilder, tmp_path: Path,  # type: ignore[no-untyped-def]
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """$EDITOR is split like a shell would (quotes) but never given to one: `;`, `$(...)` and
    redirections are arguments, not commands."""
    fork = long_fork(cli, builder)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    monkeypatch.setenv("EDITOR", "'unbalanced")
    r = cli("conflicts", "edit", str(c["id"]), repo=fork)
    _one_line_error(r)
    assert "$EDITOR" in r.err
    mark = tmp_path / "shell-ran"
    monkeypatch.setenv("EDITOR", f"{_editor(tmp_path)} '; touch {mark}' $(touch {mark}) > {mark}")
    assert cli("conflicts", "edit", str(c["id"]), repo=fork).rc == 0
    assert not mark.exists()
    assert cli("conflicts", "resolve", str(c["id"]), repo=fork).rc == 0  # the editor itself ran


@pytest.mark.security
def test_untrusted_region_text_never_reaches_the_terminal_raw(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    hostile = "    return 500  # \x1b]52;c;ZXZpbA==\x07 [bold red]boom[/] \u202e\n"
    fork = long_fork(cli, builder, upstream_line=hostile)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    for args in ((), ("--full",)):
        out = cli("conflicts", "show", str(c["id"]), *args, repo=fork).out
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
        assert "\\x1b]52;c;ZXZpbA==" in out and "[bold red]boom[/]" in out and "\\u202e" in out
    doc = json.loads(cli("conflicts", "show", str(c["id"]), "--json", repo=fork).out)
    assert any("\x1b]52" in ln["text"] for e in doc["regions"] for ln in e["lines"])  # JSON keeps the text


@pytest.mark.security
def test_scratch_file_name_stays_in_the_scratch_folder(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    from forkflow.cli.conflict_cmds import _scratch_file
    from forkflow.context import open_context

    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    ctx = open_context(builder.f.path)
    root = (builder.f.path / ".git" / "forkflow" / "conflicts").resolve()
    for path in ("../../../../etc/passwd", "..", "a/..\x1b[2J.py", "/abs/.bashrc", "x/\u202egnp.py"):
        x = ConflictInfo(7, Sha("a" * 40), "s", path, "content", "", Sha("b" * 40), "k", "", (), "open", 1,
                         datetime.now(timezone.utc))
        f = _scratch_file(ctx, x).resolve()
        assert f.parent == root / "7" and f.name not in ("", ".", "..") and f.name.isprintable(), path


def test_a_conflict_kept_before_the_fork_moved_is_worked_on_the_tip(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork's file changed after the conflict was kept (a unit landing later in the same
    ingest): next shows it on the tip, and the resolution made there lands."""
    fork = long_fork(cli, builder)
    builder.fork_commit({"big.py": _big({5: FAR_FORK, 50: "    return 6000  # fork again\n"})}, "[fork] f50 again")
    doc = cli("conflicts", "next", "--json", repo=fork).json()["conflict"]
    assert doc["note"] and "changed since" in doc["note"]
    assert "    return 6000  # fork again" in doc["conflicted"] and doc["base"] == builder.f.head()
    monkeypatch.setenv("EDITOR", _editor(tmp_path))
    assert cli("conflicts", "edit", str(doc["id"]), repo=fork).rc == 0
    r = cli("conflicts", "resolve", str(doc["id"]), repo=fork)
    assert r.rc == 0, r.err
    units = cli("ingest", "--unit", str(doc["unit"]), "--json", repo=fork).json()["units"]
    assert [u["status"] for u in units] == ["landed"]
    assert FIX in builder.f.git("show", "main:big.py")


def test_a_file_that_conflicts_only_on_the_moved_tip_is_kept_and_worked(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream #10 changes big.py (a conflict) and other.py (clean when kept); the fork then
    changes other.py's line too: next keeps that conflict as well, and both settled, it lands."""
    builder.upstream_commit({"big.py": _big({}), "other.py": "X = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"big.py": _big({50: "    return 5000  # fork\n"})}, "[fork] f50")
    builder.upstream_commit({"big.py": _big({50: "    return 500\n"}), "other.py": "X = 2\n"}, "Tune f50 (#10)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc == 4
    assert [c["path"] for c in cli("conflicts", "--json", repo=fork).json()["conflicts"]] == ["big.py"]
    builder.fork_commit({"other.py": "X = 3  # fork\n"}, "[fork] X")
    doc = cli("conflicts", "next", "--json", repo=fork).json()["conflict"]
    assert "also conflicts in other.py" in doc["note"]
    assert [y["path"] for y in doc["same_commit"]] == ["other.py"]
    monkeypatch.setenv("EDITOR", _editor(tmp_path, fix="X = 3  # fork, and upstream's 2\n"))
    for cid in (doc["same_commit"][0]["id"],):
        assert cli("conflicts", "edit", str(cid), repo=fork).rc == 0
        assert cli("conflicts", "resolve", str(cid), repo=fork).rc == 0
    monkeypatch.setenv("EDITOR", _editor(tmp_path))
    assert cli("conflicts", "edit", str(doc["id"]), repo=fork).rc == 0
    r = cli("conflicts", "resolve", str(doc["id"]), repo=fork)
    assert r.rc == 0 and f"ingest --unit {doc['unit']}" in " ".join(r.out.split()), r.out
    units = cli("ingest", "--unit", str(doc["unit"]), "--json", repo=fork).json()["units"]
    assert [u["status"] for u in units] == ["landed"]
    assert builder.f.git("show", "main:other.py") == "X = 3  # fork, and upstream's 2\n"


@pytest.mark.security
def test_the_conflict_page_escapes_region_text_and_diffs(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from forkflow.context import open_context
    from forkflow.web.app import create_app

    hostile = "    return 500  # </td></tr><script>window.__pwned=1</script><img src=x onerror=alert(1)>\n"
    fork = long_fork(cli, builder, upstream_line=hostile)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    with TestClient(create_app(open_context(fork), None)) as client:
        html = client.get(f"/ingestion/conflicts/{c['id']}").text
        listed = client.get("/ingestion/conflicts?owner=%3Cscript%3E").text
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    assert html.count("&lt;script&gt;window.__pwned=1&lt;/script&gt;") >= 2  # the region and upstream's hunk
    assert "<script>" not in listed.split("</nav>", 1)[1].replace('<script type="application/json"', "")
