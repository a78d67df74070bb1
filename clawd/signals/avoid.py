"""Decoding without what the memories forbid: lists, markdown, emoji, "!", a phrase.

A memory like "Do not use bullet points.", "No emojis." or "Plain text only." gives the answer's
shape an ``avoid`` (``clawd.signals.shaping.avoids_of``). The engine then never samples a token
that would begin what is avoided, and the model writes on without it:

- ``lists``: while a line has no letter yet, anything but a word or a quote (a bullet, a
  number, a symbol: a model kept from "1." writes "1\n2\n3" or "⑴" otherwise); and a token
  that opens an item after a new line anywhere in it;
- ``markdown``: "*", "`", "__" anywhere, and "#", ">" or a table's "|" at the start of a line;
- ``emoji``: any token whose bytes hold an emoji, or end in the first bytes of one, or, after
  such first bytes, complete one (byte-level vocabularies split emoji across tokens);
- ``exclamations``: any token with "!" outside a code block;
- ``newlines``: any token with a line break outside a code block (one paragraph, one line);
- a phrase (``'"great question"'``): its last token after the tokens before it, as written,
  lower-case or capitalised, with or without a space before;
- and while a closing question is written (``clawd.signals.shaping``), whatever would end it
  without its "?": ".", "!", a new line, an end-of-turn token.

Nothing is banned inside a thinking block. Tokens are classed once per model
(``TokenClasses``, from each token's bytes; ``llama_classes`` for a llama.cpp model); per
step, ``Avoider.banned`` reads the content so far and the bytes of a character not yet
complete. Run alone to see what one model bans::

    python -m clawd.signals.avoid MODEL.gguf lists emoji
"""

from __future__ import annotations

import re
import sys
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from clawd.chattemplate import THINK_CLOSE, THINK_OPEN

EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b50\u2b55\ufe0f]")
# the first bytes of an emoji's UTF-8 (a token that ends in one is on its way to an emoji)
_EMOJI_PREFIX = re.compile(rb"(\xf0\x9f?.?|\xe2[\x98-\x9e]|\xe2\xad|\xef\xb8)$", re.S)
_NEW_ITEM = re.compile(rb"\n[ \t]*(?:[-*+]|\xe2\x80\xa2|\d+[.)])")
MARKUP = re.compile(rb"[*`]|__|\n[ \t]*[#>|]")
_LINE_MARK = re.compile(rb"^[ \t]*[#>|]")


def _ids(pieces: list[bytes], keep: Iterable[bool]) -> np.ndarray:
    return np.array([i for i, k in zip(range(len(pieces)), keep, strict=True) if k], np.intp)


class TokenClasses:
    """Which tokens of one vocabulary (``pieces[i]``: token i's bytes) may begin what an answer
    avoids, by where they would stand; computed once per model. ``encode`` turns a phrase into
    the vocabulary's ids (a phrase to avoid needs it)."""

    def __init__(
        self, pieces: list[bytes], encode: Callable[[str], list[int]] | None = None
    ) -> None:
        self.pieces, self.encode = pieces, encode
        self.new_item = _ids(pieces, (bool(_NEW_ITEM.search(b)) for b in pieces))
        self.bullet = _ids(pieces, (not _opens_line(b) for b in pieces))
        self.markup = _ids(pieces, (bool(MARKUP.search(b)) for b in pieces))
        self.line_mark = _ids(pieces, (bool(_LINE_MARK.match(b)) for b in pieces))
        self.emoji = _ids(pieces, (_is_emoji(b) for b in pieces))
        self.bang = _ids(pieces, (b"!" in b for b in pieces))
        self.newline = _ids(pieces, (b"\n" in b or b"\r" in b for b in pieces))
        # what would end a closing question without its "?": a sentence's end, a new line,
        # an end-of-turn token (no text)
        self.unasked = _ids(pieces, (not b or bool(re.search(rb"[.!\n\r]", b)) for b in pieces))
        # tokens that open with a continuation byte: they may complete an emoji begun before
        self.continuing = _ids(pieces, (bool(b) and 0x80 <= b[0] < 0xC0 for b in pieces))


_LLAMA_CLASSES: weakref.WeakKeyDictionary[Any, TokenClasses] = weakref.WeakKeyDictionary()


