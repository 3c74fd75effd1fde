"""Cycle finding in small directed graphs (superiority relations, taxonomies)."""

from __future__ import annotations

__all__ = ["find_cycle"]


def find_cycle(succ: dict[str, list[str]]) -> list[str]:
    """A cycle ``[a, b, .., a]`` in a directed graph, or ``[]``; iterative DFS (no recursion limit)."""
    colour: dict[str, int] = {}
    for start in succ:
        if colour.get(start):
            continue
        path, stack = [start], [iter(succ.get(start, ()))]
        colour[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = 2
                stack.pop()
            elif colour.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                stack.append(iter(succ.get(nxt, ())))
    return []
