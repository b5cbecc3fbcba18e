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
        ),
        pdf="results/figures/{study}/{figure}.pdf",
    params:
        figure=get_figure_spec,
        study=get_study_title,
        runs=get_study_run_keys,
    conda:
        ENV
    log:
        "logs/figures/{study}/{figure}.log",
    script:
        "../scripts/figure.py"


rule claims:
    input:
        metrics="results/tables/{study}/metrics.csv",
        status="results/tables/{study}/status.csv",
    output:
        csv="results/tables/{study}/claims.csv",
        markdown=report(
            "results/tables/{study}/claims.md",
            caption="../report/claims.rst",
            category="Claims",
            subcategory="{study}",
        ),
    params:
        claims=get_study_claims,
    conda:
        ENV
    log:
        "logs/claims/{study}.log",
    script:
        "../scripts/claims.py"
