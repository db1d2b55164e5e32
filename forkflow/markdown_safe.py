"""Untrusted text in Markdown that a forge renders: quoted so it cannot mention, link or close.

Test names, log lines, commit subjects and agent answers come from upstream and CI.  Put into a
tracking issue or a review request as they are, they ping teams (`@core-team`), load remote
images, open HTML, and close the fork's issues (`Closes #1` in an upstream commit title).  Every
untrusted value goes through one of four doors:

- `code_span`: one line in an inline code span that nothing inside can close;
- `code_block`: a fenced block with a fence longer than any backtick run inside;
- `prose`: plain text with every Markdown-active character escaped and `@`, `#N`, `://`
  broken by a word joiner (U+2060): shown as written, never a mention, reference or link;
- `markdown`: untrusted Markdown (an agent's suggestion) parsed by a CommonMark parser and
  rebuilt from its parts: code stays code, everything else becomes `prose`.

`constructs` parses Markdown as GitHub does (CommonMark with HTML, tables, strikethrough and
autolinks) and lists what a forge would act on: links, images, HTML, headings, mentions and
issue references.  `render_checked` builds a document twice, with placeholders and with the
values, and fails closed: a value that adds a construct of its own is withheld.  [pure]
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

WJ = "\u2060"  # word joiner: invisible, and no forge reads `@\u2060team` as a mention
WITHHELD = "(withheld: this text would have rendered as Markdown)"

# -- normalising ----------------------------------------------------------------------------------

_BREAKS = re.compile(r"\r\n?|[\x0b\x0c\x85\u2028\u2029]")
# other control characters and the bidi overrides (text that reads differently than it runs)
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069]")


def normalise(text: str) -> str:
    """One kind of line break (\\n), tabs as spaces, no control character, no `<!--` (a forge
    hides what follows it, and the dedup marker of a tracking issue starts with it)."""
    text = _BREAKS.sub("\n", text)
    text = "\n".join(line.expandtabs(4) for line in text.split("\n"))
    return _CONTROLS.sub("\ufffd", text).replace("<!--", f"<{WJ}!--")


def _longest_run(text: str, ch: str) -> int:
    return max((len(m) for m in re.findall(re.escape(ch) + "+", text)), default=0)


# -- the four doors -------------------------------------------------------------------------------

def code_span(text: str, limit: int = 300, in_table: bool = False) -> str:
    """`text` on one line as an inline code span nothing in it can close (CommonMark: a backtick
    run longer than any inside; one space each side, which the parser strips)."""
    flat = " ".join(normalise(text[:limit]).split())
    if in_table:  # GFM splits a row on every unescaped pipe, code spans included
        flat = flat.replace("|", "\\|")
    if not flat:
        return "` `"  # an empty span is no span: one space, shown as one
    ticks = "`" * (_longest_run(flat, "`") + 1)
    return f"{ticks} {flat} {ticks}"


_LANG = re.compile(r"[A-Za-z0-9_+.-]{1,30}")


def code_block(text: str, lang: str = "") -> str:
    """A fenced code block that the text cannot close or leave; `lang` is kept only when it is
    one word (an info string with a backtick would not open a fence at all)."""
    body = normalise(text)
    ticks = "`" * max(3, _longest_run(body, "`") + 1)
    info = lang if _LANG.fullmatch(lang) else ""
    return f"{ticks}{info}\n{body}\n{ticks}"


_ACTIVE = re.compile(r"([\\`*_{}\[\]()<>#!|~&$^])")
# active only where a line starts: list markers, setext underlines, thematic breaks
_LEADING = re.compile(r"^(\d{0,9})([-+=.)])")
_REFS = [
    (re.compile(r"@(?=\w)"), "@" + WJ),                 # @team: a mention
    (re.compile(r"#(?=\w)"), "#" + WJ),                 # #1, owner/repo#2: references
    (re.compile(r"(?i)(gh)-(?=\d)"), r"\1-" + WJ),       # GH-1: a reference too
    (re.compile(r"(?i)(?<=[a-z]):(?=//)"), ":" + WJ),   # https://: an autolink
    (re.compile(r"(?i)\b(mailto|xmpp):"), r"\1:" + WJ),
    (re.compile(r"(?i)\bwww\."), "www" + WJ + "."),
]


def prose(text: str, limit: int | None = None, one_line: bool = False) -> str:
    """Plain text that renders as written: every Markdown-active character escaped, mentions,
    references and links broken by a word joiner, each line's indentation dropped."""
    text = normalise(text if limit is None else text[:limit])
    lines = [" ".join(text.split())] if one_line else [ln.strip() for ln in text.split("\n")]
    return _line_starts("\n".join(_escape(ln) for ln in lines))


