"""Untrusted text in forge Markdown, checked with a CommonMark parser (markdown-it-py) and fuzzed.

Each door of forkflow.markdown_safe must hold for any text; a tracking issue's body and a review
request's description must render no construct (mention, issue reference, link, image, HTML,
heading) but the ones their templates write themselves.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from forkflow.landing.review import GitHubReview, Member, describe
from forkflow.markdown_safe import (
    WITHHELD,
    Construct,
    UnsafeMarkdown,
    assert_safe,
    code_block,
    code_span,
    constructs,
    markdown,
    normalise,
    prose,
    untrusted_constructs,
)
from forkflow.models import Sha
from forkflow.triage.models import Failure, FailureKind, Signature
from forkflow.triage.sinks.base import IssueDraft, key_in
from forkflow.triage.sinks.github import GitHubSink
from forkflow.triage.sinks.markdown import MarkdownSink
from forkflow.triage.suggest import Culprit, Suggestion, deterministic_suggestion
from forkflow.triage.tracking import body_constructs, render_body
from forkflow.triage.trunk import RedItem, TrunkCulprit
from tests.fakeforge import FakeForge

# what makes Markdown act: backticks, tildes, tabs, mentions, references, HTML, links, breaks
PIECES = ["`", "``", "```", "````", "~~~", "\t", "    ", "@core-team", "@a/b", "#1", "Closes #1",
          "fixes acme/fork#2", "GH-3", "<", ">", "<img src=x>", "<b>", "</div>", "<!--", "-->",
          "<!-- forkflow:group=0123456789abcdef -->", "[", "]", "](https://evil.example/x)", "!",
          "![i](https://evil.example/i.png)", "<https://evil.example>", "https://evil.example/a",
          "www.evil.example", "a@evil.example", "mailto:a", "\\", "\r", "\r\n", "\n", "\x0b", "\x0c",
          "\x85", "\u2028", "\u2029", "\x00", "# ", "## h", "=", "-", "---", "* ", "1. ", "|", "&#64;",
          "&lt;", "&", ":", " ", "  ", "x", "team", "\u202e"]
TEXT = st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=24).map("".join)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GFM = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])

OWNERS = ("@fork-owners",)


def _inline_tokens(md: str) -> list[str]:
    return [c.type for t in GFM.parse(md) if t.children for c in t.children]


# -- the doors, alone ------------------------------------------------------------------------------

@FUZZ
@given(TEXT)
def test_code_span_is_one_span_holding_the_text(text: str) -> None:
    md = code_span(text, limit=10_000)
    [inline] = [t for t in GFM.parse(md) if t.type == "inline"]
    assert [c.type for c in inline.children or []] == ["code_inline"], md
    assert (inline.children or [])[0].content == (" ".join(normalise(text).split()) or " ")
    assert constructs(md) == []


@FUZZ
@given(TEXT, st.sampled_from(["", "diff", "py", "a`b", "x y"]))
def test_code_block_is_one_fence_holding_the_text(text: str, lang: str) -> None:
    md = code_block(text, lang)
    tokens = GFM.parse(md)
    assert [t.type for t in tokens] == ["fence"], md
    assert tokens[0].content == normalise(text) + "\n"
    assert "`" not in tokens[0].info


@FUZZ
@given(TEXT)
def test_prose_renders_nothing_but_text(text: str) -> None:
    md = prose(text)
    assert constructs(md) == [], md
    kinds = {t.type for t in GFM.parse(md)}
    assert kinds <= {"paragraph_open", "paragraph_close", "inline"}, (md, kinds)
    assert set(_inline_tokens(md)) <= {"text", "softbreak", "hardbreak"}, md


@FUZZ
@given(TEXT)
def test_untrusted_markdown_keeps_code_and_renders_nothing_else(text: str) -> None:
    md = markdown(text)
    assert constructs(md) == [], md
    assert key_in(md) is None and "<!--" not in md


# -- whole documents -------------------------------------------------------------------------------

def _item(text: str) -> RedItem:
    sig = Signature(FailureKind.CRASH, f"CRASH: {text}", f"log line {text}")
    return RedItem(Failure(f"test_{text}", sig, 1, f"job {text}"), "L2", 1, "a" * 40, 2, None,
                   culprit_detail=TrunkCulprit("b" * 40, f"unit {text}", "c" * 40, f"subject {text}", 7))


def _body(text: str, suggestion: str) -> tuple[str, tuple[Construct, ...]]:
    items = [_item(text)]
    suggestions = [Suggestion("deterministic", f"Failing assertion: `{text}`"),
                   Suggestion("agent", suggestion, (f"warned {text}",))]
    return render_body(items, None, OWNERS, suggestions), body_constructs(items, OWNERS, suggestions)


TEMPLATE = [Construct("reference", "#7"), Construct("mention", "@fork-owners")]


@FUZZ
@given(TEXT, TEXT)
def test_tracking_body_renders_only_its_templates_constructs(text: str, suggestion: str) -> None:
    body, allowed = _body(text, suggestion)
    assert sorted(constructs(body), key=str) == sorted(TEMPLATE, key=str), body
    assert sorted(allowed, key=str) == sorted(TEMPLATE, key=str)
    assert WITHHELD not in body  # the doors held in place: nothing had to be withheld
    assert key_in(body) is None


def _members(subject: str) -> list[Member]:
    return [Member(Sha("a" * 40), subject, 101, f"why {subject}"), Member(Sha("b" * 40), subject, None, subject)]


@FUZZ
@given(TEXT)
def test_review_body_renders_only_its_prs(text: str) -> None:
    body = describe(f"unit {text}", "bundle", _members(text), f"L1 FAIL: {text}", [text])
    assert sorted(constructs(body), key=str) == [Construct("reference", "#101")] * 2, body
    assert WITHHELD not in body


# -- the tricks that leaked, and the checker ------------------------------------------------------

@pytest.mark.security
@pytest.mark.parametrize("trick", [
    "``@core-team` ![x](https://evil.example/x.png) <img src=x> [c](https://evil.example)`",  # partial run
    "\t```\n@core-team ![x](https://evil.example/x.png)\n<img src=x>\n```",  # a tab-indented "fence"
    "``` a`b\n@core-team [c](https://evil.example) <b>x</b>\n```",  # a backtick in the info string
], ids=["partial-backtick-run", "tab-indented-fence", "backtick-info-string"])
def test_suggestion_markdown_tricks_render_nothing(trick: str) -> None:
    body, allowed = _body("ok", trick)
    assert untrusted_constructs(body, allowed) == [], body
    assert "@\u2060core-team" in body  # still shown, mentioning no one
    assert "core-team" not in {c.text.lstrip("@") for c in constructs(body)}


@pytest.mark.security
def test_review_body_closes_no_fork_issue() -> None:
    subject = "Revert x (Closes #1, fixes acme/fork#2) cc @core-team <img src=x> [y](https://e.example)"
    body = describe("revert-x", "single", [Member(Sha("a" * 40), subject, 5, "Closes #1")], "L1 PASS", [])
    assert constructs(body) == [Construct("reference", "#5")] * 2, body
    with FakeForge(tokens={"tok": "write"}) as forge:  # the description the forge is sent
        GitHubReview("team/triton", "tok", forge.url + "/github").propose("forkflow/revert-x", "main",
                                                                        "Revert x", body)
        [pull] = forge.pulls("team/triton")
    assert not [c for c in constructs(pull["body"]) if c.kind in ("closing reference", "mention", "html", "link")]


def test_checker_finds_what_a_forge_acts_on() -> None:
    found = constructs("# t\n\nCloses #1 @x ![i](s) [l](h) <b> <https://a.b> www.c.d\n\n<div>\n</div>\n\n`@in-code`")
    assert [c.kind for c in found] == ["heading", "closing reference", "reference", "mention", "image", "link",
                                       "html", "autolink", "autolink", "autolink", "html"]  # <https://a.b>: link and text
    assert untrusted_constructs("@owner and @owner", [Construct("mention", "@owner")]) == [
        Construct("mention", "@owner")]
    with pytest.raises(UnsafeMarkdown, match="mention"):
        assert_safe("hi @team")
    assert_safe("hi `@team`")


def test_a_body_that_would_render_is_withheld_by_the_sink() -> None:
    evil = IssueDraft("0123456789abcdef", "t", "cc @core-team", ("forkflow",), ())
    with FakeForge(tokens={"tok": "write"}) as forge:
        GitHubSink("acme/fork", "tok", api=forge.url + "/github", backoff=0.01).create(evil)
        [issue] = forge.issues("acme/fork")
    assert key_in(issue["body"]) == evil.key and "@core-team" not in issue["body"]
    assert "withheld" in issue["body"]


def test_markdown_sink_file_heading_is_plain(tmp_path: Path) -> None:
    sink = MarkdownSink(tmp_path)
    draft = IssueDraft("0123456789abcdef", "[forkflow] # x @core-team <b>", "body", ("forkflow",))
    ref = sink.create(draft)
    text = (tmp_path / ref.id).read_text()
    assert key_in(text) == draft.key and sink.find(draft.key) == ref
    # the marker, the title and the history's heading: the title is one plain line
    assert [c.kind for c in constructs(text.split("---\n", 2)[2])] == ["html", "heading", "heading"]
    assert "\n# \\[forkflow\\] \\# x @\u2060core-team \\<b\\>\n" in text


def test_deterministic_suggestion_quotes_its_subject() -> None:
    s = deterministic_suggestion("E   assert `x` @a", Culprit("a" * 40, "Closes #1 @core-team", "diff"), ())
    assert [c for c in constructs(markdown(s.text))] == []


# -- agent answers: read up to a cap, and the issue says so ---------------------------------------

@pytest.mark.security
def test_a_command_agent_that_never_stops_writing_is_cut_and_says_so() -> None:
    import sys

    from forkflow.triage.suggest import MAX_ANSWER_BYTES, CommandAgent, suggest

    endless = f"{sys.executable} -c \"import sys\nwhile True: sys.stdout.write('@core-team ' * 4096)\""
    _, agent = suggest("CRASH: x", "log", None, (), CommandAgent(endless, timeout=30))
    assert f"agent answer cut: over {MAX_ANSWER_BYTES} bytes, only those were read" in agent.warnings
    assert 0 < len(agent.text) <= 4000
    body = render_body([_item("x")], None, OWNERS, [agent])
    assert "agent answer cut" in body and untrusted_constructs(body, body_constructs([_item("x")], OWNERS, [agent])) == []


@pytest.mark.security
def test_a_chat_agent_answer_over_the_cap_is_refused_and_says_so() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from forkflow.triage.suggest import MAX_ANSWER_BYTES, ChatAgent, suggest

    answer = json.dumps({"choices": [{"message": {"content": "x" * (MAX_ANSWER_BYTES * 2)}}]}).encode()

    class Big(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Big)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _, agent = suggest("CRASH: x", "log", None, (), ChatAgent(f"http://127.0.0.1:{server.server_port}", "m",
                                                                  timeout=30))
    finally:
        server.shutdown()
        server.server_close()
    assert agent.text == "" and agent.warnings == (f"agent failed (answer larger than {MAX_ANSWER_BYTES} bytes)",)
