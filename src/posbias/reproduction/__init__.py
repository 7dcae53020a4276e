"""The reproduction matrix: every figure the papers report that the workflow computes, beside what a
run measured, marked ``OK``, ``differs`` or ``not run`` (rule ``reproduction``:
``results/tables/reproduction.{md,csv,tex}``).

:mod:`~posbias.reproduction.expected` reads the expected figures (``config/reproduction/<paper>.yaml``,
each with its verbatim quote), :mod:`~posbias.reproduction.identity` finds the papers' collections,
first stages and models in a run's config, :mod:`~posbias.reproduction.statistics` computes each kind of
figure from result files, and :mod:`~posbias.reproduction.matrix` binds, measures and tabulates.
"""

from posbias.reproduction.expected import Expected, load
from posbias.reproduction.identity import Names, resolve
from posbias.reproduction.matrix import DIFFERS, NOT_RUN, OK, Plan, bind, compute, measure, plan, row, summary, summary_of, table
from posbias.reproduction.files import RESULT_SCHEMAS
from posbias.reproduction.statistics import STATISTICS, Measured, NotRun, Statistic

__all__ = ["DIFFERS", "Expected", "Measured", "NOT_RUN", "Names", "NotRun", "OK", "Plan", "RESULT_SCHEMAS", "STATISTICS", "Statistic",
           "bind", "compute", "load", "measure", "plan", "resolve", "row", "summary", "summary_of", "table"]
