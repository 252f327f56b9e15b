"""A job's workflow, drawn as SVG on the server: the jobs linked to it and their status.

Why server-side: the dashboard ships no JavaScript, and an SVG made of ``<a>``, ``<rect>`` and
``<text>`` renders, links and scales in every browser (and in a screenshot) as it is.

The component is walked from the job, parents and children alike (one ``job_links`` read per
job), and cut at :data:`MAX_JOBS` jobs: a parent of 10,000 children costs one read of its
links and a page of jobs, never the whole fan-out. One ``get_jobs`` reads every status.
Layers come from the links (a job one below its lowest parent), drawn top to bottom; a
layer wider than :data:`PER_ROW` wraps onto more rows, so a fan-out stays on screen.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from html import escape

from tether._errors import JobNotFound
from tether.stores._contract import Admin

MAX_JOBS = 200
PER_ROW = 8
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 150, 34, 16, 26, 8
DENSE = 40  # more links than this: drawn fainter, so the boxes stay readable


@dataclass
class Graph:
    """The walked part of a job's workflow: nodes (id -> (task, status); status ``gone``:
    pruned since), edges (parent, child), and whether the walk was cut."""

    job_id: int
    nodes: dict[int, tuple[str, str]] = field(default_factory=dict)
    edges: list[tuple[int, int]] = field(default_factory=list)
    cut: bool = False


def walk(store: Admin, job_id: int, limit: int = MAX_JOBS) -> Graph:
    """The connected part of ``job_id``'s workflow, at most ``limit`` jobs, nearest first."""
    graph = Graph(job_id)
    seen = {job_id}
    queue = deque([job_id])
    edges: set[tuple[int, int]] = set()
    while queue:
        current = queue.popleft()
        try:
            links = store.job_links(current)
        except JobNotFound:  # a parent pruned since: listed by its child, gone itself
            continue
        for other, edge in [*((p, (p, current)) for p in links.parents),
                            *((c, (current, c)) for c in links.children)]:
            if other not in seen:
                if len(seen) >= limit:
                    graph.cut = True
                    continue
                seen.add(other)
                queue.append(other)
            edges.add(edge)
    records = {r.id: r for r in store.get_jobs(sorted(seen))}
    for node in sorted(seen):
        record = records.get(node)
        graph.nodes[node] = (record.task, record.status) if record else ("", "gone")
    graph.edges = sorted(edges)
    return graph


def layers(graph: Graph) -> dict[int, int]:
    """Each job's layer: 0 without a parent in the graph, else one below its lowest parent
    (Kahn's order, so any link order works)."""
    parents: dict[int, list[int]] = {n: [] for n in graph.nodes}
    children: dict[int, list[int]] = {n: [] for n in graph.nodes}
    for p, c in graph.edges:
        parents[c].append(p)
        children[p].append(c)
    left = {n: len(ps) for n, ps in parents.items()}
    ready = deque(sorted(n for n, k in left.items() if k == 0))
    layer = dict.fromkeys(graph.nodes, 0)
    while ready:
        node = ready.popleft()
        for child in children[node]:
            layer[child] = max(layer[child], layer[node] + 1)
            left[child] -= 1
            if left[child] == 0:
                ready.append(child)
    return layer


def svg(graph: Graph) -> str:
    """The graph as an inline ``<svg>``: a box per job (class = its status, a link to its
    page, the job itself outlined) and a line per link."""
    by_layer: dict[int, list[int]] = {}
    for node, k in sorted(layers(graph).items()):
        by_layer.setdefault(k, []).append(node)
    at: dict[int, tuple[int, int]] = {}
    row = 0
    width = 0
    for k in sorted(by_layer):
        members = by_layer[k]
        for i, node in enumerate(members):
            x = PAD + (i % PER_ROW) * (BOX_W + GAP_X)
            y = PAD + (row + i // PER_ROW) * (BOX_H + GAP_Y)
            at[node] = (x, y)
            width = max(width, int(x) + BOX_W + PAD)
        row += (len(members) + PER_ROW - 1) // PER_ROW
    height = PAD + row * (BOX_H + GAP_Y) - GAP_Y + PAD
    dense = ' class="dense"' if len(graph.edges) > DENSE else ""  # lighter lines
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="graph"{dense} width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="workflow of job {graph.job_id}"><defs><marker id="arrow" '
           'viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" '
           'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#94a3b8"/></marker></defs>']
    for p, c in graph.edges:
        (x1, y1), (x2, y2) = at[p], at[c]
        out.append(f'<line class="edge" x1="{x1 + BOX_W / 2:g}" y1="{y1 + BOX_H:g}" '
                   f'x2="{x2 + BOX_W / 2:g}" y2="{y2:g}" data-edge="{p}-{c}" '
                   'marker-end="url(#arrow)"/>')
    for node, (task, status) in graph.nodes.items():
        x, y = at[node]
        me = " me" if node == graph.job_id else ""
        label = escape(task if len(task) <= 16 else task[:15] + "…")
        out.append(
            f'<a href="/jobs/{node}"><g class="node {escape(status)}{me}" id="node-{node}" '
            f'data-status="{escape(status)}"><title>job {node} {escape(task)}: '
            f'{escape(status)}</title><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" '
            f'rx="5"/><text x="{x + 8}" y="{y + 14}">#{node} {escape(status)}</text>'
            f'<text class="task" x="{x + 8}" y="{y + 28}">{label}</text></g></a>')
    out.append("</svg>")
    return "".join(out)
