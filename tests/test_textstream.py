import copy

import pytest

from clawd.serving.textstream import Detokenizer, StopScanner, ThinkingSplitter, split_thinking


def test_detokenizer_never_splits_a_character() -> None:
    d = Detokenizer()
    data = "héllo 🙂".encode()
    out = "".join(d.push(data[i : i + 1]) for i in range(len(data))) + d.flush()
    assert out == "héllo 🙂"
    assert Detokenizer().push("🙂".encode()[:2]) == ""


def test_an_invalid_byte_does_not_hold_back_what_follows() -> None:
    """Once one stray byte (easy at temperature 2) stalled the stream: no text, no stop."""
    d = Detokenizer()
    assert d.push(b"\xff") == "\ufffd"
    assert d.push(b"ok END") == "ok END"
    partial = Detokenizer()
    assert partial.push(b"a\xe2\x82") == "a" and partial.push(b"b") == "\ufffdb"
    copied = copy.deepcopy(partial)  # the engine peeks on copies
    assert copied.push("🙂".encode()) == partial.push("🙂".encode()) == "🙂"


def test_stop_strings_across_pieces() -> None:
    s = StopScanner(["END"])
    assert s.push("hello E") == "hello "  # "E" might start "END": held back
    assert s.push("N") == ""
    assert s.push("D and more") == "" and s.stopped
    s = StopScanner(["END"])
    assert s.push("hello E") + s.push("ast") + s.flush() == "hello East"
    assert not s.stopped


def test_no_stops_passes_everything() -> None:
    s = StopScanner([])
    assert s.push("abc") == "abc" and s.flush() == ""


@pytest.mark.parametrize(
    "text,reasoning,content",
    [
        ("<think>\nplan</think>\n\nHello", "\nplan", "Hello"),
        ("  <think>x</think>y", "x", "y"),
        ("Hello <think>not thinking</think>", "", "Hello <think>not thinking</think>"),
        ("<think>never closed", "never closed", ""),
        ("<thi", "", "<thi"),
        ("", "", ""),
    ],
)
def test_split_thinking(text: str, reasoning: str, content: str) -> None:
    assert split_thinking(text) == (reasoning, content)


def test_thinking_splitter_streamed_one_char_at_a_time() -> None:
    text = "<think>a</th>b</think>\n\nanswer"
    s = ThinkingSplitter()
    parts = [s.push(ch) for ch in text] + [s.flush()]
    assert "".join(r for r, _ in parts) == "a</th>b"
    assert "".join(c for _, c in parts) == "answer"


def test_a_model_without_a_thinking_tag_holds_nothing_back() -> None:
    """'<' may begin '<think>' only for a model that has the tag; for any other it is text."""
    held, free = ThinkingSplitter(), ThinkingSplitter(enabled=False)
    assert held.push("<") == ("", "") and held.push("b>") == ("", "<b>")
    assert free.push("<") == ("", "<") and free.push("think>x") == ("", "think>x")
    assert free.push("   ") == ("", "   ")
