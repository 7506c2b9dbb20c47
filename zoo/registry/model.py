"""The zoo's functional model: a `keras.Model` that records its family in its config.

`FamilyModel(inputs, outputs, name=..., family="transformer")` is a functional model like
`keras.Model(inputs, outputs, name=...)`, the same layers, weights and outputs, with one
field more in `get_config`: `family`, the name of the zoo family that built it (the
registry's `Family.name`). A `.keras` file keeps the config, so a model loaded with
`keras.saving.load_model` still says which family it is (`model.family`), and
`zoo.registry.family_of_model` finds the family object (its decoding step, its export)
without reading layer names. (keras-hub's `Backbone` records its own fields the same way.)
Files saved before the field existed load as plain functional models; their family is
read from their layer names (`zoo.families.model_family`).
"""

import keras


@keras.saving.register_keras_serializable(package="zoo")
class FamilyModel(keras.Model):
    """A functional model of the zoo that knows its family.

    Args:
        inputs, outputs, name: as `keras.Model`'s functional constructor (e.g.
            `{"source": (B, S), "target": (B, T)}` -> logits `(B, T, V)`).
        family: the family's registry name (`"transformer"`, `"seq2seq"`, `"convs2s"`,
            `"vit"`), kept in `get_config` and so in `.keras` files.
    """

    def __init__(self, inputs, outputs, name=None, *, family=None, **kwargs):
        super().__init__(inputs, outputs, name=name, **kwargs)
        self.family = family

    def get_config(self):
        return {**super().get_config(), "family": self.family}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        family = config.pop("family", None)
        model = super().from_config(config, custom_objects=custom_objects)
        model.family = family
        return model
