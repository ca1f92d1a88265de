"""The datasets: one registered spec each (:mod:`vlfair.data.registry`: schema, synthetic twin,
subsets, builder and card, the Space's sampling), and the loaders, builders and twins that read them.
The studies' four are defined in :mod:`vlfair.data.studies` and named below (:data:`BUILT_IN`, the
registry's lazy entries); a new dataset is one module registering its spec (``register_dataset``, or
the entry-point group ``vlfair.datasets``).

Names are imported when first read: the registry is light (the CLI lists the datasets for ``--help``),
the loaders bring the datasets library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vlfair._lazy import lazy_getattr

# (the function, not its module: vlfair.data.conform(...) checks a dataset against a schema)
from vlfair.data.conform import DataError as DataError
from vlfair.data.conform import conform as conform
from vlfair.data.registry import DATASETS as _DATASETS

if TYPE_CHECKING:
    from vlfair.data.loading import balanced_sample as balanced_sample
    from vlfair.data.loading import load_dataset as load_dataset
    from vlfair.data.loading import sampling_record as sampling_record
    from vlfair.data.registry import DATASETS as DATASETS
    from vlfair.data.registry import SCHEMAS as SCHEMAS
    from vlfair.data.registry import DatasetSpec as DatasetSpec
    from vlfair.data.registry import SourceFile as SourceFile
    from vlfair.data.registry import dataset_names as dataset_names
    from vlfair.data.registry import dataset_spec as dataset_spec
    from vlfair.data.registry import register_dataset as register_dataset
    from vlfair.data.schemas import Schema as Schema

_LAZY = {"balanced_sample": "loading", "load_dataset": "loading",
         "sampling_record": "loading", "DATASETS": "registry", "SCHEMAS": "registry", "DatasetSpec": "registry",
         "SourceFile": "registry", "dataset_names": "registry", "dataset_spec": "registry",
         "register_dataset": "registry", "Schema": "schemas"}

__all__ = sorted([*_LAZY, "BUILT_IN", "DataError", "conform"])

# the studies' datasets, read when first asked for (named here, above the registry that
# vlfair.data.studies imports: the registry names no module of datasets); Python runs this before any
# import of vlfair.data.registry returns, so that every reader sees them
BUILT_IN = {"professions": "vlfair.data.studies:PROFESSIONS_SPEC", "fairface": "vlfair.data.studies:FAIRFACE_SPEC",
            "multi30k": "vlfair.data.studies:MULTI30K_SPEC", "pfi": "vlfair.data.studies:PFI_SPEC"}
for _name, _target in BUILT_IN.items():
    _DATASETS.lazy(_name, _target)


__getattr__ = lazy_getattr(__name__, {name: f".{module}" for name, module in _LAZY.items()})
