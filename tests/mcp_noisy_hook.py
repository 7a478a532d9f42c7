"""A hook that prints to stdout: the proxy's stdout must still carry nothing but protocol."""

from __future__ import annotations

import sys
from typing import Any


class NoisyHook:
    name = "noisy"

    def __init__(self, word: str = "noise") -> None:
        self.word = word

    def before_tool_call(self, ctx: Any) -> None:
        print(f"{self.word} before {ctx.tool_call.name}")
        sys.stdout.flush()

    def after_tool_call(self, ctx: Any) -> None:
        print(f"{self.word} after {ctx.tool_call.name}")
        sys.stdout.flush()


not_a_hook = object()
