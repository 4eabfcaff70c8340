"""``python -m neurok_blender.pipeline.data generate|preview``. No bpy use."""

from __future__ import annotations

import argparse
import sys

from ...errors import NeurokError


def main(argv: list[str] | None = None) -> int:
    from .families import FAMILIES
    from .generate import RECIPES

    parser = argparse.ArgumentParser(prog="python -m neurok_blender.pipeline.data")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="simulate a dataset (resumable)")
    gen.add_argument("--out", required=True)
    gen.add_argument("--recipe", choices=sorted(RECIPES), default="smoke")
    gen.add_argument("--sequences", type=int, help="total sequences (default: the recipe's)")
    gen.add_argument("--families", nargs="+", choices=sorted(FAMILIES))
    gen.add_argument("--shard", help="i/n: run only every n-th shard starting at i")
    gen.add_argument("--workers", type=int, default=1)
    gen.add_argument("--seed", type=int, default=0)
    pre = sub.add_parser("preview", help="draw a contact sheet of random sequences")
    pre.add_argument("dir")
    pre.add_argument("--out", required=True)
    pre.add_argument("--count", type=int, default=8)
    pre.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        if args.command == "generate":
            from .generate import generate

            result = generate(args.out, args.recipe, args.sequences, args.families, args.shard, args.workers, args.seed)
            card = result["card"]
            print(f"{card['sequences']} sequences kept, {card['rejected']} rejected; ran {result['ran']} shards, "
                  f"skipped {result['skipped']} finished ones; card: {args.out}/DATASET_CARD.md")
        else:
            from .preview import contact_sheet

            print(contact_sheet(args.dir, args.out, args.count, args.seed))
    except NeurokError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
