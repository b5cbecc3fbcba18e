"""The partition schemes, one module each, with the same four members.

- ``Options``: the scheme's config options, a frozen dataclass derived from
  ``hetfl.data.partitioners.common.PartitionOptions`` (the options every scheme takes) that adds its own;
- ``validate(spec, key, info) -> spec``: static checks against a ``DatasetInfo``, info-dependent defaults;
- ``check(spec, info, seed, key)``: seed-dependent feasibility from the info alone;
- ``assign(spec, y, users, info, seed, key) -> Assignment``: the clients' index lists before the
  per-client train/test split (done by ``hetfl.data.partition``).
"""

from hetfl.data.partitioners import clusters, dirichlet, iid, natural, natural_range, pathological

SCHEME_MODULES = {
    "clusters": clusters,
    "dirichlet": dirichlet,
    "iid": iid,
    "natural": natural,
    "natural_range": natural_range,
    "pathological": pathological,
}
