"""The curated 4D dataset: procedural shapes, simulator backends, shards, loader. No bpy use
(except ``blender_backend``, which runs in its own bpy process)."""

GENERATOR_VERSION = "1.6.0"  # 1.1.0: the drape family (large-motion cloth, held out); other families unchanged
# 1.2.0: the articulated families' joint springs rest at the joints' initial position (no hidden pre-stress)
# 1.3.0: the gale (a flag in strong gusty wind) and the drop (a soft solid dropped onto a floor), both for training
# 1.4.0: a closed solid whose enclosed volume changes by more than 30 % is rejected ("collapsed": the FE grid's thin
# plates flatten or turn inside out); the sequences kept are 1.3.0's, and readers leave out 1.3.0's collapsed ones
# 1.5.0: cloth meeting things, by Blender Cloth: dropped on colliders (cover; shroud held out for validation) and
# carried by its object (carry; twirl held out for testing); other families unchanged
# 1.6.0: the slider (a carriage on a rail: a slide, for training the kinematics reading); other families unchanged
