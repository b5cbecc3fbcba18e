"""The workflow's stages, one module each, called by the scripts of ``workflow/scripts/``: the config
(:mod:`~hetfl.pipeline.config`; its own settings' values: :mod:`~hetfl.pipeline.settings`), training (:mod:`~hetfl.pipeline.train`, its run record
:mod:`~hetfl.pipeline.records`, the jobs' resources :mod:`~hetfl.pipeline.resources`), aggregation across
seeds (:mod:`~hetfl.pipeline.aggregate`), claims (:mod:`~hetfl.pipeline.claims`), figures
(:mod:`~hetfl.pipeline.plotting`), the report's pages (:mod:`~hetfl.pipeline.report`) and tuning
(:mod:`~hetfl.pipeline.tuning`). The library they drive (engine, algorithms, models, data) never imports them."""
