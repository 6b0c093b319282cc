"""When reporting work is due: the panel's progress line and curves, each at most so often and within a budget."""

from __future__ import annotations

import math


class Throttle:
    """Says when work is due: at most every `every` seconds, and rarely enough that its cost stays within `budget`.

    >>> t = Throttle(every=1.0, budget=0.01)
    >>> t.due(0.0), t.done(0.0, cost=0.05), t.due(1.0), t.due(5.0)
    (True, None, False, True)
    """

    def __init__(self, every: float, budget: float):
        if not every >= 0 or not 0 < budget <= 1:
            raise ValueError(f"Expected every >= 0 and 0 < budget <= 1. Received: every={every!r}, budget={budget!r}")
        self.every = every
        self.budget = budget
        self.next = -math.inf
        self.spent = 0.0

    def due(self, now: float) -> bool:
        return now >= self.next

    def done(self, now: float, cost: float) -> None:
        """Record that the work ran at `now` and took `cost` seconds."""
        self.spent += cost
        self.next = now + max(self.every, cost / self.budget)
