"""A learned reader of the environment faults no rule names.

The rules of `classify` name the runner and environment faults they know by their words.  Real
logs show many more: a wheel that installs the wrong build, an extension built for another torch,
a toolkit of another release, said through an error the rules cannot tell from a code bug.  This
model reads the words of a failure's signature and excerpt (lowercase, numbers dropped, words of
three letters or more: tf-idf, sublinear, unit length) and gives machine, environment and neither
a probability from a multinomial logistic regression, for exceptions and generic errors only
(`KINDS`).  It is trained on the field corpus's train part only (real CI failures from public
threads, each labelled with its class from the fix: `benchmarks/train_infra_model.py`).
`classify` follows it only where no rule spoke, for the environment family only (`CALLS`), and
only at or above `threshold`: the lowest probability at which, cross-validated over the train
part's causes (no cause in two folds), its own calls were right nine times in ten.  A wrong
INFRA call costs one rerun (an INFRA failure lands nothing until the same tests pass again),
never a landed answer.

Reading is linear in the text (one regular expression of one character class, a dictionary
lookup per word); the excerpt is capped before it gets here.  The file is data written by the
trainer, loaded once; without it the rules decide alone.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from forkflow.triage.models import FailureKind, InfraFamily, Signature

MODEL_PATH = Path(__file__).with_name("infra_model.json")
CLASSES = ("machine", "environment", "none")
# the kinds the model speaks for: an error the rules know only by its words.  Cross-validated over
# the train part's causes, its calls on the others were more often wrong than right (a device out
# of memory, a timeout and the runtime's errors have rules of their own that say when they are the
# machine's; a compiler's error or a crash is the build's unless a rule names its toolchain).
KINDS = frozenset({FailureKind.EXCEPTION, FailureKind.GENERIC})
# the families it calls: environment only.  Runner faults have rules of their own, and
# cross-validated the model's machine calls where no rule spoke were right about half the time
# (its `machine` class still draws machine-like texts away from `environment`)
CALLS = ("environment",)
_NUMBERS = re.compile(r"0x[0-9a-f]+|\d+")
_WORD = re.compile(r"[a-z_]{3,}")
_MAX_CHARS = 64_000   # of a failure's text read (the excerpt is already capped)
_MAX_WORD = 40


def words(sig: Signature) -> list[str]:
    """The words the model reads of a failure: its excerpt, its signature text and its kind."""
    text = (sig.excerpt[-_MAX_CHARS:] + "\n" + sig.text[:_MAX_CHARS]).lower()
    return [w[:_MAX_WORD] for w in _WORD.findall(_NUMBERS.sub(" ", text))] + ["kind_" + sig.kind.value.lower()]


def train_ids_digest(ids: Sequence[str]) -> str:
    """Which failures a model was trained on, as one digest of their ids (order-free)."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def tfidf(ws: Sequence[str], vocab: dict[str, int], idf: Sequence[float]) -> dict[int, float]:
    """The words' vector as the model reads it: sublinear counts of the known words times their
    idf, at unit length (index -> value).  Training and reading share it."""
    counts = Counter(vocab[w] for w in ws if w in vocab)
    vec = {i: (1.0 + math.log(n)) * idf[i] for i, n in counts.items()}
    norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
    return {i: v / norm for i, v in vec.items()}


