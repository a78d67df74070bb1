"""Simulated users for bench/learning.py: personas with checkable preferences, what they ask,
and how they reply when an answer breaks one of their preferences.

A preference has a checker (a pure function of the answer), the rule as an oracle would state
it, and several complaints in a person's words (never the rule text). Interaction prompts and
held-out evaluation prompts are disjoint (checked at import).

Run alone to check a text against every preference::

    python -m bench.personas "Some answer to check"
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf\u2b50\u2b55\u200d\ufe0f]")
LIST_LINE = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+", re.MULTILINE)
MARKDOWN = re.compile(r"\*\*|__|`|^\s{0,3}#{1,6}\s|^\s*>\s|\[[^\]]+\]\([^)]+\)", re.MULTILINE)


INTERACTION_PROMPTS = (
    "How do I boil an egg?",
    "What is a good name for a cat?",
    "Explain what a black hole is.",
    "How can I sleep better?",
    "What should I cook for dinner tonight?",
    "Why is the sky blue?",
    "Give me tips for learning Spanish.",
    "What is the difference between weather and climate?",
    "How do I start running?",
    "What is photosynthesis?",
    "Recommend a book for a long flight.",
    "How do I make my houseplants happy?",
    "What is a prime number?",
    "How should I prepare for a job interview?",
    "What is the capital of Australia?",
    "How do vaccines work?",
    "Suggest a weekend activity for a rainy day.",
    "How do I write a good email to my boss?",
    "What causes earthquakes?",
    "How can I save money on groceries?",
    "What is the Pythagorean theorem?",
    "How do I clean a cast iron pan?",
    "What is machine learning?",
    "How do I fix a squeaky door?",
    "Tell me about the Roman Empire.",
    "What are good stretches after sitting all day?",
    "How does a refrigerator keep things cold?",
    "What should I pack for a beach trip?",
    "How do I make friends in a new city?",
    "What is inflation?",
    "How do bees make honey?",
    "How can I focus better when I study?",
)
# Evaluation prompts, split once (2026-12-07) by a fixed rule: every prompt any run had scored
# before the split (the first 12 below; every default was chosen on the first 5) and the next 8,
# written with them, are the tuning set; the 20 after them, written the same day before any run
# scored them, are the held-out set. Choices are made on TUNING_PROMPTS; headline numbers come
# from HELDOUT_PROMPTS only (``bench.learning --prompts heldout``, the default).
TUNING_PROMPTS = (
    "How do I make a cup of tea?",
    "What is the moon made of?",
    "How can I be more productive in the morning?",
    "Explain how rain forms.",
    "What is a good gift for my sister?",
    "How do airplanes stay in the air?",
    "What should I know before adopting a dog?",
    "How do I change a flat tire?",
    "What is democracy?",
    "How can I drink more water every day?",
    "Why do leaves change colour in autumn?",
    "How do I start a vegetable garden?",
    "How do I keep bread from going stale?",
    "What is the difference between a lake and a pond?",
    "How do I choose a good password?",
    "Why do dogs wag their tails?",
    "How do I iron a shirt?",
    "What is a mortgage?",
    "How do magnets work?",
    "How do I get rid of ants in the house?",
)
HELDOUT_PROMPTS = (
    "How do I remove a splinter?",
    "What is the difference between a frog and a toad?",
    "How does a touchscreen work?",
    "What should I do if my phone gets wet?",
    "How can I remember names better?",
    "Why do we yawn?",
    "How do I plan a road trip?",
    "What is a glacier?",
    "How do I unclog a sink?",
    "What are the benefits of walking every day?",
    "How does a dishwasher clean dishes?",
    "What is the best way to learn to draw?",
    "How do I sharpen a kitchen knife?",
    "Why do we dream?",
    "How do I write a thank-you note?",
    "What is an allergy?",
    "How do I keep my laptop battery healthy?",
    "What makes a good cover letter?",
    "How do I calm down before a presentation?",
    "How do hot air balloons fly?",
)
EVAL_PROMPTS = TUNING_PROMPTS + HELDOUT_PROMPTS
assert len(set(EVAL_PROMPTS)) == len(EVAL_PROMPTS) == 40, "40 distinct evaluation prompts"
assert not set(INTERACTION_PROMPTS) & set(EVAL_PROMPTS), "eval prompts must be held out"


@dataclass(frozen=True)
class Preference:
    name: str
    check: Callable[[str], bool]
    rule: str  # the oracle's hint: the rule, stated plainly
    complaints: tuple[str, ...]  # what a person says instead


def at_most_words(n: int) -> Preference:
    return Preference(
        f"at_most_{n}_words",
        lambda text: len(text.split()) <= n,
        f"Answer in at most {n} words.",
        (
            "Way too long. I only need the short version.",
            "Can you keep it brief? That was a wall of text.",
            "tl;dr please, I don't have time for all that.",
            "Shorter, please. Just the gist.",
        ),
    )


NO_LISTS = Preference(
    "no_lists",
    lambda text: not LIST_LINE.search(text),
    "Do not use bullet points or numbered lists; write sentences.",
    (
        "Please stop giving me bullet points, just talk to me normally.",
        "I hate lists. Can you say that in a normal paragraph?",
        "Less PowerPoint, more conversation please.",
    ),
)
NO_EMOJI = Preference(
    "no_emoji",
    lambda text: not EMOJI.search(text),
    "Never use emoji.",
    ("Lose the little pictures, please.", "Emoji make this feel childish to me."),
)
ENDS_WITH_QUESTION = Preference(
    "ends_with_question",
    lambda text: text.rstrip().endswith("?"),
    "End every answer with a question back to the user.",
    (
        "You never check back with me. What do you want to know from me?",
        "I like it when you ask me something at the end.",
        "Talk with me, not at me: ask me something back.",
    ),
)
PLAIN_TEXT = Preference(
    "plain_text",
    lambda text: not MARKDOWN.search(text) and not LIST_LINE.search(text),
    "Write plain text without any markdown formatting.",
    (
        "My screen shows all those asterisks and symbols. Just plain words please.",
        "No formatting please, it comes out as junk characters on my end.",
    ),
)


def uses_name(name: str) -> Preference:
    return Preference(
        f"uses_name_{name.lower()}",
        lambda text: re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE) is not None,
        f"Address the user by their name, {name}.",
        (
            f"It's {name}, by the way. You could use my name.",
            f"Hey, I'm {name}! A little more personal, please.",
            f"Call me {name}, it feels friendlier.",
        ),
    )


@dataclass(frozen=True)
class Persona:
    name: str
    preferences: tuple[Preference, ...]
    thanks: tuple[str, ...] = ("Thanks!", "Great, thank you.", "Perfect, that helps.", "ok thanks")
    prompts: tuple[str, ...] = INTERACTION_PROMPTS  # what this user asks
    eval_prompts: tuple[str, ...] = HELDOUT_PROMPTS  # what headline numbers are scored on
    tuning_prompts: tuple[str, ...] = TUNING_PROMPTS  # what choices are made on

    def violated(self, text: str) -> list[Preference]:
        return [p for p in self.preferences if not p.check(text)]

    def compliance(self, text: str) -> float:
        """The share of this persona's preferences the answer meets, in [0, 1]."""
        return 1.0 - len(self.violated(text)) / len(self.preferences)