def _escape(text: str) -> str:
    for rx, repl in _REFS:
        text = rx.sub(repl, text)
    return _ACTIVE.sub(r"\\\1", text)


def _line_starts(text: str) -> str:
    return "\n".join(_LEADING.sub(r"\1\\\2", ln.lstrip()) for ln in text.split("\n"))


def cell(text: str, limit: int = 160) -> str:
    """`prose` for a table cell: one line, pipes escaped."""
    return prose(text, limit, one_line=True) or " "


def markdown(text: str) -> str:
    """Untrusted Markdown kept readable: its code blocks and code spans stay code (re-fenced),
    its list items and quotes stay, everything else is `prose`; parsed with the forge's parser."""
    out: list[str] = []
    depth, number = 0, 0
    item = quote = ""
    in_list = False  # the last block written was an item of the list still open: no blank line
    for t in _MD.parse(normalise(text)):
        if t.type == "blockquote_open" or t.type == "blockquote_close":
            depth += 1 if t.type == "blockquote_open" else -1
            quote, in_list = "> " * depth, False
        elif t.type in ("bullet_list_open", "ordered_list_open", "bullet_list_close", "ordered_list_close"):
            number, in_list = int(t.attrGet("start") or 1), False
        elif t.type == "list_item_open":
            item = "- " if t.markup in "-*+" else f"{number}. "
            number += 1
        elif t.type in ("fence", "code_block"):
            _add(out, code_block(t.content.rstrip("\n"), t.info.strip().split(" ")[0]), quote)
            in_list = False
        elif t.type == "html_block":
            _add(out, prose(t.content), quote)
            in_list = False
        elif t.type == "inline" and t.children is not None:
            inline = _inline(t.children)
            if inline.strip():
                _add(out, item + inline, quote, tight=in_list and bool(item))
                in_list = bool(item)
            item = ""
    return "\n".join(out).strip("\n")


def _add(out: list[str], block: str, quote: str, tight: bool = False) -> None:
    if out and not tight:
        out.append(quote.rstrip())
    out += [quote + ln if ln else quote.rstrip() for ln in block.split("\n")]


def _inline(children: Sequence[Token]) -> str:
    parts: list[str] = []
    run: list[str] = []  # text escaped as one run: `&#64;` then `x` must not make `@x`
    hrefs: list[str] = []
    for c in [*children, None]:
        if c is not None and c.type in ("text", "text_special", "html_inline", "image"):
            run.append(normalise(c.content).replace("\n", " "))
            continue
        if c is not None and c.type == "link_open" and c.markup != "autolink":
            hrefs.append(str(c.attrGet("href") or ""))
            continue
        if c is not None and c.type == "link_close" and c.markup != "autolink":
            href = hrefs.pop() if hrefs else ""
            run.append(f" ({href})" if href else "")  # shown as text, broken so it links nowhere
            continue
        if c is not None and c.type not in ("code_inline", "softbreak", "hardbreak"):
            continue  # emphasis: its marks go, its text stays in the run
        parts.append(_escape("".join(run)))
        run = []
        if c is None:
            break
        if c.type == "code_inline":
            parts.append(code_span(c.content, limit=len(c.content)))
        elif c.type in ("softbreak", "hardbreak"):
            parts.append("\n")
    return _line_starts("".join(parts))


# -- what a forge acts on -------------------------------------------------------------------------

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])

_MENTION = re.compile(r"@[A-Za-z0-9](?:[A-Za-z0-9_-]*)(?:/[A-Za-z0-9_.-]+)?")
_REF = r"(?:(?:[\w.-]+/)?[\w.-]+)?#\d+|(?i:GH)-\d+|https?://\S+/(?:issues|pull|merge_requests)/\d+"
_CLOSING = re.compile(r"(?i)\b(?:clos(?:e|es|ed|ing)|fix(?:|es|ed|ing)|resolv(?:e|es|ed|ing)|"
                      r"implement(?:s|ed|ing)?)\b:?\s+(?:" + _REF + ")")
_REFERENCE = re.compile(_REF)
# GFM's autolink extension (www., a scheme, an e-mail address), as the forge finds them in text
_AUTOLINK = re.compile(r"(?i)(?:\b(?:https?|ftp)://|\bwww\.|\b(?:mailto|xmpp):(?!\u2060)|"
                       r"[\w.+-]+@[A-Za-z0-9-]+\.[A-Za-z0-9])")


@dataclass(frozen=True, slots=True)
class Construct:
    """Something a forge acts on: a link, image, HTML, heading, mention or issue reference."""
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.kind} {self.text[:80]!r}"


