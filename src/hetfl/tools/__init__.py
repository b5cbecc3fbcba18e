"""Command-line tools beside the workflow, each run as ``python -m hetfl.tools.<name>``: the suite's plan and
cost (:mod:`~hetfl.tools.plan`; its cost model in :mod:`~hetfl.tools.plan_work` and
:mod:`~hetfl.tools.plan_fit`), a training job's timing (:mod:`~hetfl.tools.bench`), the official pFedMe code
side by side (:mod:`~hetfl.tools.official_pfedme`) and the results pages from result tables
(:mod:`~hetfl.tools.results_pages`)."""
