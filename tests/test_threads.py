"""One thread policy for a run: THINKALIKE_THREADS (default 1) for torch and the BLAS pools, restored after."""

import pytest
import torch
from threadpoolctl import threadpool_info

from thinkalike.hooks import BadParameter, ThreadPolicyHooks
from thinkalike.threads import DEFAULT_THREADS, thread_policy


def test_the_policy_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("THINKALIKE_THREADS", raising=False)
    assert thread_policy() == DEFAULT_THREADS == 1
    monkeypatch.setenv("THINKALIKE_THREADS", "2")
    assert thread_policy() == 2
    assert thread_policy("auto") is None and thread_policy(" 3 ") == 3
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(ValueError, match="THINKALIKE_THREADS: expected a positive number of threads or 'auto'"):
            thread_policy(bad)


def test_a_run_holds_the_policy_and_restores_the_pools_after(monkeypatch):
    monkeypatch.setenv("THINKALIKE_THREADS", "1")
    before_torch, before_blas = torch.get_num_threads(), [pool["num_threads"] for pool in threadpool_info()]
    hooks = ThreadPolicyHooks()
    hooks.before_pipeline_run({}, None, None)
    try:
        assert torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    finally:
        hooks.after_pipeline_run({}, {}, None, None)
    assert torch.get_num_threads() == before_torch
    assert [pool["num_threads"] for pool in threadpool_info()] == before_blas
    monkeypatch.setenv("THINKALIKE_THREADS", "none")
    with pytest.raises(BadParameter, match="THINKALIKE_THREADS"):
        hooks.before_pipeline_run({}, None, None)
