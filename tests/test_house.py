"""The house rules a newcomer relies on, checked on every file: product code says why without dates, session
history or measured percentages; the reduced system takes its maps through one interface; functions in runtime/
and bridge/ stay short; the dynamics never call back into the bridge; reference docs stay short and the README
opens with the demo's animation. No torch, no bpy."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "neurok_blender"
MAX_FUNCTION_LINES = 60
MAX_DOC_LINES = 500
MAX_README_LINES = 200
# what a lab journal leaves in code: dates, history labels, numbered sessions or sections, measured shares, and
# pointers to one-off studies or to the journal itself
LAB_NOTE = re.compile(r"20\d\d-[01]\d-[0-3]\d|\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|"
                      r"eleventh|twelfth) (session|section)\b|\bthe (fourth|fifth|sixth|seventh|eighth|ninth|tenth|"
                      r"eleventh)\b(?! of)|\d ?%|scripts/|experiments/|(?-i:VALIDATION)|docs/journal|\bissue \d+",
                      re.IGNORECASE)
MAP_CLASSES = {"HandleMap", "NeurokMap", "LatentMap", "PlainDecoder"}
# the request's conversions to the mesh's frame: done once by the engine (``local_scene``), never by the dynamics
FRAME_CALLS = {"local_gravity", "local_wind", "local_ground", "local_initial_velocity", "to_local", "to_world_point",
               "local_scene"}


def product_files() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "pipeline" not in p.relative_to(PACKAGE).parts]


def comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring in a file."""
    source = path.read_text(encoding="utf-8")
    out = [(i + 1, line[line.index("#"):]) for i, line in enumerate(source.splitlines())
           if "#" in line and line.lstrip().startswith("#") or "  # " in line]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    return out


def test_product_code_carries_no_lab_notes():
    found = [f"{p.relative_to(ROOT)}:{line}: {LAB_NOTE.search(text).group(0)!r}"
             for p in product_files() for line, text in comments_and_docstrings(p) if LAB_NOTE.search(text)]
    assert not found, "move the evidence to docs/decisions.md or the journal:\n" + "\n".join(found)


def test_the_lab_note_pattern_catches_what_it_should():
    for note in ("until 2026-12-06", "the sixth session", "(VALIDATION.md, eighth)", "28 % off", "scripts/x.py"):
        assert LAB_NOTE.search(note), note
    for fine in ("the first frame", "a third of the operations", "the second-to-last axis", "4×4, row-major"):
        assert not LAB_NOTE.search(fine), fine


def test_the_reduced_system_never_switches_on_the_map_type():
    found = []
    for p in product_files():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                if names & MAP_CLASSES:
                    found.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_functions_in_the_runtime_and_the_bridge_stay_short():
    long = []
    for folder in ("runtime", "bridge"):
        for p in sorted((PACKAGE / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        long.append(f"{p.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, long


def test_the_dynamics_never_convert_the_request_themselves():
    calls = []
    for p in sorted((PACKAGE / "runtime" / "dynamics").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in FRAME_CALLS:
                calls.append(f"{p.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert not calls, calls


def test_reference_docs_stay_short_and_the_journal_holds_the_rest():
    docs = [p for p in [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md")] if "journal" not in p.parts]
    long = [f"{p.relative_to(ROOT)} ({n} lines)" for p in docs
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_DOC_LINES]
    assert not long, long


def test_the_readme_is_a_front_door_that_opens_with_the_demo_animation():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES
    first_image = next(re.search(r"!\[[^\]]*\]\(([^)]+)\)", line) for line in lines if "![" in line)
    path = first_image.group(1)
    assert path.endswith((".gif", ".webp")) and (ROOT / path).is_file(), path
    assert "make demo" in "\n".join(lines) and "make test" in "\n".join(lines)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def test_every_relative_link_in_the_docs_points_at_a_file_and_heading_that_exist():
    broken = []
    for p in [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md"), *(ROOT / "experiments").glob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", p.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            file = (p.parent / target) if target else p
            if not file.exists():
                broken.append(f"{p.relative_to(ROOT)} -> {target}")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{p.relative_to(ROOT)} -> {target}#{anchor}")
    assert not broken, broken


def test_code_that_names_a_decision_names_one_that_exists():
    names = anchors(ROOT / "docs" / "decisions.md")
    cited = {m for p in PACKAGE.rglob("*.py") for m in re.findall(r"decisions(?:\.md)?#([\w-]+)", p.read_text("utf-8"))}
    assert cited and cited <= names, sorted(cited - names)


def test_the_product_solver_holds_no_ablation_switch():
    import dataclasses

    from neurok_blender.bridge.request import Solver

    research = {"latent", "jacobian", "reduction", "handle_modes", "joints", "orthonormal", "chord_check"}
    assert not research & {f.name for f in dataclasses.fields(Solver)}
