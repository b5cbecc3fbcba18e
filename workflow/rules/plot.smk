rule figure:
    input:
        metrics="results/tables/{study}/metrics.csv",
        status="results/tables/{study}/status.csv",
        artifacts=get_study_artifacts,
    output:
        png=report(
            "results/figures/{study}/{figure}.png",
            caption="../report/figure.rst",
            category="Figures",
            subcategory="{study}",
            labels=get_figure_labels,
        ),
        pdf="results/figures/{study}/{figure}.pdf",
    log:
        "logs/figures/{study}/{figure}.log",
    conda:
        ENV
    params:
        code=stage_code("figure"),
        figure=get_figure_spec,
        study=get_study_title,
        runs=get_study_run_keys,
        about=get_figure_about,
    script:
        "../scripts/figure.py"


rule claims:
    input:
        metrics="results/tables/{study}/metrics.csv",
        status="results/tables/{study}/status.csv",
        clients_rounds="results/tables/{study}/clients_rounds.csv",
    output:
        csv="results/tables/{study}/claims.csv",
        markdown="results/tables/{study}/claims.md",
    log:
        "logs/claims/{study}.log",
    conda:
        ENV
    params:
        code=stage_code("claims"),
        claims=get_study_claims,
    script:
        "../scripts/claims.py"


rule report_tables:
    input:
        summary="results/tables/{study}/summary.csv",
        clients="results/tables/{study}/clients.csv",
        claims="results/tables/{study}/claims.csv",
    output:
        summary=report(
            "results/tables/{study}/summary.html",
            caption="../report/summary.rst",
            category="Tables",
            subcategory="{study}",
        ),
        claims=report(
            "results/tables/{study}/claims.html",
            caption="../report/claims.rst",
            category="Claims",
            subcategory="{study}",
        ),
    log:
        "logs/report_tables/{study}.log",
    conda:
        ENV
    params:
        code=stage_code("report_tables"),
        about=get_study_about,
        paper=get_study_paper,
        metrics=get_study_table_metrics,
        tuned=get_study_tuned,
    script:
        "../scripts/report_tables.py"
