"""The whole suite: each pytest-xdist worker process computes with one thread per pool (torch's intra-op pool and
the BLAS / OpenMP pools), so the workers, one per core, never oversubscribe the machine (two workers each asking
for every core slowed the stitching tests by more than 5× here)."""

import os


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(1)
        threadpool_limits(limits=1)
