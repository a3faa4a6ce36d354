"""Which section of a completion a token is in (docs/design.md#semantics, "Sections"), on the decoded text's character
offsets as the engine computes them (src/engine/tasks/sections.ts): answer covers the tokens that overlap <answer>...
</answer>, tags included, running to the end when unclosed; think likewise for <think>...</think>; answer wins where a
token touches both; every other token is other. A prompt that ends inside an open tag (a prefilled "<think>") is passed
as `prefill`, so the completion's first tokens count as inside it."""

from __future__ import annotations

import math


def _tag_spans(text: str, open_tag: str, close_tag: str) -> list[tuple[int, float]]:
    spans: list[tuple[int, float]] = []
    start_from = 0
    while True:
        start = text.find(open_tag, start_from)
        if start < 0:
            return spans
        close = text.find(close_tag, start + len(open_tag))
        if close < 0:
            spans.append((start, math.inf))
            return spans
        spans.append((start, close + len(close_tag)))
        start_from = close + len(close_tag)


def _overlaps(t: tuple[int, int], s: tuple[int, float]) -> bool:
    # an empty token (EOS decoded to "") shares no character: it is inside where its position is
    if t[1] <= t[0]:
        return s[0] <= t[0] < s[1]
    return t[0] < s[1] and t[1] > s[0]


def compute_sections(tokens: list[str], prefill: str = "") -> list[str]:
    """The section of each token of a completion given as its tokens' texts (their join is the completion)."""
    text = prefill + "".join(tokens)
    answer = _tag_spans(text, "<answer>", "</answer>")
    think = _tag_spans(text, "<think>", "</think>")
    out = []
    at = len(prefill)
    for tok in tokens:
        span = (at, at + len(tok))
        at += len(tok)
        if any(_overlaps(span, s) for s in answer):
            out.append("answer")
        elif any(_overlaps(span, s) for s in think):
            out.append("think")
        else:
            out.append("other")
    return out


def open_prefill(prompt: str) -> str:
    """The part of a prompt that a completion continues inside: "<think>" when the prompt ends in an open think tag."""
    stripped = prompt.rstrip()
    return "<think>" if stripped.endswith("<think>") else ""


TAGS = ("<think>", "</think>", "<answer>", "</answer>")


def tag_tokens(tokens: list[str], prefill: str = "") -> list[bool]:
    """Whether each token overlaps a tag (<think>, </think>, <answer>, </answer>) of prefill + completion, by character
    offsets, as the engine's reward_decomposition finds them: the format reward's tokens."""
    text = prefill + "".join(tokens)
    spans = []
    for tag in TAGS:
        at = text.find(tag)
        while at >= 0:
            spans.append((at, at + len(tag)))
            at = text.find(tag, at + 1)
    out = []
    at = len(prefill)
    for tok in tokens:
        start, end = at, at + len(tok)
        at = end
        out.append(any(start < b and end > a for a, b in spans))
    return out