@dataclass(frozen=True)
class InfraModel:
    """The model as read (plain Python: a read costs a dictionary lookup and three sums a word)."""

    vocab: dict[str, int]
    idf: tuple[float, ...]                   # (V,)
    weights: tuple[tuple[float, ...], ...]   # (3, V), rows in CLASSES order
    bias: tuple[float, ...]                  # (3,)
    threshold: float
    signature_version: int
    train_digest: str = ""
    figures: dict[str, float] | None = None  # cross-validated, for people

    def _vector(self, ws: Sequence[str]) -> dict[int, float]:
        return tfidf(ws, self.vocab, self.idf)

    def probabilities(self, ws: Sequence[str]) -> tuple[float, ...]:
        vec = self._vector(ws)
        z = [b + sum(row[i] * v for i, v in vec.items()) for row, b in zip(self.weights, self.bias)]
        top = max(z)
        e = [math.exp(x - top) for x in z]
        total = sum(e)
        return tuple(x / total for x in e)

    def read(self, sig: Signature) -> tuple[InfraFamily | None, float, tuple[str, ...]]:
        """The family the model calls at its threshold (None: neither, or not sure enough), its
        probability and the words that weighed most for it."""
        ws = words(sig)
        p = self.probabilities(ws)
        best = max(range(len(p)), key=p.__getitem__)
        if CLASSES[best] not in CALLS or p[best] < self.threshold:
            return None, p[best], ()
        pull = {i: self.weights[best][i] * v for i, v in self._vector(ws).items()}
        inv = {i: w for w, i in self.vocab.items()}
        top = tuple(inv[i] for i in sorted(pull, key=lambda i: -pull[i])
                    if pull[i] > 0 and not inv[i].startswith("kind_"))[:3]
        return InfraFamily(CLASSES[best]), p[best], top

    def to_json(self) -> str:
        words_by_index = sorted(self.vocab, key=self.vocab.__getitem__)
        return json.dumps({
            "what": "INFRA family model (forkflow.triage.infra_model); written by benchmarks/train_infra_model.py",
            "signature_version": self.signature_version, "threshold": self.threshold,
            "train_digest": self.train_digest, "figures": self.figures or {},
            "classes": list(CLASSES), "words": words_by_index,
            "idf": [round(float(x), 5) for x in self.idf],
            "weights": [[round(float(x), 5) for x in row] for row in self.weights],
            "bias": [round(float(x), 5) for x in self.bias],
        }, indent=0)

    @classmethod
    def from_json(cls, text: str) -> InfraModel:
        d = json.loads(text)
        if tuple(d["classes"]) != CLASSES:
            raise ValueError(f"the model's classes are {d['classes']}, not {list(CLASSES)}")
        vocab = {w: i for i, w in enumerate(d["words"])}
        weights = tuple(tuple(float(x) for x in row) for row in d["weights"])
        idf = tuple(float(x) for x in d["idf"])
        bias = tuple(float(x) for x in d["bias"])
        if (len(weights) != len(CLASSES) or any(len(row) != len(vocab) for row in weights)
                or len(idf) != len(vocab) or len(bias) != len(CLASSES)):
            raise ValueError("the model's weights do not match its words")
        return cls(vocab, idf, weights, bias, float(d["threshold"]), int(d["signature_version"]),
                   str(d.get("train_digest", "")), dict(d.get("figures") or {}))


