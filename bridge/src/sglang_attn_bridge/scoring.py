"""`Scoring`: how a call turns q·k into attention weights (scale, causal mask, sliding window, softcap), one record.

Built once per call by `custom_op.attention` and handed on whole to the forward selection, the launchers and sglang's
kernel. Only the torch.library ops take it flat (a custom op's arguments are primitives): `op_args` and
`from_op_args` are the one place that packs and unpacks it.
"""

from __future__ import annotations

from typing import NamedTuple


class Scoring(NamedTuple):
    """scale multiplies q·k; causal masks keys after the query (aligned bottom-right); `window` in sglang's
    convention (query i sees key j iff i - j <= window), None for none; `softcap` cap * tanh(s / cap), 0.0 for
    none. The fields hold those normalized types (`of` makes them from a caller's values). A named tuple, like
    custom_op.Sequences: the eager route builds one per call, and it costs no more than the tuple it names; it is
    hashable, so it may sit in cache keys."""

    scale: float
    causal: bool = True
    window: int | None = None
    softcap: float = 0.0

    @classmethod
    def of(cls, scale, causal=True, window=None, softcap=None) -> Scoring:
        """From a caller's values: softcap None or 0 for none, window None for none."""
        return cls(float(scale), bool(causal), None if window is None else int(window), float(softcap or 0.0))

    def op_args(self) -> tuple[float, bool, int, float]:
        """The custom ops' flat scoring arguments (scale, causal, window, softcap), window -1 for none."""
        return self.scale, self.causal, -1 if self.window is None else self.window, self.softcap

    @classmethod
    def from_op_args(cls, scale: float, causal: bool, window: int, softcap: float) -> Scoring:
        """The inverse of `op_args`."""
        return cls(scale, causal, None if window < 0 else window, softcap)
