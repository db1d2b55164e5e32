"""Train the INFRA family model (forkflow/triage/infra_model.json) on the field corpus's train part.

    python benchmarks/train_infra_model.py            # writes the model, prints its figures
    python benchmarks/train_infra_model.py --check    # exit 1 when the shipped model is not the
                                                      # one the train part gives now

Only `real_corpus.load_field("train")` is read: the held-aside third and the fresh batches never
reach the model (their figures come from `bench_triage.py --heldout --only-real`).  Each failure
is read as the CLI reads a job's log (`signature_of`), its family by the rules is what `classify`
would say without the model, and the threshold is chosen by cross-validation over causes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forkflow.testing import real_corpus  # noqa: E402
from forkflow.triage import infra_model  # noqa: E402
from forkflow.triage.classify import model_speaks_for, rule_family  # noqa: E402
from forkflow.triage.signature import SIGNATURE_VERSION, signature_of  # noqa: E402

LABELS = {"infra-machine": "machine", "infra-env": "environment"}


def build() -> infra_model.InfraModel:
    cases = real_corpus.load_field("train")
    sigs = [signature_of(c.text) for c in cases]
    by_rules = [(f.value if (f := rule_family(s)) is not None else "none") for s in sigs]
    return infra_model.train([infra_model.words(s) for s in sigs], [LABELS.get(c.klass, "none") for c in cases],
                             [c.cause for c in cases], by_rules, [model_speaks_for(s) for s in sigs],
                             SIGNATURE_VERSION, [c.id for c in cases])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped model, write nothing")
    args = ap.parse_args()
    model = build()
    if args.check:
        shipped = infra_model.shipped()
        same = (shipped is not None and shipped.train_digest == model.train_digest
                and shipped.signature_version == model.signature_version
                and shipped.threshold == model.threshold)
        print("the shipped model is the train part's" if same else
              "the shipped model is not the train part's: run benchmarks/train_infra_model.py")
        return 0 if same else 1
    infra_model.MODEL_PATH.write_text(model.to_json() + "\n", encoding="utf-8")
    print(f"{len(model.vocab)} words, threshold {model.threshold}, cross-validated over causes: {model.figures}")
    print(f"written to {infra_model.MODEL_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