PERSONAS = {
    p.name: p
    for p in (
        Persona("brief", (at_most_words(30),)),
        Persona("sam", (uses_name("Sam"), at_most_words(60))),
        Persona("prose", (NO_LISTS, PLAIN_TEXT)),
        Persona("curious", (ENDS_WITH_QUESTION,)),
        Persona("calm", (NO_EMOJI, at_most_words(40))),
        Persona("chatty", (ENDS_WITH_QUESTION, NO_LISTS)),
    )
}


@dataclass
class SimulatedUser:
    """Asks tasks and replies to answers the way ``persona`` would; ``rng`` makes it repeatable."""

    persona: Persona
    rng: random.Random = field(default_factory=random.Random)
    move_on: float = 0.3  # chance of saying nothing after a good answer

    def ask(self) -> str:
        return self.rng.choice(self.persona.prompts)

    def reply(self, answer: str) -> str | None:
        """A complaint about one broken preference, thanks, or None (moves on)."""
        broken = self.persona.violated(answer)
        if broken:
            return self.rng.choice(self.rng.choice(broken).complaints)
        if self.rng.random() < self.move_on:
            return None
        return self.rng.choice(self.persona.thanks)

    def oracle(self, answer: str) -> tuple[int, str | None]:
        """(rating, hint) from the checkers and the rules: what a perfect judge would say."""
        broken = self.persona.violated(answer)
        if not broken:
            return 1, None
        return -1, " ".join(p.rule for p in broken)


if __name__ == "__main__":
    import sys

    text = " ".join(sys.argv[1:]) or "- one\n- two"
    for persona in PERSONAS.values():
        bad = [p.name for p in persona.violated(text)]
        print(f"{persona.name:8s} compliance {persona.compliance(text):.2f}  broken: {bad}")
