"""JUnit XML for the L1 checks: one <testsuite>, one <testcase> per check, written atomically."""
from __future__ import annotations

import enum
import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


class CaseOutcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"   # the check ran and the result is wrong
    ERROR = "error"     # the check could not run to the end (out of memory, a crash)
    SKIPPED = "skipped"  # not applicable here (no GPU, a dtype the hardware lacks)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one check, as a JUnit <testcase>."""

    classname: str
    name: str
    outcome: CaseOutcome
    seconds: float = 0.0
    message: str = ""
    detail: str = ""

    @property
    def id(self) -> str:
        return f"{self.classname}::{self.name}"


def counts(cases: list[CaseResult]) -> dict[CaseOutcome, int]:
    out = {o: 0 for o in CaseOutcome}
    for c in cases:
        out[c.outcome] += 1
    return out


def to_xml(suite: str, cases: list[CaseResult], properties: dict[str, str] | None = None) -> bytes:
    """The JUnit XML document for `cases` (the format pytest's --junitxml writes)."""
    n = counts(cases)
    root = ET.Element("testsuites")
    ts = ET.SubElement(root, "testsuite", {
        "name": suite, "tests": str(len(cases)), "failures": str(n[CaseOutcome.FAILED]),
        "errors": str(n[CaseOutcome.ERROR]), "skipped": str(n[CaseOutcome.SKIPPED]),
        "time": f"{sum(c.seconds for c in cases):.3f}",
    })
    if properties:
        props = ET.SubElement(ts, "properties")
        for k, v in properties.items():
            ET.SubElement(props, "property", {"name": k, "value": v})
    for c in cases:
        tc = ET.SubElement(ts, "testcase", {"classname": c.classname, "name": c.name,
                                             "time": f"{c.seconds:.3f}"})
        if c.outcome is not CaseOutcome.PASSED:
            tag = {CaseOutcome.FAILED: "failure", CaseOutcome.ERROR: "error",
                   CaseOutcome.SKIPPED: "skipped"}[c.outcome]
            el = ET.SubElement(tc, tag, {"message": c.message})
            if c.detail:
                el.text = c.detail
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename: never half a report."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # a report like any file the user writes (mkstemp makes it 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_junit(path: Path, suite: str, cases: list[CaseResult],
                properties: dict[str, str] | None = None) -> None:
    """Write the JUnit report of `cases` to `path`."""
    write_atomic(path, to_xml(suite, cases, properties))
