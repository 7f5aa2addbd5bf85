"""A pipeline cut into tasks for a cluster: one task per namespace group, run in dependency order.

A *task group* is a set of nodes that one worker runs one after the other (with Kedro's
``SequentialRunner``, so nothing inside a namespace changes). Nodes fall into the same group when
they share a namespace (``models.gelu_2l``, ``models.cka.<a>__<b>``,
``models.stitching.<f>__<g>``, ``models.mlem.<m>``, ``models.nli.copy_03`` …) and one reads what the
other writes, directly: the training and the extraction of one model are one task; the NLI summary
nodes in ``models.nli``, which read every copy, are not grouped with the node that makes the copies'
data. A node without a namespace is a task of its own. Should two groups still depend on each other
both ways (A → B → A through a node of another namespace), their nodes run as single-node tasks.

A task may start only when every task that writes one of its inputs has finished: its inputs are
then saved files. An in-memory dataset cannot cross from one worker process to another: a pipeline
in which one does (or in which one is a pipeline output, returned to no one) is refused before any
task runs (:func:`in_memory_crossings`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kedro.pipeline import Node, Pipeline


@dataclass
class TaskGroup:
    """One task: its nodes in topological order and the groups it waits for."""

    name: str
    nodes: list[Node]
    depends_on: set[str] = field(default_factory=set)

    @property
    def node_names(self) -> list[str]:
        return [node.name for node in self.nodes]


def task_groups(pipeline: Pipeline) -> dict[str, TaskGroup]:
    """The pipeline's task groups by name (see the module docstring), each with its dependencies."""
    order = {node: index for index, node in enumerate(pipeline.nodes)}  # Kedro's topological order
    parents = pipeline.node_dependencies
    root = {node: node for node in order}

    def find(node: Node) -> Node:
        while root[node] is not node:
            root[node] = root[root[node]]
            node = root[node]
        return node

    for child, its_parents in parents.items():
        for parent in its_parents:
            if child.namespace and child.namespace == parent.namespace:
                root[find(child)] = find(parent)
    members: dict[Node, list[Node]] = {}
    for node in pipeline.nodes:
        members.setdefault(find(node), []).append(node)
    groups = _named_groups(members.values())
    if _cyclic_groups(groups, parents):
        groups = _split_cycles(groups, parents)
    return _with_dependencies(groups, parents)


def _named_groups(node_lists: Iterable[list[Node]]) -> dict[str, list[Node]]:
    """``namespace`` for the first group of a namespace, ``namespace#2`` … for later ones; a node's own name
    when it has no namespace."""
    named: dict[str, list[Node]] = {}
    for nodes in node_lists:
        base = nodes[0].namespace or nodes[0].name
        name, index = base, 1
        while name in named:
            index += 1
            name = f"{base}#{index}"
        named[name] = nodes
    return named


def _group_of(groups: dict[str, list[Node]]) -> dict[Node, str]:
    return {node: name for name, nodes in groups.items() for node in nodes}


def _group_edges(groups: dict[str, list[Node]], parents: dict[Node, set[Node]]) -> dict[str, set[str]]:
    group_of = _group_of(groups)
    edges: dict[str, set[str]] = {name: set() for name in groups}
    for child, its_parents in parents.items():
        for parent in its_parents:
            if group_of[parent] != group_of[child]:
                edges[group_of[child]].add(group_of[parent])
    return edges


def _cyclic_groups(groups: dict[str, list[Node]], parents: dict[Node, set[Node]]) -> set[str]:
    """Groups on a dependency cycle (Kahn's algorithm: those never freed)."""
    edges = _group_edges(groups, parents)
    waiting = {name: set(deps) for name, deps in edges.items()}
    free = [name for name, deps in waiting.items() if not deps]
    children: dict[str, set[str]] = {name: set() for name in groups}
    for name, deps in edges.items():
        for dep in deps:
            children[dep].add(name)
    done = set()
    while free:
        name = free.pop()
        done.add(name)
        for child in children[name]:
            waiting[child].discard(name)
            if not waiting[child] and child not in done:
                free.append(child)
    return set(groups) - done


def _split_cycles(groups: dict[str, list[Node]], parents: dict[Node, set[Node]]) -> dict[str, list[Node]]:
    """Every group on a cycle becomes single-node groups (a node graph has no cycles, so neither does this)."""
    cyclic = _cyclic_groups(groups, parents)
    split: dict[str, list[Node]] = {}
    for name, nodes in groups.items():
        if name in cyclic:
            split.update({node.name: [node] for node in nodes})
        else:
            split[name] = nodes
    return split


def _with_dependencies(groups: dict[str, list[Node]], parents: dict[Node, set[Node]]) -> dict[str, TaskGroup]:
    edges = _group_edges(groups, parents)
    return {name: TaskGroup(name, nodes, edges[name]) for name, nodes in groups.items()}


def in_memory_crossings(
    pipeline: Pipeline, groups: dict[str, TaskGroup], is_in_memory: Callable[[str], bool]
) -> list[str]:
    """The in-memory datasets a cluster run would lose, one line each: those written in one task and read in
    another, and those that are pipeline outputs (returned by the run to no one on the driver)."""
    writer = {output: name for name, group in groups.items() for node in group.nodes for output in node.outputs}
    problems = []
    for name, group in groups.items():
        for node in group.nodes:
            for dataset in node.inputs:
                if dataset in writer and writer[dataset] != name and is_in_memory(dataset):
                    problems.append(f"{dataset} (written in task {writer[dataset]}, read by node {node.name})")
    problems += [
        f"{dataset} (a pipeline output held in memory)"
        for dataset in sorted(pipeline.outputs())
        if is_in_memory(dataset)
    ]
    return sorted(set(problems))
