"""The wire between the add-on and the runtime worker. Standard library only: no bpy, no torch."""
