"""LineFit: a linear regressor, the smallest method shipped as a plugin (tests/core/test_plugin.py)."""

from zoo.registry import register_method

register_method(
    "linefit",
    modules={"linefit-linear": "zoo_linefit.module:LineFit"},
    catalog="zoo_linefit.catalog",
)
