"""Every setting that changes what the optimizer produces, in one place.

The kernel cache key (a later issue) is built from ``OptimizeConfig.key()``
plus library versions, so a new knob belongs here and nowhere else.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class OptimizeConfig:
    """Knobs of one optimization run.

    ``verify_seeds``: seeds of the fresh random input sets every candidate is
    checked on (at least three).  ``e2e_seed``: seed of the inputs of the final
    end-to-end check.  ``use_triton``: False makes every sub-problem a library
    call (a baseline).  ``timing``: ``auto`` measures on a GPU and estimates
    without one; ``estimate`` always uses the cost model.  ``target_gpu``: the
    GPU the cost model describes.  ``timeout_s``: wall-clock limit of the whole
    run in seconds (None: no limit).  ``load_timeout_s``: limit on loading
    the user's file (import, get_inputs, building and running the model once).  ``compare_compile``: on a GPU, also time
    torch.compile of the original model for the report.  ``force_triton``:
    choose every verified Triton candidate whatever its cost (tests use it to
    exercise every generated kernel in the composed model).
    """

    verify_seeds: tuple = (101, 202, 303)
    e2e_seed: int = 4242
    use_triton: bool = True
    timing: str = "auto"
    target_gpu: str = "H200"
    timeout_s: float | None = None
    load_timeout_s: float | None = 300.0
    compare_compile: bool = True
    force_triton: bool = False

    def key(self) -> dict:
        """The settings that change generated code or its acceptance."""
        return {"verify_seeds": list(self.verify_seeds), "use_triton": self.use_triton, "force_triton": self.force_triton}
