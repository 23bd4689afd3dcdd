"""The one exception type the bridge raises for inputs it will not compute.

A subclass of NotImplementedError and ValueError so callers that catch either keep working; the message always says
what was asked for and which attention implementation does support it.
"""


class BridgeUnsupported(NotImplementedError, ValueError):
    """An input or feature the bridge refuses rather than computing something else."""
