"""A throw-away copy of the project (conf + pyproject) in which real `kedro run`s happen."""

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def tracking_db_template() -> Path:
    """An MLflow database with MLflow's current schema and nothing else (what MLflow makes on its first connection),
    made once per test process: creating one takes ~2 s (alembic's migrations; 0.06 s to open a copy), which the
    suite's ~45 project copies would otherwise each pay."""
    from mlflow import MlflowClient

    folder = Path(tempfile.mkdtemp(prefix="thinkalike-mlflow-template-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}").search_experiments()
    return folder / "mlflow.db"


def make_project_copy(destination: Path, *, tracking_db: bool = True) -> Path:
    """The project's conf and pyproject in ``destination``; with ``tracking_db``, also an empty MLflow database
    (:func:`tracking_db_template`) where conf/base/mlflow.yml puts it. ``tracking_db=False`` for the tests of how a
    project's first run creates (or cannot create) it."""
    if tracking_db:
        shutil.copy(tracking_db_template(), destination / "mlflow.db")
    shutil.copy(PROJECT_ROOT / "pyproject.toml", destination / "pyproject.toml")
    shutil.copy(PROJECT_ROOT / ".telemetry", destination / ".telemetry")
    shutil.copytree(PROJECT_ROOT / "conf", destination / "conf", ignore=shutil.ignore_patterns("local"))
    (destination / "conf" / "local").mkdir()
    (destination / "src").mkdir()  # the package itself is installed (pip install -e .)
    return destination


def run_project(project: Path, env: str = "test", **run_kwargs):
    """One `kedro run` of the project copy, from inside it (the working directory is restored after); returns the
    session's catalog (for loading outputs)."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    with contextlib.chdir(project):
        bootstrap_project(project)
        with KedroSession.create(
            project_path=project, env=env, runtime_params=run_kwargs.pop("runtime_params", None)
        ) as session:
            session.run(**run_kwargs)
            return session.load_context().catalog


AS_RUN = "tiny_project_as_run"  # the folder, beside the tiny project, of its copy as the run left it


@pytest.fixture(scope="session")
def tiny_project(tmp_path_factory):
    """The project copy after one full default run (corpus -> zoo -> activations) with conf/test. Tests may run more
    pipelines in it; a copy of it as the run left it stays beside it (:func:`tiny_project_as_run`)."""
    project = make_project_copy(tmp_path_factory.mktemp("project"))
    catalog = run_project(project)
    shutil.copytree(project, tmp_path_factory.getbasetemp() / AS_RUN)
    return project, catalog


@pytest.fixture(scope="session")
def tiny_project_as_run(tiny_project, tmp_path_factory) -> Path:
    """The tiny project as its run left it, before any test ran more in it (copy it before changing it)."""
    return tmp_path_factory.getbasetemp() / AS_RUN


@pytest.fixture(scope="session")
def grammar_gpt2_dir(tmp_path_factory):
    """A tiny random GPT-2 saved locally, with its own tokenizer trained on the grammar (vocabulary 90):
    a different tokenizer from the zoo's, which keeps the zero-width space as <unk>."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from thinkalike.language.grammar import generate_sentences
    from thinkalike.language.tokenizer import train_tokenizer

    directory = tmp_path_factory.mktemp("gpt2")
    tokenizer = train_tokenizer(generate_sentences(300, seed=7)["text"].tolist(), vocab_size=90)
    tokenizer.save_pretrained(directory)
    config = GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=4,
        vocab_size=len(tokenizer),
        n_positions=64,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(directory, safe_serialization=True)
    return directory
