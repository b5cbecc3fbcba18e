"""hetfl: reproducible federated learning under client heterogeneity.

The library behind the Snakemake workflow: datasets and partitions (`hetfl.data`), batched models
(`hetfl.models`), the vectorized federation engine (`hetfl.engine`), one module per algorithm
(`hetfl.algorithms`), and the aggregation, claims and figures stages.
"""

__version__ = "0.1.0"
