"""Per-object NeuROK settings (Object.neurok) and the window manager's bake status. Blender side."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty, StringProperty

from .bridge.request import (
    DAMPING_RANGE,
    DENSITY_RANGE,
    DETAIL_SWEEPS,
    JOINT_LIMIT_RANGE,
    MAX_GRAVITY,
    MAX_JOINTS,
    MAX_SPEED,
    MAX_SWEEPS,
    MAX_WIND,
    SOLID_MATERIALS,
    STIFFNESS_RANGE,
    YOUNG_RANGE,
)

MAX_FRAME = 1048574  # Blender's MAXFRAME

OUTPUT_ITEMS = [
    ("MESH_CACHE", "Mesh Cache", "Write a PC2 file and read it with a Mesh Cache modifier (renders without the add-on)"),
    ("SHAPE_KEYS", "Shape Keys", "Write one shape key per frame, keyed so frame k shows sample k"),
]
CLOTH_ITEMS = [
    ("AUTO", "Auto", "An open mesh (a sheet, a cape, a flag) moves as Blender Cloth's default (cotton); a closed one "
     "takes the material the model predicts from its shape"),
    ("SHAPE", "From Shape", "Predict an open mesh's material from its shape, as for closed ones"),
    ("COTTON", "Cotton", "Blender Cloth's Cotton preset"),
    ("DENIM", "Denim", "Blender Cloth's Denim preset: heavier and stiffer than cotton"),
    ("LEATHER", "Leather", "Blender Cloth's Leather preset: stiff in bending"),
    ("RUBBER", "Rubber", "Blender Cloth's Rubber preset: heavy and springy"),
    ("SILK", "Silk", "Blender Cloth's Silk preset: light, drapes and flows"),
]
SOLID_ITEMS = [("CUSTOM", "Custom", "The Young's modulus and density below")] + [
    (name.upper(), name.title(), f"Young's modulus {young:.0e} Pa, density {density:g} kg/m³")
    for name, (young, density) in SOLID_MATERIALS.items()]
JOINT_TYPE_ITEMS = [
    ("AUTO", "Found", "The joint the pieces' contact suggests (shown in the last bake's report)"),
    ("HINGE", "Hinge", "Turns about an axis: a door, a laptop's lid, a lamp's elbow"),
    ("SLIDE", "Slide", "Moves along an axis without turning: a drawer, a slider"),
    ("BALL", "Ball", "Turns any way about the point where the pieces meet"),
    ("WELD", "Weld", "The pieces move as one"),
]
JOINT_AXIS_ITEMS = [
    ("AUTO", "Found", "The axis found from the pieces' contact"),
    ("X", "X", "The object's local X axis"),
    ("Y", "Y", "The object's local Y axis"),
    ("Z", "Z", "The object's local Z axis"),
]
DEVICE_ITEMS = [
    ("AUTO", "Auto", "CUDA when the runtime sees a GPU, otherwise the CPU"),
    ("CUDA", "CUDA", "Run on the GPU (falls back to the CPU with a warning when there is none)"),
    ("CPU", "CPU", "Run on the CPU"),
]


class NeurokObjectSettings(bpy.types.PropertyGroup):
    use_scene_range: BoolProperty(
        name="Scene Frame Range", default=True, description="Bake the scene's frame range instead of the object's own"
    )
    frame_start: IntProperty(name="Start", default=1, min=-MAX_FRAME, max=MAX_FRAME, description="First baked frame")
    frame_end: IntProperty(name="End", default=120, min=-MAX_FRAME, max=MAX_FRAME, description="Last baked frame")
    wind_velocity: FloatVectorProperty(
        name="Wind", size=3, default=(0.0, 0.0, 0.0), min=-MAX_WIND, max=MAX_WIND, soft_min=-50.0, soft_max=50.0,
        subtype="VELOCITY", unit="VELOCITY", description="Air velocity in world space (m/s)",
    )
    use_scene_wind: BoolProperty(
        name="Scene Force Fields", default=True,
        description="Also apply the scene's Wind, Force, Vortex and Turbulence field objects (with their falloff)",
    )
    effector_collection: bpy.props.PointerProperty(
        name="Effector Collection", type=bpy.types.Collection,
        description="Only force fields in this collection act on the object (empty: every field in the scene)",
    )
    field_weight_all: FloatProperty(name="All", default=1.0, min=0.0, max=100.0, soft_max=1.0,
                                    description="Scales every force field and gravity (like Cloth's Field Weights)")
    field_weight_gravity: FloatProperty(name="Gravity", default=1.0, min=0.0, max=100.0, soft_max=1.0,
                                        description="Scales gravity")
    field_weight_wind: FloatProperty(name="Wind", default=1.0, min=0.0, max=100.0, soft_max=1.0,
                                     description="Scales Wind fields")
    field_weight_force: FloatProperty(name="Force", default=1.0, min=0.0, max=100.0, soft_max=1.0,
                                      description="Scales Force fields")
    field_weight_vortex: FloatProperty(name="Vortex", default=1.0, min=0.0, max=100.0, soft_max=1.0,
                                       description="Scales Vortex fields")
    field_weight_turbulence: FloatProperty(name="Turbulence", default=1.0, min=0.0, max=100.0, soft_max=1.0,
                                           description="Scales Turbulence fields")
    use_colliders: BoolProperty(
        name="Collide", default=True,
        description="Collide with the scene's mesh objects that have a Collision modifier (animated or not)",
    )
    pins_follow_animation: BoolProperty(
        name="Pins Follow Animation", default=True,
        description="Pinned vertices follow the object's animation (transform, parent, armature, shape keys) frame "
        "by frame; off: they stay where they are at the first frame",
    )
    use_animation_velocity: BoolProperty(
        name="Start with Animation Velocity", default=True,
        description="An object animated up to the first frame starts with the velocity it has there",
    )
    use_scene_gravity: BoolProperty(name="Scene Gravity", default=True, description="Use the scene's gravity")
    gravity: FloatVectorProperty(
        name="Gravity", size=3, default=(0.0, 0.0, -9.81), min=-MAX_GRAVITY, max=MAX_GRAVITY, soft_min=-50.0, soft_max=50.0,
        subtype="ACCELERATION", unit="ACCELERATION", description="Gravity in world space, used when Scene Gravity is off",
    )
    initial_velocity: FloatVectorProperty(
        name="Initial Velocity", size=3, default=(0.0, 0.0, 0.0), min=-MAX_SPEED, max=MAX_SPEED, soft_min=-20.0, soft_max=20.0,
        subtype="VELOCITY", unit="VELOCITY", description="A push at the first frame: every vertex starts with this "
        "world-space velocity (pinned parts are held back)",
    )
    use_ground: BoolProperty(name="Ground", default=False, description="A ground plane the object cannot pass")
    ground_height: FloatProperty(
        name="Ground Height", default=0.0, soft_min=-100.0, soft_max=100.0, subtype="DISTANCE", unit="LENGTH",
        description="World-space height (Z) of the ground plane",
    )
    pin_group: StringProperty(
        name="Pin Group", default="", description="Vertex group whose weights pin vertices (1 = fully pinned)"
    )
    stiffness: FloatProperty(
        name="Stiffness", default=1.0, min=STIFFNESS_RANGE[0], max=STIFFNESS_RANGE[1], soft_min=0.1, soft_max=10.0,
        description="Multiplier on the material stiffness the model predicts",
    )
    use_physical_material: BoolProperty(
        name="Physical Material", default=False,
        description="Set a closed solid's stiffness from its Young's modulus and density (the model's calibrated "
        "law) instead of predicting it from the shape; the Stiffness multiplier still applies on top",
    )
    solid_material: EnumProperty(
        name="Made Of", items=SOLID_ITEMS, default="CUSTOM",
        description="A closed solid's material by name (its Young's modulus and density), with Physical Material on",
    )
    young_modulus: FloatProperty(
        name="Young's Modulus (Pa)", default=1e5, min=YOUNG_RANGE[0], max=YOUNG_RANGE[1], soft_min=1e3, soft_max=1e9,
        precision=0, description="How stiff the material is, in pascals: a gel 1e3-1e4, soft rubber 1e5-1e6, "
        "hard rubber 1e7, wood 1e10",
    )
    density: FloatProperty(
        name="Density (kg/m³)", default=1000.0, min=DENSITY_RANGE[0], max=DENSITY_RANGE[1], soft_min=10.0,
        soft_max=20000.0, description="Mass per volume: foam 30, rubber 1100, wood 500-900, steel 7850",
    )
    cloth_preset: EnumProperty(
        name="Cloth", items=CLOTH_ITEMS, default="AUTO",
        description="An open mesh's material, as Blender Cloth's presets (closed meshes ignore it); Stiffness and "
        "Damping still multiply it",
    )
    use_detail: BoolProperty(
        name="Detail", default=True,
        description="An open mesh's full-resolution cloth layer: the folds and wrinkles the reduced motion cannot hold. "
        "Off: the reduced motion alone, a smooth and faster preview",
    )
    detail_sweeps: IntProperty(
        name="Sweeps", default=DETAIL_SWEEPS, min=1, max=MAX_SWEEPS, soft_min=4, soft_max=60,
        description="The cloth layer's substeps per frame (each one sweep over every edge): more keep long sheets "
        "from stretching and fold more finely, at a cost in proportion",
    )
    joint_stiffness: FloatProperty(
        name="Joint Stiffness", default=1.0, min=STIFFNESS_RANGE[0], max=STIFFNESS_RANGE[1], soft_min=0.1,
        soft_max=10.0, description="For a mesh of separate closed pieces (a desk lamp, a laptop, a door on its "
        "frame), which moves at its joints: a multiplier on the joints' predicted spring. Lower lets the parts fold "
        "under their weight",
    )
    use_joint_limit: BoolProperty(
        name="Joint Limit", default=False,
        description="Stop each joint of an assembly this far from its rest pose (else the model's predicted stop)",
    )
    joint_limit: FloatProperty(
        name="Limit", default=1.0, min=JOINT_LIMIT_RANGE[0], max=JOINT_LIMIT_RANGE[1], subtype="ANGLE",
        description="How far each joint turns from the modelled pose before a stiff stop holds it",
    )
    joint_type: EnumProperty(
        name="Joint Type", items=JOINT_TYPE_ITEMS, default="AUTO",
        description="An assembly's joint as you know it, where its shape is ambiguous (a drawer that slides)",
    )
    joint_index: IntProperty(
        name="Which Joint", default=0, min=0, max=MAX_JOINTS,
        description="The joint to override, 1, 2, … as the last bake's report lists them; 0: every joint",
    )
    joint_axis: EnumProperty(
        name="Axis", items=JOINT_AXIS_ITEMS, default="AUTO",
        description="The axis a hinge turns about or a slide moves along, in the object's local axes",
    )
    use_joint_range: BoolProperty(
        name="Range", default=False,
        description="How far the joint may go either way from the modelled pose (a hinge or a slide)",
    )
    joint_range_min: FloatProperty(
        name="Min", default=-45.0, max=0.0, soft_min=-360.0,
        description="How far it may go the negative way: degrees for a hinge, the object's units for a slide",
    )
    joint_range_max: FloatProperty(
        name="Max", default=45.0, min=0.0, soft_max=360.0,
        description="How far it may go the positive way: degrees for a hinge, the object's units for a slide",
    )
    # further overrides as a JSON list of JointOverride objects (the batch's --joint), before the one above
    joint_overrides: StringProperty(default="", options={"HIDDEN"})
    damping: FloatProperty(
        name="Damping", default=1.0, min=DAMPING_RANGE[0], max=DAMPING_RANGE[1], soft_max=10.0,
        description="Multiplier on the material damping the model predicts",
    )
    seed: IntProperty(name="Variation", default=0, min=0, max=2**31 - 1, description="Seed that draws another plausible motion")
    output: EnumProperty(name="Output", items=OUTPUT_ITEMS, default="MESH_CACHE")
    device: EnumProperty(name="Device", items=DEVICE_ITEMS, default="AUTO")
    last_bake: StringProperty(name="Last Bake", default="", description="Summary of the last finished bake")
    last_bake_start: IntProperty(default=0, options={"HIDDEN"})
    last_bake_end: IntProperty(default=-1, options={"HIDDEN"})
    created_basis: BoolProperty(default=False, options={"HIDDEN"})


def _register_window_manager() -> None:
    wm = bpy.types.WindowManager
    wm.neurok_progress = FloatProperty(name="NeuROK Progress", default=0.0, min=0.0, max=1.0, subtype="FACTOR")
    wm.neurok_status = StringProperty(name="NeuROK Status", default="")


def register() -> None:
    bpy.types.Object.neurok = bpy.props.PointerProperty(type=NeurokObjectSettings)
    _register_window_manager()


def unregister() -> None:
    for owner, name in ((bpy.types.Object, "neurok"), (bpy.types.WindowManager, "neurok_progress"),
                        (bpy.types.WindowManager, "neurok_status")):
        if hasattr(owner, name):
            delattr(owner, name)


CLASSES = [NeurokObjectSettings]
