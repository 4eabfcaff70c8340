"""Draw a training run's curve (reconstruction MSE and KL against step) from RUN/metrics.jsonl; a run that trains
the learned reduction alone (``--train reduction``) has the reduced reconstruction instead."""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("metrics")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.metrics)]
    step = np.array([r["step"] for r in rows])
    labels = {"mse": "reconstruction MSE (normalized units²)", "mse_reduced": "reconstruction MSE through the "
              "learned reduction", "kl": "KL per latent number", "lr": "learning rate"}
    keys = [k for k in labels if k in rows[0]]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.4 * len(keys), 3.4))
    for ax, key, label in zip(axes, keys, (labels[k] for k in keys)):
        values = np.array([r[key] for r in rows])
        ax.plot(step, values, lw=0.6, alpha=0.5)  # raw, then a rolling median (batches vary a lot)
        if len(values) > 20 and key != "lr":
            k = 20
            ax.plot(step[k - 1 :], [np.median(values[i - k + 1 : i + 1]) for i in range(k - 1, len(values))], lw=1.5)
        ax.set_yscale("log" if key.startswith("mse") else "linear")
        ax.set_xlabel("step")
        ax.set_title(label, fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(args.out)


if __name__ == "__main__":
    main()
