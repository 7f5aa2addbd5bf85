"""The whole suite: each pytest-xdist worker process computes with one thread per pool (torch's intra-op pool and
the BLAS / OpenMP pools), so the workers, one per core, never oversubscribe the machine (two workers each asking
for every core slowed the stitching tests by more than 5× here)."""

import os

# Before any test module imports an HF library (huggingface_hub reads these once, at import): no test may reach a hub.
# tests/cka is collected before the folders whose conftest set them too, and imports transformers on the way.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(1)
        threadpool_limits(limits=1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Every test that uses the suite's full tiny run (``tiny_project``) goes to one worker (``--dist loadgroup``),
    so the run is made once per suite instead of once per worker (~30 s of CPU each time); the group is the
    longest unit of work, so it goes first, while the other workers share the rest. ``tryfirst``: pytest-xdist
    reads the ``xdist_group`` marks in its own ``pytest_collection_modifyitems`` (it appends the group to each
    test's id); a mark added after it does not group anything
    (``tests/test_suite_setup.py``)."""
    grouped = [item for item in items if "tiny_project" in getattr(item, "fixturenames", ())]
    for item in grouped:
        item.add_marker(pytest.mark.xdist_group("tiny_project"))
    chosen = set(map(id, grouped))
    items[:] = grouped + [item for item in items if id(item) not in chosen]
