"""One pointwise scorer's decisions for its dataset's consumer over M presentations (posbias.consumers)."""

from posbias import consumers, orders, readers, schemas
from posbias.data.collection import grades_by_query, passage_texts, relevance_threshold, top_grade
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "decisions") as log:
    runs = dict(zip(sm.params.orders, sm.params.runs))
    qrels = schemas.read(sm.input.qrels, "qrels")
    relevant_grade = relevance_threshold(sm.params.relevant_grade, top_grade(qrels))  # binary qrels: grade 1
    qa = {}
    if sm.params.reader:  # a consumer that reads retention sets (multi-document QA)
        golds = dict(schemas.read(sm.input.answers, "answers").iter_rows())
        reader = readers.build(sm.params.reader["spec"], sm.params.reader["path"], grades_by_query(qrels), golds,
                               relevant_grade, sm.params.device, sm.params.word_budget)
        qa = {"reader": reader, "golds": golds, "texts": passage_texts(schemas.read(sm.input.corpus, "corpus")),
              "questions": dict(schemas.read(sm.input.queries, "queries").select("query_id", "text").iter_rows())}
    table, details = consumers.decide(
        sm.params.consumer, schemas.read(runs[orders.ORIGINAL], "run"),
        [schemas.read(runs[o], "run") for o in sm.params.orders if orders.is_kind(o, "shuffled")], qrels,
        relevant_grade, sm.params.ocsft["presentations"], sm.params.ocsft["grid_points"],
        {"model": sm.wildcards.model, "dataset": sm.wildcards.dataset, "retriever": sm.wildcards.retriever}, **qa)
    schemas.write(table, sm.output.table, "decisions")
    schemas.write(details, sm.output.details, "decision_details")
    log.info("%s over %d queries: quality %.3f, flip %.3f", sm.params.consumer, table.height,
             table["quality"].mean(), table["flip"].mean())
