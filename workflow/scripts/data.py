"""Stage `data`: load or generate a dataset by name and save it as one .npz."""

import json
from pathlib import Path

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.data.registry import load_dataset  # noqa: E402

spec = json.loads(snakemake.params.spec)
out = Path(snakemake.output[0])
dataset = load_dataset(spec, out.parent)
dataset.save(out)
print(
    f"{spec['name']}: {len(dataset.y)} samples, shape {dataset.sample_shape}, {dataset.num_classes} classes"
)
