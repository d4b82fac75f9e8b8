"""Which jobs a person means: keys (or their first characters), a group, or a recipe's groups. Deleting and
archiving both start here, so both read ``--keys``, ``--group`` and ``--recipe`` alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labcore.errors import LabError

RECIPE_GROUP = "recipe:{name}:"  # how a recipe's group names start (labcore.recipes.base.Plan.group)


@dataclass(frozen=True)
class Selection:
    keys: tuple[str, ...] = ()
    group: str = ""
    recipe: str = ""
    everything: bool = False  # every job and group of the lab (resetting a class)

    @property
    def empty(self) -> bool:
        return not (self.keys or self.group or self.recipe or self.everything)

    def keys_in(self, store: Any) -> list[str]:
        """The named keys in full (an unknown or ambiguous prefix is refused by name)."""
        if self.everything:
            return store.table.keys()
        return [store.resolve_key(k) for k in self.keys]

    def groups_in(self, store: Any) -> list[str]:
        """The named group and the recipe's groups (an unknown name is refused, listing the valid ones)."""
        if self.everything:
            return store.groups()
        found = [store.group(self.group)["name"]] if self.group else []
        if self.recipe:
            prefix = RECIPE_GROUP.format(name=self.recipe)
            recipe = [g for g in store.groups() if g.startswith(prefix)]
            if not recipe:
                names = sorted({g.split(":")[1] for g in store.groups() if g.startswith("recipe:")})
                raise LabError(f"no jobs of recipe {self.recipe!r} in the store; recipes with jobs here: "
                               f"{', '.join(names) or '(none)'}")
            found += recipe
        return found
