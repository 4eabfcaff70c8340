"""The results page's section on solids and assemblies, from runs of the validation tool
(``python -m neurok_blender.pipeline.validate heldout ... --out DIR``) and the kinematics comparison
(``python -m neurok_blender.pipeline.kinematics compare ... --json FILE``). Each ``--group`` is a table: one column
pair per labelled run (error over the rest baseline, NeuROK's motion over the simulator's), a row per family.

    python scripts/assemblies_report.py \\
        --group modes "material from the shape" /tmp/fin/test_shape "material recorded" /tmp/fin/test_rec \\
        --group latent "latent" /tmp/fin/dec_val_rec_latent /tmp/fin/dec_train_rec_latent "no latent" ... \\
        --joints-table decide=/tmp/kin_val.json test=/tmp/kin_test.json --out docs/results.md --json docs/results/assemblies.json

A label is followed by one or more run folders (their rows are pooled). Writes the marked "assemblies" section.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

START, END = "<!-- assemblies:start -->", "<!-- assemblies:end -->"
TITLES = {
    "modes": ("Held-out families in both material modes",
              "The final table: the test families (and the held-out drape and ribbon beside them), each cell the error "
              "over the rest baseline, then NeuROK's motion over the simulator's. *Material from the shape* is what a "
              "click gets; *material recorded* gives each rollout what a user who knows the object sets: an FE solid's "
              "Young's modulus and density (through the calibrated law), an assembly's joints (type, axis, range: "
              "joint overrides), springs, damping and air (rollouts.recorded_joints, recorded_joint_overrides, "
              "recorded_drag)."),
    "modes_decide": ("The same on the decision draw",
                     "The validation family (drawer) and fresh draws of training families, where the decisions were "
                     "made; the material from the shape with the joints the rules read."),
    "solid_default": ("The shape's default solid material",
                      "Material from the shape: single closed solids on the fitted table's nearest sequences (table, the "
                      "default) and on the calibrated law at the material typical of their nearest solids' kind, at their "
                      "size (research solid_default law: not the default, decisions#solid-default), on the decision draw "
                      "and on the test families."),
    "latent": ("What the learned latent adds to solids and assemblies",
               "Recorded material, decided on the validation family (drawer) and fresh draws of training families "
               "(door, laptop, beam, tower, jelly); the same sequences with the shipped latent and with none (its "
               "directions decode nothing: research no_latent), and the test families. ms / frame is the dynamics and "
               "decode per frame, measured with another run beside it on this 2-core machine: compare within a row."),
    "joints": ("Reading the joints: the learned reading against the rules (rollouts)",
               "Material from the shape, so the joints are what the reading finds: the validation family (drawer) and "
               "fresh draws of training families; the same sequences read by the hand-written rules "
               "(runtime/dynamics/joints.py) and by the learned reading (runtime/dynamics/kinematics.py)."),
    "joints_test": ("The same on the test family", "The lamp (test split), for the record: not used to decide."),
}


def rows_of(folder: str) -> tuple[list[dict], dict]:
    with open(os.path.join(folder, "validation.json")) as fh:
        data = json.load(fh)
    return data["heldout"]["rows"], data.get("commands", {})


def summary(rows: list[dict]) -> dict[str, dict]:
    out = {}
    for fam in sorted({r["family"] for r in rows}):
        sel = [r for r in rows if r["family"] == fam]
        rest = sum(r["rest"] for r in sel)
        out[fam] = {"sequences": len(sel), "error_over_rest": sum(r["neurok"] for r in sel) / max(rest, 1e-12),
                    "motion_ratio": sum(r["motion_neurok"] for r in sel) / max(rest, 1e-12),
                    "ms_per_frame": sum(r["ms_per_frame"] for r in sel) / len(sel)}
    return out


def parse_group(items: list[str]) -> tuple[str, list[tuple[str, list[str]]]]:
    """NAME LABEL DIR [DIR ...] LABEL DIR ...: a label is any item that is not an existing folder."""
    name, columns = items[0], []
    for item in items[1:]:
        if os.path.isdir(item):
            if not columns:
                raise SystemExit(f"--group {name}: a run folder {item!r} before any label")
            columns[-1][1].append(item)
        else:
            columns.append((item, []))
    empty = [label for label, dirs in columns if not dirs]
    if empty:
        raise SystemExit(f"--group {name}: no run folder for {empty} (a folder that does not exist reads as a label)")
    return name, columns


def group_table(name: str, columns: list[tuple[str, list[str]]], commands: list[str]) -> tuple[list[str], dict]:
    stats = {}
    for label, dirs in columns:
        rows = []
        for d in dirs:
            r, c = rows_of(d)
            rows += r
            commands += [v for v in c.values() if v not in commands]
        stats[label] = summary(rows)
    families = sorted(set.intersection(*(set(s) for s in stats.values())))  # the families every column ran
    title, text = TITLES.get(name, (name, ""))
    from neurok_blender.pipeline.data.families import FAMILIES

    head = "| family | split | sequences | " + " | ".join(f"{label}: error / baseline | motion | ms / frame"
                                                   for label, _ in columns) + " |"
    lines = [f"### {title}", "", text, "", head, "|" + " --- |" * (3 + 3 * len(columns))]
    for fam in families:
        cells = []
        for label, _ in columns:
            s = stats[label][fam]
            cells += [f"{s['error_over_rest']:.2f}", f"{s['motion_ratio']:.2f}×", f"{s['ms_per_frame']:.0f}"]
        count = max(stats[label][fam]["sequences"] for label, _ in columns)
        lines.append(f"| {fam} | {FAMILIES[fam].split} | {count} | " + " | ".join(cells) + " |")
    return lines + [""], stats


def joints_table(specs: list[str]) -> tuple[list[str], dict]:
    lines = ["### Reading the joints: the learned reading against the rules (joint by joint)", "",
             "Fresh seeds of each family's generator (no simulation: the labels are the seeded specs' own joints; a "
             "simulator joint that turns less than 0.2 rad either way counts as a weld). Type: the share read right; "
             "axis: the mean angle from the recorded axis over the joints that move (90° where none is read); range: "
             "the mean error of its ends (rad for a hinge, m for a slide; the rules read none).", "",
             "| family | split | joints | rules: type | rules: axis | learned: type | learned: axis | learned: range |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    from neurok_blender.pipeline.data.families import FAMILIES

    raw = {}
    for spec in specs:
        name, path = spec.split("=", 1)
        with open(path) as fh:
            table = json.load(fh)
        raw[name] = table
        for fam, s in table.items():
            lines.append(f"| {fam} | {FAMILIES[fam].split} | {s['joints']} | {s['rules']['type_accuracy']:.2f} | "
                         f"{s['rules']['axis_degrees']:.1f}° | {s['learned']['type_accuracy']:.2f} | "
                         f"{s['learned']['axis_degrees']:.1f}° | {s['learned']['range_error']:.3f} |")
    return lines + [""], raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", action="append", nargs="+", default=[], metavar="ITEM")
    parser.add_argument("--joints-table", nargs="+", default=[], metavar="NAME=JSON")
    parser.add_argument("--command", action="append", default=[], help="a further command to list (repeatable)")
    parser.add_argument("--figure", action="append", default=[], metavar="SRC=NAME=CAPTION",
                        help="copy SRC into the page's figures folder (results/) as NAME and show it (repeatable)")
    parser.add_argument("--out", help="the page whose marked section is rewritten (default: print it)")
    parser.add_argument("--json", help="also write the summaries here")
    args = parser.parse_args(argv)
    commands: list[str] = []
    body, raw = ["## Solids and assemblies", ""], {}
    if args.joints_table:
        lines, raw["joints_table"] = joints_table(args.joints_table)
        body += lines
    for items in args.group:
        name, columns = parse_group(items)
        lines, raw[name] = group_table(name, columns, commands)
        body += lines
    for item in args.figure:
        src, name, caption = item.split("=", 2)
        if args.out:
            import shutil

            folder = os.path.join(os.path.dirname(os.path.abspath(args.out)), "results")
            os.makedirs(folder, exist_ok=True)
            shutil.copy(src, os.path.join(folder, name))
        body += [f"![{caption}](results/{name})", "", f"*{caption}*", ""]
    body += ["Made with:", ""] + [f"- `{c}`" for c in args.command + commands] + [""]
    block = "\n".join([START, *body, END]) + "\n"
    if args.out:
        from neurok_blender.pipeline.validate.report import replace_marked

        replace_marked(args.out, (START, END), block[len(START) + 1: -len(END) - 1])
    else:
        print(block)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(raw, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
