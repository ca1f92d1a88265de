"""The studies' datasets: schemas, loaders, builders and synthetic twins.

Adding a dataset: a schema (``schemas.register_schema``), optional subsets (``loading.SUBSETS``),
a builder (``build.BUILDERS``), a synthetic generator (``synthetic.GENERATORS``) and a card
template in ``cards/<name>.md``.
"""

from vlfair.data.conform import DataError, conform
from vlfair.data.loading import SUBSETS, balanced_sample, load_dataset, sampling_record
from vlfair.data.schemas import SCHEMAS, Schema

__all__ = ["DataError", "SCHEMAS", "SUBSETS", "Schema", "balanced_sample", "conform", "load_dataset", "sampling_record"]
