"""Latent Euler–Lagrange dynamics: cubature, energies, the reduced system, integrators, the engine. No bpy use."""
