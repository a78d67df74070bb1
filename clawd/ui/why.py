"""The *why* view: one training sample's answer, each token coloured by its OPD advantage.

The advantage of a token is teacher minus student log-prob: how much more (green) or less (red)
likely the model found that token once it knew the hint taken from your reply. Red words are
what your reply pushed down; green words what it pushed up. A sample without a hint was
trained by its reward alone, so every token moves the same way and is drawn in one colour.

Run alone on a training report (any ``report.json`` under CLAWD_HOME/adapters)::

    python -m clawd.ui.why path/to/report.json [SAMPLE_INDEX]
"""

from __future__ import annotations

from typing import Any

from rich.color import Color
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

NEUTRAL = (48, 48, 56)
DOWN = (200, 40, 50)
UP = (30, 160, 80)


def scale_of(values: list[float]) -> float:
    """The |advantage| that gets full colour: the 95th percentile, so one outlier does not
    wash out every other token."""
    mags = sorted(abs(v) for v in values)
    if not mags:
        return 1.0
    return max(mags[min(len(mags) - 1, int(0.95 * len(mags)))], 1e-6)


def token_style(advantage: float, scale: float) -> Style:
    """Background from red (pushed down) through grey to green (pushed up)."""
    t = max(-1.0, min(1.0, advantage / scale))
    end = UP if t > 0 else DOWN
    rgb = tuple(round(n + (e - n) * abs(t)) for n, e in zip(NEUTRAL, end, strict=True))
    return Style(bgcolor=Color.from_rgb(*rgb), color="white")


def legend(scale: float) -> Text:
    text = Text("pushed down ", style="bold")
    for i in range(-4, 5):
        text.append("  ", style=token_style(i / 4 * scale, scale))
    text.append(" pushed up", style="bold")
    text.append(f"   (full colour at ±{scale:.2f} nats)", style="dim")
    return text


def shown(piece: str) -> str:
    """A token as printed: newlines kept, and visible when the token is only whitespace."""
    return piece.replace("\n", "↵\n") if piece.strip() or "\n" in piece else piece or "·"


def why_text(sample: dict[str, Any]) -> Text:
    """The answer with each token coloured by its OPD advantage (or by the reward alone), the
    tokens decoding forced for a memory underlined."""
    tokens = sample.get("tokens") or []
    adv = sample.get("opd_advantage")
    forced = set(sample.get("forced") or [])  # underlined: learned as the memories ask
    text = Text()
    if adv is None:
        reward = sample.get("reward") or 0.0
        styles = [token_style(reward, 1.0) if reward else Style(color="default")] * len(tokens)
    else:
        scale = scale_of(adv)
        styles = [token_style(a, scale) for a in adv]
    for i, (piece, style) in enumerate(zip(tokens, styles, strict=False)):
        text.append(shown(piece), style=style + Style(underline=True) if i in forced else style)
    return text


def extremes(sample: dict[str, Any], n: int = 5) -> tuple[list, list]:
    """The ``n`` most pushed-down and most pushed-up tokens as (token, advantage)."""
    adv = sample.get("opd_advantage") or []
    pairs = [(t, a) for t, a in zip(sample.get("tokens") or [], adv, strict=False) if t.strip()]
    down = sorted(pairs, key=lambda p: p[1])[:n]
    up = sorted(pairs, key=lambda p: -p[1])[:n]
    return [p for p in down if p[1] < 0], [p for p in up if p[1] > 0]


def summary(sample: dict[str, Any], version: str) -> Text:
    text = Text()
    text.append(f"Why adapter {version} learned from sample {sample['sample_id']}", style="bold")
    text.append(f"   {sample.get('kind')} · reward {sample.get('reward')}\n", style="dim")
    if sample.get("hint"):
        text.append("What your reply said should change: ", style="bold")
        text.append(f"“{sample['hint']}”\n", style="italic cyan")
        text.append_text(legend(scale_of(sample["opd_advantage"] or [])))
        down, up = extremes(sample)
        if down:
            text.append("\nmost pushed down: ", style="bold red")
            text.append("  ".join(f"{t.strip()!r} {a:+.2f}" for t, a in down))
        if up:
            text.append("\nmost pushed up:   ", style="bold green")
            text.append("  ".join(f"{t.strip()!r} {a:+.2f}" for t, a in up))
    else:
        direction = "up" if (sample.get("reward") or 0) > 0 else "down"
        text.append(
            f"No hint: your reply only said good or bad, so the whole answer was pushed "
            f"{direction} (reward {sample.get('reward')}).",
            style="italic",
        )
    forced = sample.get("forced") or []
    if forced:
        words = "".join(sample["tokens"][i] for i in forced if i < len(sample["tokens"]))
        text.append("\nwritten as your memories ask (underlined, learned as written): ")
        text.append(repr(words.strip()), style="underline")
    return text


class WhyScreen(ModalScreen[None]):
    """Full-screen why view for one sample of a training report."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Back"),
        Binding("n", "step(1)", "Next sample"),
        Binding("p", "step(-1)", "Previous sample"),
    ]

    def __init__(self, report: dict[str, Any], index: int = 0) -> None:
        super().__init__()
        self.report, self.index = report, index

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="why"):
            yield Static(id="why-summary")
            yield Static(id="why-tokens")
        yield Footer()

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        samples = self.report.get("samples") or []
        if not samples:
            self.query_one("#why-summary", Static).update("This run kept no samples.")
            return
        sample = samples[self.index % len(samples)]
        self.query_one("#why-summary", Static).update(summary(sample, self.report["version"]))
        self.query_one("#why-tokens", Static).update(why_text(sample))
        self.sub_title = f"sample {self.index % len(samples) + 1} of {len(samples)}"

    def action_step(self, delta: int) -> None:
        self.index += delta
        self.show()


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    from textual.app import App

    report = json.loads(Path(sys.argv[1]).read_text())
    index = int(sys.argv[2]) if len(sys.argv) > 2 else 0

    class WhyApp(App):
        def on_mount(self) -> None:
            self.push_screen(WhyScreen(report, index), callback=lambda _: self.exit())

    WhyApp().run()
