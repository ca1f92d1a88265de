"""The process group an embedding run is part of (torchrun / accelerate launch), or a world of one."""

from __future__ import annotations

import atexit
import dataclasses
import os
from typing import Any


@dataclasses.dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order (pickled; fine for chunk-sized payloads)."""
        if self.size == 1:
            return [obj]
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.size
        dist.all_gather_object(gathered, obj)
        return gathered

    def barrier(self) -> None:
        if self.size > 1:
            import torch.distributed as dist

            dist.barrier()


def current_world() -> World:
    """Join the process group the launcher set up (via Accelerate), if there is one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size())
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch
        from accelerate import PartialState

        # Accelerate forms a CPU (gloo) group only when told to; without cpu=True a GPU-less
        # torchrun would silently give every process a world of one.
        state = PartialState(cpu=not torch.cuda.is_available())
        atexit.register(_close_group)
        return World(state.process_index, state.num_processes)
    return World()


def _close_group() -> None:
    """Close the group vlfair formed before the interpreter exits: a gloo group left to the exit's
    teardown can abort a process whose work is done ("terminate called without an active
    exception", seen once in a torchrun test under load)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
