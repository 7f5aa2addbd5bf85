"""The ``scaling`` pipeline on a tiny GPT-NeoX family (three sizes, the largest off-trend, and its twin): the cka
pipeline computes the family's pairs, the node's tables equal the analysis of the saved CKA tables, and the
section adapts to (or names what is wrong with) the models configured."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.pipelines.builders import build_pipelines, has_configuration_error
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.run_settings import RunSettings

FAMILY_ZOO = {
    "zoo": {
        "baseline_margin": 0.1,
        "training": {
            "steps": 60,
            "batch_size": 16,
            "learning_rate": 5.0e-3,
            "warmup_steps": 6,
            "eval_every": 30,
            "eval_batches": 2,
        },
        "models": {
            name: {
                "family": "hf",
                "seed": 0,
                "architecture": {
                    "model_type": "gpt_neox",
                    "hidden_size": width,
                    "num_hidden_layers": depth,
                    "num_attention_heads": heads,
                    "intermediate_size": 2 * width,
                    "rotary_pct": 0.5,
                },
            }
            for name, width, depth, heads in [
                ("fam_a", 16, 2, 2),
                ("fam_b", 24, 3, 3),
                ("fam_c", 32, 4, 2),
                ("fam_c_twin", 32, 4, 4),
            ]
        },
    }
}


def _family_project(root: Path) -> Path:
    project = make_project_copy(root)
    (project / "conf" / "test" / "parameters_zoo.yml").write_text(yaml.safe_dump(FAMILY_ZOO))
    cka = yaml.safe_load((project / "conf" / "test" / "parameters_cka.yml").read_text())
    cka["cka"]["pairs"] = {"intra": True}
    cka["cka"]["groups"] = {}
    cka["cka"]["measures"] = (
        None  # the family's CKA is what scaling reads; the measures are tested in test_cka_pipeline
    )
    (project / "conf" / "test" / "parameters_cka.yml").write_text(yaml.safe_dump(cka))
    return project


def test_the_family_is_resolved_and_its_pairs_are_computed(tmp_path):
    project = _family_project(tmp_path)
    built = build_pipelines(configured_parameters(project, "test"))
    # the summary and the node that saves its section's numbers (scaling_findings)
    assert [node.name for node in built["scaling"].nodes] == [
        "models.scaling.summarise_scaling",
        "models.scaling.collect_scaling_findings",
    ]
    tables = {name for name in built["scaling"].inputs() if name.endswith("cka_table")}
    assert len(tables) == 4 + 6  # each of the 4 with itself, every pair of them
    assert tables <= set(built["cka"].all_outputs())


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_scaling_node_answers_from_the_saved_cka_tables(tmp_path):
    from thinkalike.pipelines.scaling.plan import scaling_plan
    from thinkalike.pipelines.scaling.schema import validate_scaling
    from thinkalike.scaling.analysis import analyse_family

    project = _family_project(tmp_path)
    catalog = run_project(project, pipeline_names=["corpus", "zoo", "activations", "cka", "scaling"])
    members = catalog.load("scaling_members")
    summary = catalog.load("scaling_summary")
    assert list(members["model"]) == ["fam_a", "fam_b", "fam_c", "fam_c_twin"]
    assert list(members["role"]) == ["member"] * 3 + ["twin"]
    assert (
        members.set_index("model").loc["fam_c", "d_head"] == 16 and members.set_index("model").loc["fam_c", "off_trend"]
    )
    assert summary["twins"][0]["off_trend"] == "fam_c" and summary["twins"][0]["twin"] == "fam_c_twin"
    # the node's answer is the analysis of the tables the cka pipeline saved
    parameters = configured_parameters(project, "test")
    plan = scaling_plan(RunSettings(parameters))
    tables = {}
    for a, b in plan.pairs():
        for first, second in ((a, b), (b, a)):
            name = f"models.cka.{first}__{second}.cka_table"
            if catalog.exists(name):
                tables[(first, second)] = catalog.load(name)
    expected = analyse_family(
        tables, plan.family, plan.architectures, plan.twins, validate_scaling(parameters["scaling"]).settings()
    )
    pd.testing.assert_frame_equal(members, expected.members)
    assert summary["robust_z"] == pytest.approx(expected.summary["robust_z"])
    assert summary["twins"] == expected.summary["twins"]
    assert (project / "data" / "08_reporting" / "scaling" / "scaling.png").exists()


def test_the_section_adapts_and_names_what_is_wrong(tmp_path):
    project = make_project_copy(tmp_path)
    parameters = configured_parameters(project, "test")
    built = build_pipelines(parameters)
    assert len(built["scaling"].nodes) == 0  # conf/test has one GPT-NeoX model: no family, nothing to run
    assert not has_configuration_error(built["cka"])
    broken = {**parameters, "scaling": {**parameters["scaling"], "family": ["neox_xs", "gelu_1l", "nowhere"]}}
    built = build_pipelines(broken)
    assert has_configuration_error(built["scaling"])
    with pytest.raises(ParameterError, match=r"scaling.family / scaling.twins name model\(s\) \['nowhere'\]"):
        built["scaling"].nodes[0].func()  # the node stands for the error, and raises it
    assert not has_configuration_error(built["cka"])  # a broken scaling section does not stop the cka pipeline
    too_few = {**parameters, "scaling": {**parameters["scaling"], "family": ["neox_xs", "gelu_1l"]}}
    with pytest.raises(ParameterError, match="scaling.family needs at least 3"):
        build_pipelines(too_few)["scaling"].nodes[0].func()


def test_an_unknown_key_is_named_and_conf_base_sets_every_key(tmp_path):
    from thinkalike.pipelines.scaling.plan import check_scaling
    from thinkalike.pipelines.scaling.schema import SCALING_KEYS

    parameters = configured_parameters(make_project_copy(tmp_path), "base")
    assert set(parameters["scaling"]) == set(SCALING_KEYS)  # conf/base's file documents every key
    check_scaling(RunSettings(parameters))
    misspelt = {**parameters, "scaling": {**parameters["scaling"], "familly": ["neox_2l"]}}
    with pytest.raises(ParameterError, match=r"^scaling\.familly: unknown parameter \(the section's keys: family, "):
        check_scaling(RunSettings(misspelt))
