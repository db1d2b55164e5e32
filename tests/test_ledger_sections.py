"""Pick messages read by section: the shapes of real bundle messages, as literal text (issue 12)."""
from __future__ import annotations

from forkflow.ledger.sections import is_fork_revert, read_sections, subject_prs

FOLDED = """\
Summary:
Folded bundle of 21 upstream commits (the span #9552..#9688). Net pin = 27d654c4 (#9552).

Reactor-Bundle (applied, 17 with code):
- #9552 LLVM bump 27d654c4 (RESOLVED AMD TDM + Proton); #9642 Build clang (RESOLVED README); #9649; #9656
Pin-advance only (no beta code): #9653 (llvm hash), #9688 (revert of #9653).
Inapplicable (beta lacks fpsan; pin-advance): #9655, #9645.

Deferred (recorded; focused follow-up required):
- #9615 needs an unlanded change.
- #9668 (block-ptr rewrite) + dependents #9669, #9677 apply together.

Reviewed By: someone

Differential Revision: D109855853
"""

COUNTED = """\
Applied (94): 9720 9725 9605

Key resolutions:
- GSan #9568: kept the fork's local predicate
- Earlier resolutions (#9747 composePaddedLayout)

Skipped (14) - reasons:
- LLVM bumps #9689 / #9746: no-ops for the fork.
https://github.com/triton-lang/triton/pull/9720

Reactor Backport Revision: 3dffc274193aa7a4310ce96f364ab871bd3a161f
Reactor Defer Revision: 58816a13df4b5027154d3fb42764fbbb1f70f00c
Reactor WontPort Revision: d32635775d9c284ed13ad0e2c25ff45e047b33fd
"""

ITEMS = """\
Reactor-Bundle:

- [1] PR triton-lang/triton#9332 (`505bdb7`) '[kernels] Add unpadded batch size' - CLEAN
- [2] 7505c8c1 PR #9314 '[AMD] Introduce PartitionedSharedEncodingAttr (#9999)' - RESOLVED(Membar.cpp)
      Raw conflicts: P2381813018
"""


def test_sections_picked_list_is_picks_and_decision_lists_are_not() -> None:
    refs = read_sections(FOLDED)
    assert refs.picked_prs == [9552, 9642, 9649, 9656]
    assert refs.skipped_prs == [9653, 9688, 9653, 9655, 9645]
    assert refs.deferred_prs == [9615, 9668, 9669, 9677]
    assert refs.has_picked_section


def test_sections_counted_numbers_prose_and_decision_markers() -> None:
    refs = read_sections(COUNTED)
    assert refs.picked_prs == [9720, 9725, 9605]
    assert 9568 not in refs.picked_prs and 9747 not in refs.picked_prs  # resolution notes
    assert refs.skipped_prs == [9689, 9746]  # the URL line is neither
    assert refs.deferred_shas == ["58816a13df4b5027154d3fb42764fbbb1f70f00c"]
    assert refs.skipped_shas == ["d32635775d9c284ed13ad0e2c25ff45e047b33fd"]


def test_sections_numbered_items_with_repo_and_sha() -> None:
    refs = read_sections(ITEMS)
    assert refs.picked_prs == [9332, 9314]  # '#9999' inside an item's title is not read
    assert refs.picked_shas == ["7505c8c1"]


def test_sections_unreadable_picked_header_is_no_list() -> None:
    assert not read_sections("Reactor-Bundle:\n\nsee the subject\n").has_picked_section


def test_subject_prs_drop_the_forks_own_number() -> None:
    assert subject_prs("[Cherry-pick][RESOLVED] '[IMP] native specialize (#7771)' (#845)") == [7771]
    assert subject_prs("[pick] Update ptxas knobs (#8121) (#735)") == [8121]
    assert subject_prs("[Cherry-pick][BUNDLE] #9336 #9342 #9356 (#1698)") == [9336, 9342, 9356]
    assert subject_prs("Fix x (#8121)") == [8121]
    assert subject_prs("[Cherry-pick] 'Move changes from #8981 into verifiers (#9033)'") == [9033]


def test_fork_revert_prefixes() -> None:
    assert is_fork_revert("Revert D92336232: [Cherry-pick] 'x (#7771)'")
    assert is_fork_revert('Back out "[Cherry-pick] x"')
    assert not is_fork_revert("[Cherry-pick] 'Revert \"x\" (#9367)'")
