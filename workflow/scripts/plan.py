"""The compute plan of the config: per job order (results/plan/orders.parquet), per family and model
(results/plan/cost.md, .csv, .tex) and per scorer's serving budget (results/plan/serving.md, .csv, .tex)."""

from pathlib import Path

from posbias import plan
from posbias.jobs import logged
from posbias.paper.writers import write

sm = snakemake  # noqa: F821
config = sm.params.settings  # only what the plan reads of the config (plan.settings)
with logged(sm, "plan") as log:
    orders = plan.with_seconds(plan.plan_orders(config), config, throughput=sm.input.throughput)
    orders.write_parquet(sm.output.orders)
    summary = plan.summary(orders, config)
    write(plan.table(summary, config["plan"]["device"]), Path(sm.output.table).with_suffix(""),
          f"Compute plan on {config['plan']['device']}")
    serving = plan.serving(orders, **sm.params.serving)
    write(plan.serving_table(serving), Path(sm.output.serving).with_suffix(""), "Serving budgets per query (planned)")
    log.info("\n%s\n%s", Path(sm.output.table).read_text(), Path(sm.output.serving).read_text())
