"""Per-object settings, preferences and the N-panel."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.blender
bpy = pytest.importorskip("bpy")

from tests.blender_helpers import make_grid  # noqa: E402

DEFAULTS = {
    "use_scene_range": True, "frame_start": 1, "frame_end": 120, "use_scene_wind": True, "use_scene_gravity": True,
    "pin_group": "", "stiffness": 1.0, "damping": 1.0, "seed": 0, "output": "MESH_CACHE", "device": "AUTO",
    "use_physical_material": False, "young_modulus": 1e5, "density": 1000.0, "joint_stiffness": 1.0,
    "use_joint_limit": False, "joint_limit": 1.0, "cloth_preset": "AUTO",
}


def test_property_defaults(blender):
    settings = make_grid().neurok
    for name, value in DEFAULTS.items():
        assert getattr(settings, name) == value, name
    assert tuple(settings.wind_velocity) == (0.0, 0.0, 0.0)
    assert tuple(settings.gravity) == pytest.approx((0.0, 0.0, -9.81))


def test_property_bounds_clamp(blender):
    settings = make_grid().neurok
    settings.stiffness = -5.0
    assert settings.stiffness == pytest.approx(0.01)
    settings.damping = -1.0
    assert settings.damping == 0.0
    settings.seed = -3
    assert settings.seed == 0
    settings.stiffness = 1e9
    assert settings.stiffness == 100.0


def test_enum_items(blender):
    rna = make_grid().neurok.bl_rna.properties
    assert [i.identifier for i in rna["output"].enum_items] == ["MESH_CACHE", "SHAPE_KEYS"]
    assert [i.identifier for i in rna["device"].enum_items] == ["AUTO", "CUDA", "CPU"]
    assert rna["wind_velocity"].subtype == "VELOCITY"


def test_preferences_exist_with_blank_defaults(blender):
    prefs = bpy.context.preferences.addons["neurok_blender"].preferences
    assert prefs.runtime_python == "" and prefs.checkpoint_path == ""


class Recorder:
    """Stands in for a UILayout and records what a panel draws."""

    def __init__(self, log):
        self.log = log
        self.use_property_split = False
        self.active = True
        self.scale_y = 1.0

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.log.append((name, args, kwargs))
            return Recorder(self.log)
        return call


def draw(panel_cls):
    log = []
    fake = type("FakePanel", (), {"layout": Recorder(log)})()
    panel_cls.draw(fake, bpy.context)
    return log


def texts(log):
    return [kw.get("text", "") for name, _, kw in log if name == "label"]


def test_simulate_button_names_the_device_that_will_run(blender, monkeypatch):
    from neurok_blender.ops import interpreter
    from neurok_blender.ui.panel import NEUROK_PT_main

    obj = make_grid()
    monkeypatch.setitem(interpreter.LAST_DEVICE, "auto", "CPU")
    ops = lambda: [kw["text"] for name, args, kw in draw(NEUROK_PT_main) if args == ("neurok.simulate",)]  # noqa: E731
    assert ops() == ["Simulate on CPU"]
    obj.neurok.device = "CUDA"
    assert ops() == ["Simulate on CUDA (none seen: CPU)"]
    monkeypatch.setitem(interpreter.LAST_DEVICE, "auto", "CUDA")
    assert ops() == ["Simulate on CUDA"]
    obj.neurok.device = "AUTO"
    assert ops() == ["Simulate on CUDA"]
    obj.neurok.last_bake = "frames 1-24, 3.2 s, CPU"
    assert any("Last bake: frames 1-24, 3.2 s, CPU" in t for t in texts(draw(NEUROK_PT_main)))


def test_the_material_panel_warns_when_a_physical_material_meets_an_open_mesh(blender):
    from neurok_blender.ui.panel import NEUROK_PT_material

    sheet = make_grid()
    assert not any("Open mesh" in t for t in texts(draw(NEUROK_PT_material)))  # off: nothing to say
    sheet.neurok.use_physical_material = True
    assert any("Open mesh: a physical material needs a closed solid" in t for t in texts(draw(NEUROK_PT_material)))
    bpy.ops.mesh.primitive_cube_add()
    bpy.context.active_object.neurok.use_physical_material = True
    assert not any("Open mesh" in t for t in texts(draw(NEUROK_PT_material)))  # a cube is closed


def test_panel_says_plainly_when_the_active_object_is_not_a_mesh(blender):
    from neurok_blender.ui.panel import NEUROK_PT_main

    bpy.ops.object.camera_add()
    labels = texts(draw(NEUROK_PT_main))
    assert any("not a mesh" in t for t in labels)


def test_panel_shows_simulate_for_a_mesh(blender, monkeypatch):
    from neurok_blender.ops import interpreter
    from neurok_blender.ui.panel import NEUROK_PT_forces, NEUROK_PT_main

    monkeypatch.setitem(interpreter.LAST_DEVICE, "auto", "")  # nothing checked or baked yet
    make_grid()
    log = draw(NEUROK_PT_main)
    assert ("operator", ("neurok.simulate",), {"text": "Simulate (device: auto)", "icon": "PLAY"}) in log
    assert any("add a pin group" in t for t in texts(log))
    forces = draw(NEUROK_PT_forces)
    assert any("No pin group" in t for t in texts(forces))
    assert any(name == "prop_search" and args[1] == "pin_group" for name, args, _ in forces)