def llama_classes(llm: Any) -> TokenClasses:
    """The tokens of a llama.cpp model (``llama_cpp.Llama``) classed, once per model object."""
    if llm not in _LLAMA_CLASSES:
        model = weakref.ref(llm)  # the classes must not keep the model alive

        def encode(text: str) -> list[int]:
            return model().tokenize(text.encode(), add_bos=False, special=False)  # type: ignore[union-attr]

        pieces = [llm.detokenize([i], special=False) for i in range(llm.n_vocab())]
        _LLAMA_CLASSES[llm] = TokenClasses(pieces, encode)
    return _LLAMA_CLASSES[llm]


def _opens_line(piece: bytes) -> bool:
    """Whether ``piece`` may open a line of prose: it starts (after spaces) with a letter, a
    quote or a new line, is empty (an end-of-turn token) or is a thinking tag."""
    try:
        text = piece.decode("utf-8").lstrip(" \t")
    except UnicodeDecodeError:
        return False
    if text.strip() in (THINK_OPEN, THINK_CLOSE):
        return True  # a thinking model's tags: the thinking is no line of the answer
    return not text or text[0].isalpha() or text[0] in "\"'“‘\n\r"


def _is_emoji(piece: bytes) -> bool:
    return bool(EMOJI.search(piece.decode("utf-8", "ignore")) or _EMOJI_PREFIX.search(piece))


class Avoider:
    """The tokens one answer may not sample next, for the ``avoid`` of its shape."""

    def __init__(self, classes: TokenClasses, avoid: Iterable[str]) -> None:
        self.classes, self.avoid = classes, set(avoid)
        # a phrase ('"great question"'): its ids as written, capitalised and after a space
        self.phrases: list[tuple[int, ...]] = []
        for said in (a[1:-1] for a in self.avoid if a.startswith('"') and classes.encode):
            for form in {said, said.lower(), said[:1].upper() + said[1:]}:
                for text in (form, " " + form):
                    ids = tuple(classes.encode(text))  # type: ignore[misc]
                    if ids and ids not in self.phrases:
                        self.phrases.append(ids)

    def banned(
        self,
        content: str,
        pending: bytes = b"",
        ids: list[int] | None = None,
        asking: bool = False,
    ) -> np.ndarray:
        """Token ids not to sample after ``content`` (the answer's text so far), ``pending``
        being the bytes of a character that is not complete yet and ``ids`` the answer's
        tokens so far (a phrase's last token is banned after the tokens before it);
        ``asking``: the closing question is being written, and may end only with "?"."""
        if not self.avoid and not asking:
            return np.array([], np.intp)  # a closing question's shape: nothing until it is asked
        c, out = self.classes, []
        if asking:
            out.append(c.unasked)
        for phrase in self.phrases:
            before = len(phrase) - 1
            if not before or (ids is not None and tuple(ids[len(ids) - before :]) == phrase[:-1]):
                out.append(np.array(phrase[-1:], np.intp))
        line = content.rsplit("\n", 1)[-1]
        at_start = not line.strip() and not pending
        no_word = not any(ch.isalpha() for ch in line) and not pending
        in_code = content.count("```") % 2 == 1
        if "exclamations" in self.avoid and not in_code:
            out.append(c.bang)
        if "newlines" in self.avoid and not in_code:
            out.append(c.newline)
        if "lists" in self.avoid and not in_code:
            out.append(c.new_item)
            if no_word:
                out.append(c.bullet)
        if "markdown" in self.avoid:
            out.append(c.markup)
            if at_start:
                out.append(c.line_mark)
            if content.endswith("_"):
                out.append(_ids(c.pieces, (b[:1] == b"_" for b in c.pieces)))
        if "emoji" in self.avoid:
            out.append(c.emoji)
            if pending:
                out.append(
                    np.array([i for i in c.continuing if _is_emoji(pending + c.pieces[i])], np.intp)
                )
        return np.concatenate(out) if out else np.array([], np.intp)

    def processor(
        self, state: Callable[[], tuple[str, bytes, list[int], bool] | None]
    ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """A llama.cpp logits processor that bans, at each step, what ``banned`` says for
        ``state()``: the content so far, the pending bytes, the answer's tokens and whether
        the closing question is being written (None: ban nothing now)."""

        def keep(_input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
            now = state()
            if now is not None:
                scores[self.banned(*now)] = -np.inf
            return scores

        return keep


if __name__ == "__main__":
    from llama_cpp import Llama

    llm = Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
    classes = llama_classes(llm)
    kinds = sys.argv[2:] or ["lists", "markdown", "emoji"]
    for where in ("", "Some text.\n"):
        ids = Avoider(classes, kinds).banned(where)
        shown = ", ".join(repr(classes.pieces[i].decode("utf-8", "replace")) for i in ids[:30])
        print(f"after {where!r}: {len(ids)} tokens banned, e.g. {shown}")
