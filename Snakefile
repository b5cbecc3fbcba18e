# hetfl: federated learning under client heterogeneity, from data to figures.
# `snakemake --cores all` runs the default suite (config/config.yaml); see README.md and config/README.md.
from snakemake.utils import min_version

min_version("9.0")


# The default suite is the workflow's config only when no --configfile is given: `--configfile mine.yaml`
# runs the studies of mine.yaml alone (add config/config.yaml to the command to run both).
if not workflow.config_settings.configfiles:
    workflow.configfile("config/config.yaml")


report: "workflow/report/workflow.rst"


# A training job takes one `train_slots`. With `--resources train_slots=1` (profiles/slurm) that is a limit per
# submitted group job, not for the whole run: a group of short training jobs runs them one after another on
# one core (common.smk, get_train_group).
resource_scopes:
    train_slots="local",


# On a cluster (profiles/slurm) only training jobs are submitted; these run on the submitting (login) node:
# `data` may download (compute nodes often have no internet), the others take seconds, less than a queue's wait.
localrules:
    all,
    data,
    partition,
    partition_stats,
    aggregate,
    claims,
    figure,
    report_tables,
    splits,
    tune,
    tuning_table,


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/partition.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/plot.smk"
include: "workflow/rules/tune.smk"


rule all:
    default_target: True
    input:
        final_outputs(),
