"""``conf/<env>/mlflow.yml``'s block as typed settings (thinkalike.run_record.tracking.tracking_settings): pydantic
checks it, and each error names the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from thinkalike.run_record.tracking import TrackingSettings, tracking_settings

ROOT = Path(__file__).resolve().parents[1]


def test_the_base_file_and_the_bare_block_give_the_settings():
    base = yaml.safe_load((ROOT / "conf" / "base" / "mlflow.yml").read_text())
    assert tracking_settings(base) == tracking_settings(base["mlflow"]) == TrackingSettings(**base["mlflow"])
    assert tracking_settings(None) == TrackingSettings()


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"tracking_uri": ""}, r"^mlflow\.tracking_uri: String should have at least 1 character"),
        ({"experiment": 3}, r"^mlflow\.experiment: Input should be a valid string \(got 3\)"),
        ({"enabled": "yes"}, r"^mlflow\.enabled: Input should be a valid boolean"),
        ({"probe_timeout_s": 0}, r"^mlflow\.probe_timeout_s: Input should be greater than 0"),
        ({"trackinguri": "x"}, r"^mlflow\.trackinguri: unknown parameter \(mlflow\.yml\)$"),
    ],
)
def test_a_bad_key_is_named(block, message):
    with pytest.raises(ValueError, match=message):
        tracking_settings({"mlflow": block})
