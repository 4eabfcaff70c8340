# Two commands do everything on a fresh clone: `make demo` and `make test`.
PY311 ?= $(shell command -v python3.11 || echo python3.11)
VENV := .venv
VENV5 := .venv5
PY := $(VENV)/bin/python
PY5 := $(VENV5)/bin/python
STAMP := $(VENV)/.installed
STAMP5 := $(VENV5)/.installed
PIP_FLAGS := --disable-pip-version-check --quiet

.PHONY: venv venv5 test test-fast test-blender5 lint demo demo-publish build bench dataset dataset-contact dataset-heldout dataset-decide clean

# The package goes in editable (a path hook to this clone), so the SDK and CLI import from any directory.
$(STAMP): requirements/dev.txt pyproject.toml
	@test -x $(PY) || $(PY311) -m venv $(VENV)
	$(PY) -m pip install $(PIP_FLAGS) -r requirements/dev.txt
	$(PY) -m pip install $(PIP_FLAGS) --no-deps --no-build-isolation -e .
	@touch $@

$(STAMP5): requirements/blender5.txt
	@test -x $(PY5) || $(PY311) -m venv $(VENV5)
	$(PY5) -m pip install $(PIP_FLAGS) -r requirements/blender5.txt
	@touch $@

venv: $(STAMP)
venv5: $(STAMP5)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: $(STAMP) lint
	$(PY) -m pytest

# The quick loop while editing: everything except the tests marked slow (make test and CI run them all).
test-fast: $(STAMP) lint
	$(PY) -m pytest -m "not slow"

# The Blender-facing tests under bpy 5.0.1; the worker borrows the main venv's torch.
test-blender5: $(STAMP) $(STAMP5)
	NEUROK_PYTHON=$(CURDIR)/$(PY) $(PY5) -m pytest -m blender

build: $(STAMP)
	$(PY) build_addon.py

# Writes only under out/ (about 5 minutes on 2 cores); demo-publish copies its pictures to docs/demo/ for the README.
demo: build
	$(PY) scripts/demo.py --out out

DEMO_PICTURES := demo.gif cape_vs_cloth.gif demo_sheet.png demo_energy.png
demo-publish:
	@test -f out/demo.gif || $(MAKE) demo
	cp $(addprefix out/,$(DEMO_PICTURES)) docs/demo/

# NeuROK against Blender Cloth and Soft Body on the same meshes, frames and machine; rewrites the marked
# section of docs/results.md (and out/bench.json). Run it on an otherwise idle machine.
bench: $(STAMP)
	$(PY) scripts/bench.py --sizes 1000 10000 50000 200000 --frames 48 --out docs/results.md
	$(PY) scripts/bench_scene.py --sizes 1000 10000 --collider-faces 320 1280 5120 --frames 24 --out docs/results.md

# The full training set (about 3,200 sequences; under an hour on 2 cores) into the ignored datasets/ folder;
# its generated statistics (docs/dataset/STATISTICS.md), dataset.json and a preview sheet are copied to docs/dataset/. Resumable: re-running skips finished shards.
DATASET ?= datasets/full
dataset: $(STAMP)
	$(PY) -m neurok_blender.pipeline.data generate --out $(DATASET) --recipe full --workers 2
	$(PY) -m neurok_blender.pipeline.data preview $(DATASET) --out $(DATASET)/preview.png --count 16
	mkdir -p docs/dataset
	cp $(DATASET)/DATASET_CARD.md docs/dataset/STATISTICS.md
	cp $(DATASET)/dataset.json $(DATASET)/preview.png docs/dataset/

# The contact families (cloth on colliders, carried and spun; generator 1.5.0), what the cloth model trains on, and the
# held-out draw its ablation is measured on (about 25 minutes on 2 cores); their statistics and a preview to docs/dataset/.
dataset-contact: $(STAMP)
	$(PY) -m neurok_blender.pipeline.data generate --out datasets/contact --recipe contact --families cover carry --sequences 2000 --workers 2
	$(PY) -m neurok_blender.pipeline.data generate --out datasets/contact2 --recipe contact --families cover carry --sequences 800 --seed 1 --workers 2
	$(PY) -m neurok_blender.pipeline.data generate --out datasets/contact_eval --recipe contact --families shroud twirl --sequences 240 --workers 2
	$(PY) -m neurok_blender.pipeline.data preview datasets/contact --out docs/dataset/contact_preview.png --count 8
	cat datasets/contact/DATASET_CARD.md datasets/contact2/DATASET_CARD.md datasets/contact_eval/DATASET_CARD.md > docs/dataset/CONTACT_STATISTICS.md

# The held-out draw the results page's validation section rolls out: the test families of the full recipe (cloth:
# drape, ribbon; elastic and soft solids: plate, star toy; an assembly: lamp), a fresh seeded draw, a few minutes.
dataset-heldout: $(STAMP)
	$(PY) -m neurok_blender.pipeline.data generate --out datasets/heldout --recipe full --families drape ribbon plate star_toy lamp --sequences 60 --seed 7 --workers 2

# fresh draws for the solids' and assemblies' decisions: the validation family (drawer) and training families
dataset-decide: $(STAMP)
	$(PY) -m neurok_blender.pipeline.data generate --out datasets/decide --recipe full --families door laptop drawer beam tower blob jelly --sequences 70 --seed 11 --workers 2

clean:
	rm -rf dist out .pytest_cache .ruff_cache
