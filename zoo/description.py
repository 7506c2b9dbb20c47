"""`zoo.describe`: a registry entry's config, reference, parameter count and signature, built from nothing."""

import dataclasses
from typing import Any

from zoo import registry


@dataclasses.dataclass(frozen=True)
class Description:
    """What `zoo.describe` returns; `print` it for a readable summary."""

    name: str
    family: str
    reference: str
    config: Any
    num_params: int | None
    inputs: dict
    outputs: dict

    def __str__(self):
        lines = [f"{self.name}  ({self.family})"]
        if self.reference:
            lines.append(f"  reference: {self.reference}")
        params = "unknown until built" if self.num_params is None else f"{self.num_params:,}"
        lines.append(f"  parameters: {params}")
        lines.append("  inputs:")
        lines += [f"    {k}: {v}" for k, v in self.inputs.items()]
        lines.append("  outputs:")
        lines += [f"    {k}: {v}" for k, v in self.outputs.items()]
        lines.append("  config:")
        for field in dataclasses.fields(self.config):
            lines.append(f"    {field.name} = {getattr(self.config, field.name)!r}")
        return "\n".join(lines)

    def to_dict(self):
        return {
            "name": self.name,
            "family": self.family,
            "reference": self.reference,
            "num_params": self.num_params,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "config": dataclasses.asdict(self.config),
        }


def describe(name, *, weights=None, **overrides):
    """Config, paper reference, parameter count (computed, nothing built) and signature.

    With `weights`, the config `get(name, weights=weights, **overrides)` builds.
    """
    item = registry.entry(name)
    cfg = registry.config(name, weights=weights, **overrides)
    num_params = cfg.num_params() if hasattr(cfg, "num_params") else None
    inputs, outputs = cfg.signature() if hasattr(cfg, "signature") else ({}, {})
    return Description(name, item.family, item.reference, cfg, num_params, inputs, outputs)
