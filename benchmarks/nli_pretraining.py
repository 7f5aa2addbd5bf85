"""NLI encoder recipes: how well fine-tuned copies learn the task from encoders pretrained each way.

Not a speed benchmark: the ``nli`` pipeline's default recipe (whole-pair rows, hypotheses masked
at 0.5 and premises at 0.1 — XLM's translation LM on sentence pairs) against BERT's uniform 15 %
on the same rows, at equal pretraining steps; and the class head's initial scale (0.3 against
0.02). For each variant the encoder is pretrained with the pipeline's own node
(:func:`thinkalike.pipelines.nli.nodes.pretrain_encoder`), then ``--copies`` copies are
fine-tuned (:func:`~thinkalike.pipelines.nli.nodes.finetune_copy`) on the pipeline's pairs, and
their in-distribution test accuracy, OOD non-entailed / entailed accuracy and final training
loss are printed, with the CPU seconds of each stage.

Reads the corpus (``train_sequences``, ``heldout_sequences``, ``tokenizer``) of the project's
last run in ``conf/base`` (run ``kedro run --pipelines corpus`` first) and the ``nli`` parameters.

Run: ``python benchmarks/nli_pretraining.py`` (about 5 minutes on one CPU core).
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from pathlib import Path

import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VARIANTS = {  # name: (premise, hypothesis) masking probability of pair rows, head_init_std
    "hypothesis-weighted 0.1/0.5, head 0.3 (default)": (0.1, 0.5, 0.3),
    "uniform 0.15, head 0.3": (0.15, 0.15, 0.3),
    "hypothesis-weighted 0.1/0.5, head 0.02": (0.1, 0.5, 0.02),
}


def project_inputs(project: Path) -> tuple[dict, dict, object, dict]:
    """The corpus datasets and the ``nli`` parameters of ``project`` (conf/base)."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(project)
    with KedroSession.create(project_path=project) as session:
        catalog = session.load_context().catalog
        return (
            catalog.load("train_sequences"),
            catalog.load("heldout_sequences"),
            catalog.load("tokenizer"),
            catalog.load("params:nli"),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=2, help="fine-tuned copies per variant")
    parser.add_argument("--project", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()

    from thinkalike.pipelines.nli.nodes import (
        finetune_copy,
        make_pairs,
        pretrain_encoder,
    )

    train, heldout, tokenizer, base = project_inputs(args.project)
    base = {**base, "progress": False, "threads": 1}
    pairs = make_pairs(base)
    rows = []
    encoders = {}
    for variant, (premise, hypothesis, head_std) in VARIANTS.items():
        nli = copy.deepcopy(base)
        nli["encoder"]["pair_text"].update(premise_mask_probability=premise, hypothesis_mask_probability=hypothesis)
        nli["finetune"]["head_init_std"] = head_std
        key = (premise, hypothesis)
        started = time.process_time()
        if key not in encoders:
            weights, config, curve = pretrain_encoder(train, heldout, tokenizer, nli)
            encoders[key] = (weights, config, float(curve["heldout_loss"].iloc[-1]), time.process_time() - started)
        weights, config, heldout_loss, pretrain_s = encoders[key]
        for index in range(args.copies):
            started = time.process_time()
            _, _, curve, table, _ = finetune_copy(
                pairs, tokenizer, weights, config, nli, name=f"copy_{index:02d}", index=index
            )
            accuracy = table.set_index(["split", "subcase", "label"])["accuracy"]
            rows.append(
                {
                    "variant": variant,
                    "copy": index,
                    "pretrain_cpu_s": round(pretrain_s, 1),
                    "heldout_mlm_loss": round(heldout_loss, 3),
                    "finetune_cpu_s": round(time.process_time() - started, 1),
                    "final_train_loss": round(float(curve["train_loss"].iloc[-1]), 3),
                    "test_accuracy": accuracy[("test", "all", "all")],
                    "ood_non_entailed": accuracy[("ood", "all", "non_entailed")],
                    "ood_entailed": accuracy[("ood", "all", "entailed")],
                }
            )
            print("  ".join(f"{key} {value}" for key, value in rows[-1].items()), flush=True)
    table = pd.DataFrame(rows)
    print()
    print(
        table.groupby("variant", sort=False)[["test_accuracy", "ood_non_entailed", "ood_entailed", "final_train_loss"]]
        .agg(["min", "max"])
        .to_string()
    )


if __name__ == "__main__":
    main()
