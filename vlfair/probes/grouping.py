"""The settings that say a researcher's groups: ``groups`` (an attribute's values), ``labels`` (a map folding a
dataset's labels into them) and ``age_bins`` (the bins numeric ages fall in), read where the data is brought to
its schema (:class:`vlfair.data.taxonomy.Taxonomy`). Left at their defaults, the study's lists (the dataset
schema's vocabularies) hold and nothing of them enters a run's family; set, they do, so runs of different
taxonomies never share a board.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field

from vlfair.data.taxonomy import Taxonomy, check_age_bins
from vlfair.probes.settings import GROUPING, Name, distinct

# the settings' values that leave the study's lists in place: measuring_settings leaves them out, so every run
# of the study's groups shares one family, however its settings were written
DEFAULTS: dict[str, Any] = {"groups": {}, "labels": {}, "age_bins": None}
assert tuple(DEFAULTS) == GROUPING  # the settings' own list of them orders --help's keys


def _as_text(value: Any) -> Any:
    """A label map's key as the text a label file holds: UTKFace's race code 2 in YAML (``2: Asian``) is "2"."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _age_bins(bins: list[str]) -> list[str]:
    problems = check_age_bins(bins)
    if problems:
        raise ValueError("; ".join(problems))
    return bins


Label = Annotated[Name, BeforeValidator(_as_text)]
GroupList = Annotated[list[Name], AfterValidator(distinct()), Field(min_length=2)]


class Grouped(BaseModel):
    groups: dict[Name, GroupList] = Field(
        default_factory=dict, description="attribute -> its groups, in place of the study's list (e.g. "
                                          "groups.race=[White,Black,Asian,Indian,Others]); at least two each")
    labels: dict[Name, dict[Label, Name]] = Field(
        default_factory=dict, description="attribute -> {a dataset's label: the group it is} (labels.race=@map.yaml, "
                                          "a line 'East Asian: Asian' each)")
    age_bins: Annotated[list[Name], AfterValidator(distinct()), AfterValidator(_age_bins)] | None = Field(
        None, min_length=1, description="the bins a numeric age falls in ('20-29', '70+', 'more than 70'; null: "
                                        "FairFace's nine)")

    def taxonomy(self) -> Taxonomy:
        return Taxonomy(self.groups, self.labels, self.age_bins)


def at_defaults_left_out(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` without the grouping settings left at their defaults (see :data:`DEFAULTS`)."""
    return {key: value for key, value in settings.items() if not (key in DEFAULTS and value == DEFAULTS[key])}


__all__ = ["DEFAULTS", "Grouped", "at_defaults_left_out"]
