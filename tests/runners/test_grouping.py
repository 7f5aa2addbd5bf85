"""Task groups: what one worker runs in order, and what a cluster run refuses (no cluster here)."""

import pytest
from kedro.pipeline import Pipeline, node

from thinkalike.runners.grouping import in_memory_crossings, task_groups


def identity(value):
    return value


def combine(*values):
    return values


def test_a_namespace_is_one_task_when_its_nodes_follow_each_other():
    pipeline = Pipeline(
        [
            node(identity, "corpus", "models.a.weights", name="train", namespace="models.a"),
            node(identity, "models.a.weights", "models.a.store", name="extract", namespace="models.a"),
            node(identity, "corpus", "models.b.weights", name="train", namespace="models.b"),
            node(
                combine,
                ["models.a.store", "models.b.weights"],
                "models.cka.a__b.table",
                name="cka",
                namespace="models.cka.a__b",
            ),
        ]
    )
    groups = task_groups(pipeline)
    assert {name: group.node_names for name, group in groups.items()} == {
        "models.a": ["models.a.train", "models.a.extract"],
        "models.b": ["models.b.train"],
        "models.cka.a__b": ["models.cka.a__b.cka"],
    }
    assert groups["models.cka.a__b"].depends_on == {"models.a", "models.b"}
    assert groups["models.a"].depends_on == set()


def test_namespace_mates_with_other_work_between_them_are_separate_tasks():
    """models.nli: the node making the pairs and the summary reading every copy are two tasks (one task
    would wait on the copies that wait on it)."""
    pipeline = Pipeline(
        [
            node(identity, "params:nli", "models.nli.pairs", name="make_pairs", namespace="models.nli"),
            node(
                identity,
                "models.nli.pairs",
                "models.nli.copy_00.accuracy",
                name="finetune",
                namespace="models.nli.copy_00",
            ),
            node(
                identity, "models.nli.copy_00.accuracy", "models.nli.accuracy", name="summarise", namespace="models.nli"
            ),
            node(identity, "models.nli.accuracy", "models.nli.report", name="report", namespace="models.nli"),
        ]
    )
    groups = task_groups(pipeline)
    assert [group.node_names for group in groups.values()] == [
        ["models.nli.make_pairs"],
        ["models.nli.copy_00.finetune"],
        ["models.nli.summarise", "models.nli.report"],
    ]
    assert list(groups) == ["models.nli", "models.nli.copy_00", "models.nli#2"]
    assert groups["models.nli#2"].depends_on == {"models.nli.copy_00"}


def test_groups_that_would_wait_on_each_other_become_single_node_tasks():
    """x.first → x.second directly, and x.first → y → x.third with x.second → x.third: x waits on y, y on x."""
    nodes = [
        node(identity, "input", "x.one", name="first", namespace="x"),
        node(identity, "x.one", "x.two", name="second", namespace="x"),
        node(identity, "x.one", "y.out", name="node", namespace="y"),
        node(combine, ["x.two", "y.out"], "x.three", name="third", namespace="x"),
    ]
    with pytest.warns(UserWarning, match=r"Namespace 'x' is interrupted by nodes \['y.node'\]"):  # kedro's
        pipeline = Pipeline(nodes)
    groups = task_groups(pipeline)
    assert sorted(groups) == ["x.first", "x.second", "x.third", "y.node"]
    assert groups["x.third"].depends_on == {"x.second", "y.node"}
    assert groups["y.node"].depends_on == {"x.first"}


def test_in_memory_datasets_that_cross_tasks_or_leave_the_run_are_named():
    pipeline = Pipeline(
        [
            node(identity, "corpus", "a.kept", name="one", namespace="a"),
            node(identity, "a.kept", "a.inside", name="two", namespace="a"),
            node(identity, "a.inside", "a.saved", name="three", namespace="a"),
            node(identity, "a.saved", "b.result", name="one", namespace="b"),
        ]
    )
    groups = task_groups(pipeline)
    in_memory = {"a.kept", "a.inside", "b.result"}
    assert in_memory_crossings(pipeline, groups, in_memory.__contains__) == [
        "b.result (a pipeline output held in memory)"
    ]
    in_memory.add("a.saved")
    assert in_memory_crossings(pipeline, groups, in_memory.__contains__) == [
        "a.saved (written in task a, read by node b.one)",
        "b.result (a pipeline output held in memory)",
    ]
    assert in_memory_crossings(pipeline, groups, lambda name: False) == []
