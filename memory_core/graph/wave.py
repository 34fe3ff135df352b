r"""The wave variant: a damped wave on the symmetrised region instead of a one-way pulse.

**Equation.** On the nodes of a region, ``psi'' = -c^2 L psi - beta psi'`` with
``L = D - W`` the graph Laplacian of the symmetrised region: each stored edge ``u -> v`` of
weight ``w`` and type ``t`` adds ``w * forward[t]`` to ``A[u, v]`` and ``w * reverse[t]`` to
``A[v, u]``, and ``W = (A + A^T) / 2`` (self-loops dropped: they cancel in ``D - W``). One
field ``psi_i`` per focus starts from that focus's activation on the region, at rest. The
score accumulates the interference of the foci's fields,

    C(v) = sum_n |sum_i alpha_i psi_i(v, n dt)|^2 dt      (n = 0 .. N-1),

large where the foci's waves keep arriving together.

**Integrator.** Leapfrog with the damping taken semi-implicitly (``K = c^2 L``)::

    v_{n+1/2} (1 + beta dt / 2) = v_{n-1/2} (1 - beta dt / 2) - dt K psi_n
    psi_{n+1} = psi_n + dt v_{n+1/2}

started at rest by ``v_{1/2} = -(dt / 2) K psi_0``. Gershgorin bounds ``lambda_max(L)`` by
twice the largest weighted degree ``lambda_hat``; the step is
``dt = safety * 2 / (c * sqrt(lambda_hat))``, inside the stability bound
``dt < 2 / (c * sqrt(lambda_max))`` for any ``safety < 1``.

**Why the energy does not grow.** Take the scheme's energy
``E~_{n+1/2} = 1/2 |v_{n+1/2}|^2 + 1/2 psi_{n+1}^T K psi_n``. Multiplying the scheme by
``psi_{n+1} - psi_{n-1} = dt (v_{n+1/2} + v_{n-1/2})`` and using the symmetry of ``K``:

    E~_{n+1/2} - E~_{n-1/2} = -(beta dt / 4) |v_{n+1/2} + v_{n-1/2}|^2 <= 0.

With ``bar psi = (psi_n + psi_{n+1}) / 2``, ``E~ = 1/2 v^T (I - dt^2 K / 4) v +
1/2 bar psi^T K bar psi``, which is the continuous energy ``E = 1/2 |psi'|^2 +
1/2 c^2 psi^T L psi`` up to the factor ``(I - dt^2 K / 4)``, positive definite exactly when
the step is inside the stability bound. So ``E~`` never increases, starts at most at
``E(0) = 1/2 psi_0^T K psi_0``, and ``E`` at the midpoints stays below
``E(0) / (1 - q)``, ``q = dt^2 lambda_max(K) / 4 <= safety^2``. Both are recorded per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import Field

from .csr import GraphVersion
from .errors import GraphError, GraphModel
from .traversal import Traversal

__all__ = [
    "DEFAULT_WAVE",
    "MAX_WAVE_NODES",
    "WaveConfig",
    "WaveResult",
    "damped_wave",
    "region_laplacian",
]

Floats = npt.NDArray[np.float64]
Int64s = npt.NDArray[np.int64]
MAX_WAVE_NODES = 4096
"""Regions are small; the Laplacian is held dense, so larger ones are refused."""


class WaveConfig(GraphModel):
    """Wave speed ``c``, damping ``beta``, simulated time and the step's safety factor
    (``retrieval.wave``)."""

    section = "wave"
    speed: float = Field(1.0, gt=0)
    damping: float = Field(0.5, ge=0)
    duration: float = Field(10.0, gt=0)
    safety: float = Field(0.5, gt=0, lt=1)
    max_steps: int = Field(4000, ge=1)



DEFAULT_WAVE = WaveConfig()
"""The documented wave settings."""

@dataclass(frozen=True, eq=False)
class WaveResult:
    """Accumulated interference per node, per-focus intensity and the energy record.

    ``energy[n]`` is the scheme's energy after step ``n + 1`` (never increasing);
    ``midpoint_energy[n]`` the continuous energy at the same half step.
    """

    nodes: Int64s
    interference: Floats
    per_focus: Floats
    energy: Floats
    midpoint_energy: Floats
    initial_energy: float
    dt: float
    steps: int
    lambda_bound: float


def region_laplacian(graph: GraphVersion, traversal: Traversal, nodes: Int64s) -> Floats:
    """Dense ``L = D - W`` of the symmetrised region over sorted ``nodes``."""
    if nodes.shape[0] > MAX_WAVE_NODES:
        raise GraphError(f"a wave region holds at most {MAX_WAVE_NODES} nodes")
    edges = graph.induced_edges(nodes)
    u, v = np.searchsorted(nodes, edges.src), np.searchsorted(nodes, edges.dst)
    weight = edges.weight.astype(np.float64)
    k = nodes.shape[0]
    a = np.zeros((k, k))
    np.add.at(a, (u, v), weight * traversal.forward_table[edges.edge_type])
    np.add.at(a, (v, u), weight * traversal.reverse_table[edges.edge_type])
    w = (a + a.T) / 2.0
    np.fill_diagonal(w, 0.0)
    return np.asarray(np.diag(w.sum(axis=1)) - w, dtype=np.float64)


def damped_wave(
    nodes: Int64s,
    laplacian: Floats,
    initial: Floats,
    config: WaveConfig = DEFAULT_WAVE,
    alpha: Floats | None = None,
) -> WaveResult:
    """Integrate one field per column of ``initial`` (shape ``(k, F)``) from rest."""
    weights = np.ones(initial.shape[1]) if alpha is None else np.asarray(alpha, np.float64)
    k = nodes.shape[0]
    if laplacian.shape != (k, k) or initial.shape[0] != k or weights.shape != initial.shape[1:]:
        raise GraphError("wave shapes: nodes (k,), laplacian (k, k), initial (k, F), alpha (F,)")
    stiffness = config.speed**2 * laplacian
    bound = max(2.0 * float(np.abs(np.diag(laplacian)).max(initial=0.0)), 1e-12)
    dt = min(config.safety * 2.0 / (config.speed * math.sqrt(bound)), config.duration)
    steps = min(config.max_steps, max(1, math.ceil(config.duration / dt)))
    psi = np.array(initial, dtype=np.float64)
    velocity = -(dt / 2.0) * (stiffness @ psi)
    keep, gain = 1.0 - config.damping * dt / 2.0, 1.0 + config.damping * dt / 2.0
    combined = np.zeros(psi.shape[0])
    per_focus = np.zeros_like(psi)
    energy, midpoint = np.empty(steps), np.empty(steps)
    for n in range(steps):
        combined += (psi @ weights) ** 2 * dt
        per_focus += psi**2 * dt
        if n:
            velocity = (keep * velocity - dt * (stiffness @ psi)) / gain
        nxt = psi + dt * velocity
        energy[n] = _energy(velocity, nxt, psi, stiffness)
        middle = (psi + nxt) / 2.0
        midpoint[n] = _energy(velocity, middle, middle, stiffness)
        psi = nxt
    initial_energy = 0.5 * float(np.sum(initial * (stiffness @ initial)))
    return WaveResult(
        nodes, combined, per_focus, energy, midpoint, initial_energy, dt, steps, bound
    )


def _energy(velocity: Floats, a: Floats, b: Floats, stiffness: Floats) -> float:
    """``1/2 |v|^2 + 1/2 a^T K b`` summed over the foci's fields."""
    return 0.5 * float(np.sum(velocity**2)) + 0.5 * float(np.sum(a * (stiffness @ b)))