def constructs(md: str) -> list[Construct]:
    """Every construct in `md` outside code, in order, as a forge's CommonMark parser sees it."""
    out: list[Construct] = []
    tokens = _MD.parse(md)
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            out.append(Construct("heading", tokens[i + 1].content))
        elif t.type == "html_block":
            out.append(Construct("html", t.content.strip()))
        elif t.type == "inline" and t.children is not None:
            out += _inline_constructs(t.children)
    return out


def _inline_constructs(children: Sequence[Token]) -> list[Construct]:
    out: list[Construct] = []
    text: list[str] = []
    for c in [*children, None]:
        if c is not None and c.type in ("text", "text_special", "softbreak", "hardbreak"):
            text.append(c.content or " ")
            continue
        out += _text_constructs("".join(text))  # code, links and HTML end a run of text
        text = []
        if c is None:
            break
        if c.type == "link_open":
            out.append(Construct("autolink" if c.markup == "autolink" else "link", str(c.attrGet("href"))))
        elif c.type == "image":
            out.append(Construct("image", str(c.attrGet("src"))))
        elif c.type == "html_inline":
            out.append(Construct("html", c.content))
    return out


def _text_constructs(text: str) -> list[Construct]:
    out = [Construct("closing reference", m[0]) for m in _CLOSING.finditer(text)]
    out += [Construct("reference", m[0]) for m in _REFERENCE.finditer(text)]
    out += [Construct("mention", m[0]) for m in _MENTION.finditer(text)]
    out += [Construct("autolink", m[0]) for m in _AUTOLINK.finditer(text)]
    return out


def untrusted_constructs(md: str, trusted: Iterable[Construct] = ()) -> list[Construct]:
    """The constructs of `md` that `trusted` (the template's own, e.g. its owners' mentions)
    does not account for, each counted as often as it occurs."""
    allowed = Counter(trusted)
    out = []
    for c in constructs(md):
        if allowed[c] > 0:
            allowed[c] -= 1
        else:
            out.append(c)
    return out


class UnsafeMarkdown(ValueError):
    """Markdown holds a construct its template did not put there."""


def assert_safe(md: str, trusted: Iterable[Construct] = ()) -> None:
    """Raise UnsafeMarkdown naming the first construct of `md` that `trusted` does not hold."""
    found = untrusted_constructs(md, trusted)
    if found:
        raise UnsafeMarkdown(f"untrusted Markdown construct: {found[0]}")


# -- documents built from a template and untrusted values -----------------------------------------

class Quote:
    """The doors, as a template uses them: `render_checked` hands one that quotes, one that
    puts placeholders, and one that withholds every value."""

    def code(self, text: str, limit: int = 300) -> str:
        return self._checked(code_span(text, limit))

    def cell_code(self, text: str, limit: int = 300) -> str:
        return self._checked(code_span(text, limit, in_table=True))

    def block(self, text: str, lang: str = "") -> str:
        return self._checked(code_block(text, lang))

    def prose(self, text: str, limit: int | None = None, one_line: bool = False) -> str:
        return self._checked(prose(text, limit, one_line))

    def cell(self, text: str, limit: int = 160) -> str:
        return self._checked(cell(text, limit))

    def markdown(self, text: str) -> str:
        return self._checked(markdown(text))

    def _checked(self, md: str) -> str:
        """A value that, alone, parses into any construct is withheld whole."""
        return WITHHELD if constructs(md) else md


class _Placeholders(Quote):
    def _checked(self, md: str) -> str:
        return "value"

    def code(self, text: str, limit: int = 300) -> str:
        return "`value`"

    cell_code = code

    def block(self, text: str, lang: str = "") -> str:
        return "```\nvalue\n```"


class _Withheld(_Placeholders):
    def _checked(self, md: str) -> str:
        return WITHHELD

    def code(self, text: str, limit: int = 300) -> str:
        return WITHHELD

    cell_code = code

    def block(self, text: str, lang: str = "") -> str:
        return WITHHELD


def template_constructs(build: Callable[[Quote], str]) -> tuple[Construct, ...]:
    """The constructs `build` writes itself: those of its document with placeholders for values."""
    return tuple(constructs(build(_Placeholders())))


def render_checked(build: Callable[[Quote], str]) -> str:
    """`build(q)` with its untrusted values quoted by `q`, checked against `build` with
    placeholders; when the values together still add a construct, every one is withheld."""
    trusted = template_constructs(build)
    doc = build(Quote())
    if untrusted_constructs(doc, trusted):
        return build(_Withheld())
    return doc
