"""A variant plus the command line's choices, decided once: the plan, its git sources and its wheels."""
