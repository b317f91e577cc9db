"""trglab: the shared code behind the book "executable lab notes on differentiable TRG".

Layers (imports point downwards only):

    ising      model tensor T[u, l, d, r] of the 2D Ising model
    svd        truncated SVD with an exact, any-order derivative
    trg        one TRG step, the truncation schedule, ln Z / N
    grads      three ways to the gradient: whole graph, checkpoint, staged
    onsager    the exact solution (reference values)
    models     small executable models of tenferro mechanisms
    experiments  the seed pages' programs (p25_whole_graph, p26_checkpoint, ...)
    records, check, page, flowchart, plotting, build   book infrastructure

Importing the package switches JAX to float64: every figure in the book is x64.
"""

import jax

jax.config.update("jax_enable_x64", True)

__all__ = ["__version__"]
__version__ = "0.1.0"
