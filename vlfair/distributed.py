"""The process group an embedding run is part of (torchrun / accelerate launch), or a world of one.

Under a launcher, every collective goes through Accelerate's own helpers (``PartialState``,
``split_between_processes``, ``gather_object``, ``broadcast_object_list``, ``wait_for_everyone``);
a world of one never touches Accelerate's state, so a notebook that later builds its own
``Accelerator`` is free to choose its settings.

One GPU per process: more processes on a machine than it has GPUs is one line on every process, exit 2
(``models.base.DeviceError``); ``CUDA_VISIBLE_DEVICES=`` runs them all on the CPU, as the suite's
multi-process tests do where a machine has fewer GPUs (``testing.launch_env``).
"""

from __future__ import annotations

import atexit
import dataclasses
import os
from typing import TypeVar

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def split(self, items: list[T]) -> list[T]:
        """This process's contiguous share of ``items`` (Accelerate's ``split_between_processes``).

        Shares are in rank order and differ in length by at most one; with fewer items than
        processes the last shares are empty. Not padded: the caller must still join every
        collective with an empty share.

        Args:
            items: a list (a ``range`` would come back whole on every process: Accelerate slices
                only lists, tuples, tensors, dicts and datasets).

        Returns:
            The slice of ``items`` this process works on.
        """
        if self.size == 1:
            return items
        from accelerate import PartialState

        with PartialState().split_between_processes(list(items)) as share:
            return share

    def gather(self, items: list[T]) -> list[T]:
        """Every process's ``items``, concatenated in rank order, on every process (``gather_object``;
        pickled, fine for chunk-sized payloads)."""
        if self.size == 1:
            return items
        from accelerate.utils import gather_object

        return gather_object(items)

    def broadcast(self, obj: T) -> T:
        """The main process's ``obj`` on every process (``broadcast_object_list``)."""
        if self.size == 1:
            return obj
        from accelerate.utils import broadcast_object_list

        return broadcast_object_list([obj])[0]

    def barrier(self) -> None:
        if self.size > 1:
            from accelerate import PartialState

            PartialState().wait_for_everyone()


def current_world() -> World:
    """Join the process group the launcher set up (via Accelerate's ``PartialState``), if there is one.

    Raises:
        RuntimeError: a group exists that Accelerate cannot see (formed without the launcher's
            RANK / WORLD_SIZE / LOCAL_RANK variables, e.g. under ``mp.spawn``): its helpers would
            then act on this process alone and each process would return only its own share.
    """
    import torch.distributed as dist

    formed_before = dist.is_available() and dist.is_initialized()
    size = dist.get_world_size() if formed_before else int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World()
    import torch
    from accelerate import PartialState

    # Accelerate forms a CPU (gloo) group only when told to; without cpu=True a GPU-less torchrun
    # would silently give every process a world of one. The state is a singleton: gather_object
    # and the other helpers find this one, and a state the caller built first is reused.
    state = PartialState(cpu=not torch.cuda.is_available())
    if state.num_processes != size:
        raise RuntimeError(
            f"this run has {size} processes but Accelerate's state sees {state.num_processes}: a group formed "
            "without the launcher's RANK, WORLD_SIZE and LOCAL_RANK (launch with torchrun or accelerate launch), "
            "or a PartialState built earlier without cpu=True on a machine without a GPU")
    if not formed_before:  # the group is ours to close; one the caller formed is theirs
        atexit.register(_close_group)
    return World(state.process_index, state.num_processes)


def _close_group() -> None:
    """Close the group vlfair formed before the interpreter exits: a gloo group left to the exit's
    teardown can abort a process whose work is done ("terminate called without an active
    exception", seen once in a torchrun test under load)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
