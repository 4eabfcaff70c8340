"""The release version (kept equal to blender_manifest.toml by a test). Standard library only."""

RELEASE_VERSION = "0.1.0"
