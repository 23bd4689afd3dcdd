"""A plain-text table that reads the same in a terminal and as markdown (a pull request body)."""

from __future__ import annotations


def table(headers: list, rows: list) -> str:
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"

    sep = "| " + " | ".join("-" * w for w in widths) + " |"
    return "\n".join([line(cells[0]), sep, *map(line, cells[1:])]) + "\n"
