"""Sparse matrices in torch's compressed-row form, for the products the runtime repeats (a mesh's adjacency, the
vertices' blend of query points). No bpy use."""

from __future__ import annotations

import warnings

import torch


def csr(crow: torch.Tensor, columns: torch.Tensor, values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """A CSR matrix from its row offsets, column indices and values (already valid: not checked again). torch
    says once per process that its CSR support is in beta; that warning is not the user's concern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, columns, values, shape, check_invariants=False)
