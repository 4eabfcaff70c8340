"""Small analytic mechanical systems with known motion, for the energy and integrator tests. Needs torch."""

from __future__ import annotations

import numpy as np
import torch

from neurok_blender.bridge.request import Solver
from neurok_blender.runtime.dynamics import integrators
from neurok_blender.runtime.dynamics.cubature import Cubature
from neurok_blender.runtime.dynamics.maps import LatentMap, PlainDecoder
from neurok_blender.runtime.dynamics.material import Constants
from neurok_blender.runtime.dynamics.system import LatentSystem, Scene
from neurok_blender.runtime.research import Research

D = torch.float64
ZERO = {"stiffness": 0.0, "bending": 0.0, "pin": 0.0, "ground": 0.0, "plausibility": 0.0, "damping_mass": 0.0,
        "damping_stiffness": 0.0, "drag": 0.0}


def analytic_system(mapping, points, masses, edges=(), constants=None, gravity=(0, 0, 0), ground=None, k=1,
                    pins=None, solid=False, normals=(0.0, 1.0, 0.0), orthonormal=False):
    n = len(points)
    cub = Cubature(points=np.asarray(points, float), normals=np.tile(normals, (n, 1)),
                   masses=np.asarray(masses, float), areas=np.ones(n), pins=np.zeros(n) if pins is None else pins,
                   edges=np.asarray(edges, np.int64).reshape(-1, 2), bends=np.zeros((0, 2), np.int64), solid=solid)
    scene = Scene(torch.tensor(gravity, dtype=D), torch.zeros(3, dtype=D),
                  None if ground is None else torch.tensor([0.0, 0.0, 1.0], dtype=D), 0.0 if ground is None else ground)
    if callable(mapping) and not hasattr(mapping, "compose"):  # a plain function of the latent
        mapping = LatentMap(PlainDecoder(mapping, k))
    return LatentSystem(mapping, cub, Constants(**dict(ZERO, **(constants or {}))), scene, k, dtype=D, orthonormal=orthonormal)


def oscillator(stiffness=4.0, mass=1.0):
    """Point 0 fixed at the origin, point 1 at (1 + q, 0, 0), a spring of rest length 1 between them."""
    def mapping(q):
        zero = torch.zeros_like(q[..., 0])
        return torch.stack([torch.stack([zero, zero, zero], -1), torch.stack([1 + q[..., 0], zero, zero], -1)], -2)
    return analytic_system(mapping, [[0, 0, 0], [1, 0, 0]], [1.0, mass], edges=[[0, 1]],
                           constants={"stiffness": stiffness})


def pendulum(length=1.0, g=9.81):
    def mapping(q):
        th = q[..., 0]
        return torch.stack([length * torch.sin(th), torch.zeros_like(th), -length * torch.cos(th)], -1)[..., None, :]
    return analytic_system(mapping, [[0, 0, -length]], [1.0], gravity=(0.0, 0.0, -g))


def run(sys_, q0, qdot0, h, steps, integrator="verlet", order=1):
    s = integrators.initial_state(sys_, torch.tensor([q0], dtype=D), torch.tensor([qdot0], dtype=D))
    qs = [float(s.q[0])]
    # an exact decode at every try on these closed-form maps; it keeps its damping state across the run
    stepper = integrators.Implicit(Solver(iterations=4, order=order, refresh=1), Research(latent="exact"))
    for _ in range(steps):
        if integrator == "verlet":
            s = integrators.verlet_step(sys_, s, h)
        else:
            s = stepper.step(sys_, s, h)
        qs.append(float(s.q[0]))
    return np.array(qs), s
