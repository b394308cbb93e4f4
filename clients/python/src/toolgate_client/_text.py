"""Text the adapters give the model when toolgate did not let a call run."""

from __future__ import annotations

from .errors import NotRun


def denial_text(tool: str, error: NotRun) -> str:
    """What the model is told: the tool, the outcome's code (`denied`, `expired`, ...) and the reason."""
    return f"The call to `{tool}` was not run: {error.code}: {error.reason or 'no reason given'}"