@functools.cache
def shipped() -> InfraModel | None:
    """The model shipped with forkflow, or None when its file is not there."""
    try:
        return InfraModel.from_json(MODEL_PATH.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


# ----- training (benchmarks/train_infra_model.py) ---------------------------------------------

def _fit(docs: Sequence[Sequence[str]], labels: Sequence[str], c: float, min_df: int = 2
         ) -> tuple[dict[str, int], tuple[float, ...], tuple[tuple[float, ...], ...], tuple[float, ...]]:
    import numpy as np
    from scipy import optimize, sparse

    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    vocab = {w: i for i, w in enumerate(sorted(w for w, n in df.items() if n >= min_df))}
    n = len(docs)
    idf = [math.log((1 + n) / (1 + df[w])) + 1.0 for w in sorted(vocab, key=vocab.__getitem__)]
    rows, cols, vals = [], [], []
    for r, d in enumerate(docs):
        for i, v in tfidf(d, vocab, idf).items():
            rows.append(r)
            cols.append(i)
            vals.append(v)
    x = sparse.csr_matrix((vals, (rows, cols)), shape=(n, len(vocab)))
    k = len(CLASSES)
    y = np.zeros((n, k))
    for r, lab in enumerate(labels):
        y[r, CLASSES.index(lab)] = 1.0
    # each class weighs as much as the others, whatever its count
    per_class = y.sum(axis=0)
    sample_w = (y @ np.where(per_class > 0, n / (k * np.maximum(per_class, 1)), 0.0))
    v_len = len(vocab)

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w = theta[:k * v_len].reshape(k, v_len)
        b = theta[k * v_len:]
        z = np.asarray(x @ w.T) + b
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        value = -c * float((sample_w * (y * logp).sum(axis=1)).sum()) + 0.5 * float((w * w).sum())
        g = c * (np.exp(logp) - y) * sample_w[:, None]
        grad_w = np.asarray((x.T @ g).T) + w
        return value, np.concatenate([grad_w.ravel(), g.sum(axis=0)])

    res = optimize.minimize(loss, np.zeros(k * v_len + k), jac=True, method="L-BFGS-B",
                            options={"maxiter": 3000})
    theta = res.x
    w = theta[:k * v_len].reshape(k, v_len)
    return (vocab, tuple(idf), tuple(tuple(float(x) for x in row) for row in w),
            tuple(float(x) for x in theta[k * v_len:]))


def _fold(cause: str, folds: int) -> int:
    return int(hashlib.sha1(cause.encode()).hexdigest(), 16) % folds


def train(docs: Sequence[Sequence[str]], labels: Sequence[str], causes: Sequence[str],
          by_rules: Sequence[str], eligible: Sequence[bool], signature_version: int,
          ids: Sequence[str] = (), c: float = 4.0, folds: int = 5, precision: float = 0.9) -> InfraModel:
    """A model of `docs` (words) and their classes (`CLASSES`), with the threshold chosen by
    cross-validation over `causes` (a cause's failures all in one fold): the lowest at which the
    model's own calls (where `eligible`, `classify.model_speaks_for`, and no rule spoke:
    `by_rules` is each failure's family by the rules, or "none") are right at least `precision`
    of the time, in every family it calls (`CALLS`)."""
    held: list[tuple[float, ...]] = [(0.0, 0.0, 1.0)] * len(docs)
    for f in range(folds):
        te = [i for i, cause in enumerate(causes) if _fold(cause, folds) == f]
        tr = [i for i, cause in enumerate(causes) if _fold(cause, folds) != f]
        vocab, idf, w, b = _fit([docs[i] for i in tr], [labels[i] for i in tr], c)
        m = InfraModel(vocab, idf, w, b, 1.0, signature_version)
        for i in te:
            held[i] = m.probabilities(docs[i])
    figures: dict[str, float] = {}
    threshold = 1.0
    for step in range(10, 20):
        th = step / 20
        called = [CLASSES[max(range(len(p)), key=p.__getitem__)] if r == "none" and ok and max(p) >= th
                  else "none" for r, p, ok in zip(by_rules, held, eligible)]
        scores: dict[str, float] = {"threshold": th}
        for fam in CALLS:
            said = sum(1 for x in called if x == fam)
            hit = sum(1 for x, t in zip(called, labels) if x == fam and t == fam)
            real = sum(1 for t in labels if t == fam)
            by_rules_hit = sum(1 for x, t in zip(by_rules, labels) if x == fam and t == fam)
            by_rules_said = sum(1 for x in by_rules if x == fam)
            scores[f"{fam}_model_calls"] = said
            scores[f"{fam}_model_right"] = hit
            scores[f"{fam}_recall_rules"] = round(by_rules_hit / real, 3) if real else 0.0
            scores[f"{fam}_recall_with_model"] = round((by_rules_hit + hit) / real, 3) if real else 0.0
            scores[f"{fam}_precision_with_model"] = (round((by_rules_hit + hit) / (by_rules_said + said), 3)
                                                     if by_rules_said + said else 0.0)
        if all(scores[f"{fam}_model_right"] >= precision * scores[f"{fam}_model_calls"] for fam in CALLS):
            threshold, figures = th, scores
            break
    vocab, idf, w, b = _fit(docs, labels, c)
    return InfraModel(vocab, idf, w, b, threshold, signature_version, train_ids_digest(ids), figures)
