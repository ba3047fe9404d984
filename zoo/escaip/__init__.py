"""EScAIP: an efficiently scaled attention interatomic potential (NeurIPS 2024), fairchem's V2 model.

    >>> import zoo
    >>> model = zoo.load("path/to/escaip-repo")       # an EScAIPModule (LightningModule)
    >>> atoms.calc = model.as_calculator()             # ASE energies, forces (and stress)
"""

from zoo.registry import register_method

register_method(
    "escaip",
    modules={"escaip": "zoo.escaip.module:EScAIPModule"},
    catalog="zoo.escaip.catalog",
    cli="zoo.escaip.cli:register_cli",
    paper="https://arxiv.org/abs/2410.24169",
)
