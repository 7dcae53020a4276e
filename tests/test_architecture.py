"""The architecture's promises: each extensible vocabulary is declared once (a registry), every reranker
implements the declared interface, the package has no import cycle, and the workflow is format-clean
(`snakemake --lint` is tests/test_workflow.py::test_lint_is_clean)."""

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import posbias
from posbias import config, debias, methods, orders, paper, registry
from posbias.rerankers import Reranker, WindowResult, modes
from posbias.retrieval import kinds

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "posbias"


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_the_package_has_no_import_cycle():
    """Module-level and function-level imports alike: a lazy import only hides a cycle."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    # a package's __init__ re-exporting its own submodules is not a cycle of ideas
    for name in graph:
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


# Modules allowed over MAX_LINES, each with its reason (none now: config and plan are packages since 0.13.0).
LONG_MODULES: dict[str, str] = {}
MAX_LINES = 400


def test_no_module_is_over_400_lines_without_a_stated_reason():
    long = {str(path.relative_to(REPO)): n for path in SRC.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert set(long) <= set(LONG_MODULES), {k: v for k, v in long.items() if k not in LONG_MODULES}


def test_every_package_module_imports():
    for info in pkgutil.walk_packages(posbias.__path__, "posbias."):
        importlib.import_module(info.name)


def test_every_reranker_implements_the_declared_interface():
    import posbias.debias.wrappers  # noqa: F401
    import posbias.rerankers.first  # noqa: F401
    import posbias.rerankers.generation  # noqa: F401
    import posbias.scoring  # noqa: F401
    import posbias.rerankers.simulated  # noqa: F401

    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith(("posbias.rerankers.", "posbias.debias.")) or name == "posbias.scoring":
            for cls_name, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == name and hasattr(cls, "rank"):
                    found[cls_name] = cls
    assert {"SimulatedReranker", "SimulatedGrader", "FirstReranker", "GenerationReranker", "GradesScorer",
            "PermutationDebiased", "CapCalDebiased"} <= set(found)
    for cls in found.values():
        assert issubclass(cls, Reranker), cls
        assert cls.priors in (None, "per_window", "per_step", "per_slot"), cls
        if cls.priors in ("per_window", "per_slot"):
            assert cls.content_free_inputs is not Reranker.content_free_inputs, cls
        if cls.priors == "per_step":
            assert cls.rank_with_priors is not Reranker.rank_with_priors, cls
    assert found["GradesScorer"].pointwise and found["SimulatedGrader"].pointwise
    assert not found["FirstReranker"].pointwise and found["GenerationReranker"].decodes


def test_every_mode_is_in_the_schema_and_its_classes_match_its_family():
    """The schema's `mode` enum is the registry's names; each class a mode builds says the mode's family
    (``pointwise``) and is built by its own ``from_config``."""
    assert config.schema_node("models")["additionalProperties"]["properties"]["mode"]["enum"] == list(modes.MODES)
    for name, mode in modes.MODES.items():
        for kind, target in mode.classes.items():
            cls = modes.implementation({"mode": name, "kind": kind})
            assert cls.pointwise == (mode.family == "pointwise"), (name, kind)
            assert cls.decodes == (mode.decodes and kind == "causal_lm"), (name, kind)  # a simulator never decodes
            assert cls.from_config is not Reranker.from_config, (name, kind)


def test_every_model_kind_prior_augmentation_and_aggregation_is_in_the_schema():
    """The schema's models `kind`, simulated `prior`, training `aug`, `permsc_aggregation` and dataset `source`
    enums are the registries' names; the kinds that rerank are
    those a reranker mode has classes for, and a prompted kind has weights."""
    from posbias.rerankers import model_kinds, simulated

    entry = config.schema_node("models")["additionalProperties"]["properties"]
    assert entry["kind"]["enum"] == list(model_kinds.MODEL_KINDS)
    assert entry["prior"]["enum"] == list(simulated.PRIORS)
    from posbias import augment
    from posbias.debias import maths

    run = config.schema_node("training")["additionalProperties"]["properties"]
    assert run["aug"]["enum"] == list(augment.AUGMENTATIONS)
    assert config.schema_node("reranking")["properties"]["permsc_aggregation"]["enum"] == list(maths.AGGREGATIONS)
    from posbias import data

    sources = config.schema_node("datasets")["additionalProperties"]["properties"]["source"]["enum"]
    assert sources == list(data.SOURCES)
    for mode in modes.MODES.values():
        assert set(mode.classes) == {n for n, k in model_kinds.MODEL_KINDS.items() if k.reranks}
    assert all(k.weights for k in model_kinds.MODEL_KINDS.values() if k.prompted)
    assert model_kinds.named("reranks") == "causal_lm or simulated"
    with pytest.raises(ValueError, match="model kind 'lstm' is unknown; use one of: encoder"):
        model_kinds.get("lstm")


def test_a_debias_wrapper_keeps_the_base_capabilities():
    from posbias.rerankers.simulated import SimulatedGrader

    grader = SimulatedGrader({}, window=7)
    wrapped = debias.wrap(grader, "bsc@2", 0, debias.options(config.defaults("reranking"), "bsc@2"))
    assert wrapped.pointwise and wrapped.window == 7 and wrapped.stats is grader.stats
    with pytest.raises(ValueError, match="set a fixed alpha"):  # per-slot priors have no entropy-adaptive α
        debias.wrap(grader, "capcal", 0, debias.options(config.defaults("reranking"), "capcal"))
    with pytest.raises(ValueError, match="gives no content-free priors"):
        debias.wrap(_Reversing(), "capcal", 0, debias.options(config.defaults("reranking"), "capcal"))


class _Reversing(Reranker):
    """The worked example's reranker mode: each window reversed (the last passage shown first)."""

    @classmethod
    def from_config(cls, spec, context):
        return cls()

    def rank(self, windows):
        return [WindowResult(order=list(range(len(w.doc_ids)))[::-1], stats={"calls": 1, "prompt_tokens": 0})
                for w in windows]


def test_a_new_reranker_mode_touches_three_files(monkeypatch):
    """The how-to's recipe for a reranker mode, done: its class (file 1, here :class:`_Reversing`), its
    ``MODES`` line (file 2) and its name in config/schema.yaml's ``mode`` enum (file 3). Nothing else: a
    config using it validates and passes the experiment checks with a listwise debiasing method, the
    reranker is built by :func:`posbias.rerankers.build` and reranked by the driver."""
    import copy

    import yaml

    from posbias import rerankers
    from posbias.rerank import Candidates, rerank

    monkeypatch.setitem(modes.MODES, "reverse", modes.RerankerMode(
        "listwise", False, "the window reversed", {"simulated": "tests.test_architecture:_Reversing"}))
    node = config.schema_node("models")["additionalProperties"]["properties"]["mode"]
    monkeypatch.setitem(node, "enum", [*node["enum"], "reverse"])
    cfg = copy.deepcopy(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    cfg["models"]["rev"] = {"kind": "simulated", "mode": "reverse"}
    cfg["reranking"]["experiments"].append({"model": "rev", "dataset": "toy", "retriever": "biased",
                                            "orders": ["original", "shuffled-0", "shuffled-1", "shuffled-2"],
                                            "debias": ["none", "permsc@3", "permsc-window@2"]})
    config.validate(cfg)
    config.prepare(cfg, files=False)
    assert modes.family(cfg["models"]["rev"]) == "listwise"
    built = rerankers.build(cfg["models"]["rev"], None, {}, 0, "cpu", 100)
    assert isinstance(built, _Reversing)
    docs = [f"d{i}" for i in range(6)]
    run, _, _ = rerank(built, [Candidates("q", "query", docs, {d: d for d in docs})], window=6, step=3)
    assert run.sort("rank")["doc_id"].to_list() == docs[::-1]
    cfg["models"]["rev"]["mode"] = "grades"
    with pytest.raises(ValueError, match="permsc@3 does not apply to 'rev', a pointwise scorer"):
        config.check_experiments(cfg)


def _corpus_order(job):
    """The worked example's retriever kind: every query gets the corpus's first ``depth`` documents."""
    import polars as pl

    from posbias.runs import canonical

    docs = job.data["corpus"]["doc_id"].to_list()[:job.spec["depth"]]
    rows = [(q, d, float(len(docs) - i)) for q in job.data["queries"]["query_id"] for i, d in enumerate(docs)]
    return canonical(pl.DataFrame(rows, schema=["query_id", "doc_id", "score"], orient="row"), job.spec["depth"]), []


def test_a_new_retriever_kind_touches_three_files(monkeypatch):
    """The how-to's recipe for a first-stage retriever kind, done: its search (and index) functions (file 1,
    here :func:`_corpus_order`), its ``RETRIEVER_KINDS`` line (file 2: what it reads, whether it builds an index, runs
    an encoder, is seeded) and its name in config/schema.yaml's retriever ``kind`` enum (file 3). The rules
    and the generic index/retrieve scripts read the registry (no kind's name appears in them: the
    vocabulary test), so a config using it validates and the generic search runs it."""
    import copy

    import polars as pl
    import yaml

    monkeypatch.setitem(kinds.RETRIEVER_KINDS, "corpus-order", kinds.RetrieverKind(
        "the corpus's first documents", "tests.test_architecture:_corpus_order", reads=("queries", "corpus"),
        threaded=False))
    node = config.schema_node("retrievers")["additionalProperties"]["properties"]["kind"]
    monkeypatch.setitem(node, "enum", [*node["enum"], "corpus-order"])
    cfg = copy.deepcopy(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    cfg["retrievers"]["first-docs"] = {"kind": "corpus-order", "depth": 2}
    cfg["datasets"]["synthetic"]["retrievers"].append("first-docs")
    config.validate(cfg)
    config.prepare(cfg, files=False)
    assert "first-docs" in config.dataset_retrievers(cfg, "synthetic") and "corpus-order" not in kinds.names(True)
    job = kinds.RetrievalJob(cfg["retrievers"]["first-docs"],
                             {"queries": pl.DataFrame({"query_id": ["q1", "q2"], "text": ["a", "b"]}),
                              "corpus": pl.DataFrame({"doc_id": ["d1", "d2", "d3"]})})
    run, empty = kinds.search("corpus-order", job)
    assert run.sort("query_id", "rank").select("query_id", "doc_id").rows() == [("q1", "d1"), ("q1", "d2"),
                                                                                ("q2", "d1"), ("q2", "d2")]
    assert empty == []
    with pytest.raises(ValueError, match="builds no index"):
        kinds.build_index("corpus-order", job, REPO / "unused")


def test_an_unknown_registry_name_is_one_line_listing_the_entries():
    from posbias.training import families

    with pytest.raises(ValueError, match=r"reranker mode 'frist' is unknown; use one of: first \(FIRST single-token"):
        modes.get("frist")
    with pytest.raises(ValueError, match=r"retriever kind 'bm52' is unknown; use one of: bm25 \(BM25 over"):
        kinds.get("bm52")
    with pytest.raises(ValueError, match=r"training family 'pairwise' is unknown; use one of: listwise \("):
        families.get("pairwise")


def test_every_retriever_kind_is_in_the_schema_and_its_functions_exist():
    assert config.schema_node("retrievers")["additionalProperties"]["properties"]["kind"]["enum"] == list(kinds.RETRIEVER_KINDS)
    for name, kind in kinds.RETRIEVER_KINDS.items():
        for target in filter(None, (kind.search, kind.index)):
            module, _, function = target.partition(":")
            assert callable(getattr(importlib.import_module(module), function)), (name, target)
        assert set(kind.reads) <= {*kinds.DATASET_TABLES, "runs"}, name


def test_a_new_objective_term_touches_two_files(monkeypatch):
    """The how-to's recipe for a listwise objective term without a weight of its own, done: its
    ``ObjectiveTerm`` in ``posbias.training.listwise.TERMS`` (file 1) and a method naming it in
    ``posbias.methods`` (file 2). A config training that method validates, and the objective adds the term
    to the method's others and logs it."""
    import copy

    import torch
    import yaml

    from posbias.training import TrainSpec, listwise

    def entropy(logits, rank_logits, batch, spec, propensity):
        p = torch.softmax(rank_logits, dim=-1)
        return -(p * p.log()).sum(dim=-1).mean(), {}

    monkeypatch.setitem(listwise.TERMS, "entropy", listwise.ObjectiveTerm(entropy, None, "entropy"))
    monkeypatch.setitem(methods.TRAINING_METHODS, "first_entropy", methods.TrainingMethod(
        "first_entropy", "listwise", "Rank + LM + H", "First with an identifier-entropy term",
        terms=("rank", "lm", "entropy")))
    cfg = copy.deepcopy(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    cfg["training"]["toy-first"]["method"] = "first_entropy"
    config.validate(cfg)
    config.prepare(cfg, files=False)
    hyper = {"lm_tokens": 1, "lm_softmax": "identifiers"}
    logits = torch.randn(2, 6, 12, generator=torch.Generator().manual_seed(0))
    batch = {"rank_position": torch.tensor([5, 4]), "gold_rank": torch.tensor([[1, 0, 2], [2, 1, 0]])}
    new, parts = listwise.objective(logits, batch, [3, 4, 5], TrainSpec.create("first_entropy", **hyper), None)
    old, old_parts = listwise.objective(logits, batch, [3, 4, 5], TrainSpec.create("first", **hyper), None)
    assert set(parts) == set(old_parts) | {"entropy"} and parts["entropy"] > 0
    assert float(new) == pytest.approx(float(old) + parts["entropy"])


def test_a_new_weighted_term_retrains_only_the_methods_that_name_it(monkeypatch):
    """The recipe for a term with a weight of its own: its ``ObjectiveTerm`` (file 1), its weight in
    ``posbias.methods.TERM_HYPER`` and a method naming it (file 2), the weight's key in the schema (file 3). A
    train job of any other method keeps the same params (the key is left out), so nothing else retrains."""
    from posbias.config import params
    from posbias.training import listwise

    monkeypatch.setitem(listwise.TERMS, "entropy", listwise.ObjectiveTerm(lambda *a: None, "entropy_weight", "entropy"))
    monkeypatch.setitem(methods.TERM_HYPER, "entropy", "entropy_weight")
    monkeypatch.setitem(methods.TRAINING_METHODS, "first_entropy", methods.TrainingMethod(
        "first_entropy", "listwise", "Rank + LM + H", "First with an identifier-entropy term",
        terms=("rank", "lm", "entropy")))
    base = {"method": "first", "gpus": 0, "hyper": {"learning_rate": 0.001, "rank_weight": 1.0, "lm_weight": 1.0}}
    config_of = {"training": {"t": base}}
    before = params.train_settings(config_of, "t")
    config_of["training"]["t"] = {**base, "hyper": {**base["hyper"], "entropy_weight": 0.5}}
    assert params.train_settings(config_of, "t") == before  # first does not read it: no retraining
    config_of["training"]["t"]["method"] = "first_entropy"
    assert params.train_settings(config_of, "t")["hyper"]["entropy_weight"] == 0.5
    # the trait's and the family's keys
    assert methods.reads_hyper("ocsft_ema", "ema_decay") and not methods.reads_hyper("ocsft", "ema_decay")
    assert methods.reads_hyper("debiasfirst", "ips_clip") and not methods.reads_hyper("first", "ips_clip")
    assert methods.reads_hyper("ocsft", "views") and not methods.reads_hyper("first", "views")
    assert methods.reads_hyper("first", "lm_tokens") and not methods.reads_hyper("ocsft", "lm_tokens")
    assert all(methods.reads_hyper(m, "learning_rate") for m in methods.TRAINING_METHODS)


def test_every_weighted_term_declares_its_weight_where_the_params_read_it():
    from posbias.training import listwise

    weights = {name: term.weight for name, term in listwise.TERMS.items() if term.weight}
    assert weights == methods.TERM_HYPER


def test_every_training_family_is_registered_and_every_term_exists():
    from posbias.training import families, listwise

    assert list(families.TRAINING_FAMILIES) == list(methods.TRAINING_FAMILY_NAMES)
    for method in methods.TRAINING_METHODS.values():
        assert set(method.terms) <= set(listwise.TERMS if method.family == "listwise" else ()), method.name
        family = families.get(method.family)
        for target in (family.read, family.setup, family.objective):
            assert callable(registry.load(target)), target


class _Reversed(Reranker):
    """The worked example's window-level debias wrapper: the base's ranking of each window, reversed."""

    def __init__(self, base):
        super().__init__()
        self.base, self.pointwise, self.window, self.stats = base, base.pointwise, base.window, base.stats

    def rank(self, windows):
        return [WindowResult(r.order[::-1], r.scores, r.stats) for r in self.base.rank(windows)]


def test_a_new_window_level_debias_method_touches_two_files(monkeypatch):
    """The how-to's recipe for a window-level debias method, done: its wrapper (file 1, in
    ``posbias.debias.wrappers``; here :class:`_Reversed`) and its ``DebiasMethod`` line (file 2). A config
    listing it validates, the rerank job's params are its settings, and :func:`posbias.debias.wrap`
    applies it."""
    import copy

    import yaml

    from posbias.rerank import Candidates, rerank
    from posbias.rerankers.simulated import SimulatedReranker

    monkeypatch.setitem(debias.DEBIAS_METHODS, "reverse", debias.DebiasMethod(
        "reverse", False, "the base's ranking reversed", lambda base, spec, seed, settings: _Reversed(base),
        settings=lambda reranking, spec: {"window": reranking["window"]}))
    cfg = copy.deepcopy(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    cfg["reranking"]["experiments"][0]["debias"] = ["none", "reverse"]
    config.validate(cfg)
    config.prepare(cfg, files=False)
    settings = debias.options(cfg["reranking"], "reverse")
    assert settings == {"window": cfg["reranking"]["window"]}
    base = SimulatedReranker({"q": {"d0": 3, "d1": 2, "d2": 1}}, relevance_weight=1.0)
    wrapped = debias.wrap(base, "reverse", 0, settings)
    docs = ["d2", "d0", "d1"]
    run, _, _ = rerank(wrapped, [Candidates("q", "query", docs, {d: d for d in docs})])
    assert run.sort("rank")["doc_id"].to_list() == ["d2", "d1", "d0"]  # the base's d0 > d1 > d2, reversed


def test_a_new_consumer_touches_two_files(monkeypatch):
    """The how-to's recipe for an OC-SFT consumer, done: its decision step and ``Consumer`` line (file 1,
    ``posbias.consumers``) and its name in config/schema.yaml's ``consumer`` enum (file 2). A dataset naming
    it validates, its pointwise experiments become ``decisions`` targets, and :func:`posbias.consumers.decide`
    runs its step."""
    import polars as pl
    import yaml

    from posbias import consumers

    def top_pick(inputs):
        rows, details = [], []
        for q in sorted(inputs.canonical):
            picks = [max(p[q], key=p[q].get) for p in inputs.presentations]
            details += [{"query_id": q, "presentation": m, "decision": d, "correct": None} for m, d in enumerate(picks)]
            rows.append({"query_id": q, "presentations": len(picks), "quality": 0.0,
                         "flip": float(len(set(picks)) > 1), "verdict_flip": 0.0, "retained": 1.0})
        return rows, details

    monkeypatch.setitem(consumers.CONSUMERS, "top_pick", consumers.Consumer(
        "top_pick", "top pick", columns={"flip": "pick flip"}, decisions=top_pick))
    node = config.schema_node("datasets")["additionalProperties"]["properties"]["consumer"]
    monkeypatch.setitem(node, "enum", [*node["enum"], "top_pick"])
    cfg = yaml.safe_load((REPO / "config" / "examples" / "ocsft-toy.yaml").read_text())
    dataset = next(d for d, spec in cfg["datasets"].items() if spec.get("consumer") == "response_ranking")
    cfg["datasets"][dataset]["consumer"] = "top_pick"
    config.validate(cfg)
    config.prepare(cfg, files=False)
    assert config.consumer_window(cfg, dataset) is None
    assert any(d == dataset for _, d, _ in config.decision_targets(cfg))

    def run(scores):
        return pl.DataFrame({"query_id": ["q"] * len(scores), "doc_id": list(scores),
                             "rank": list(range(1, len(scores) + 1)), "score": list(scores.values())})

    canonical = run({"a": 2.0, "b": 1.0})
    table, details = consumers.decide("top_pick", canonical, [canonical, run({"b": 2.0, "a": 1.0})], pl.DataFrame(
        {"query_id": ["q"], "doc_id": ["a"], "relevance": [1]}), 1, None, 11, {"model": "m", "dataset": dataset,
                                                                               "retriever": "r"})
    assert details["decision"].to_list() == ["a", "b"] and table["flip"].to_list() == [1.0]


def _last_run(runs: list):
    """A trivial list-level combine step: the last of the lists it reads."""
    return runs[-1]


def test_a_second_list_level_method_is_computed_by_its_own_combine_step(monkeypatch):
    """A list-level method's entry says which lists it reads and how it combines them; the workflow's
    config checks, inputs and job (``combine_lists.py`` calls :func:`posbias.debias.combine`) read
    them there, so a second list-level method is not computed as PermSC."""
    import polars as pl

    from posbias.debias import list_level

    last = debias.DebiasMethod("last", True, "the last of {k} shuffled lists", None, level="list",
                                  lists=lambda spec: [f"shuffled-{spec.k - 1}"],
                                  combine="tests.test_architecture:_last_run")
    monkeypatch.setitem(debias.DEBIAS_METHODS, "last", last)
    runs = [pl.DataFrame({"query_id": ["q"] * 3, "doc_id": docs, "rank": [1, 2, 3], "score": [3.0, 2.0, 1.0]})
            for docs in (["a", "b", "c"], ["a", "c", "b"], ["c", "b", "a"])]
    assert debias.lists("last@3") == ["shuffled-2"] and debias.combine("last@3", runs, {}) is runs[-1]
    assert debias.lists("permsc@3") == ["shuffled-0", "shuffled-1", "shuffled-2"]
    central = debias.combine("permsc@3", runs, {"aggregation": "kemeny"})
    assert central.equals(list_level.aggregate_runs(runs, "kemeny")) and central["doc_id"].to_list() == ["a", "c", "b"]
    with pytest.raises(ValueError, match="wraps a reranker; it combines no lists"):
        debias.combine("bsc@3", runs, {})


@pytest.mark.parametrize("name", ["none", "capcal", "capcal@na-50", "capcal@empty_1", "permsc@1", "permsc@20",
                                  "permsc-window@3", "bsc@3", "roundrobin@20", "rename@1"])
def test_debias_grammar_round_trips_and_matches_the_wildcard_pattern(name):
    assert str(debias.parse(name)) == name
    assert re.fullmatch(debias.PATTERN, name)


@pytest.mark.parametrize("name", ["permsc", "permsc@0", "bsc@x", "capcal@2", "capcal@Na", "capcal@", "none@1", "kemeny",
                                  "permsc@²", "permsc-window"])
def test_bad_debias_values_are_rejected_by_parse_and_pattern(name):
    with pytest.raises(ValueError, match=r"expected one of none, capcal\[@VARIANT\], permsc@K, permsc-window@K, bsc@K"):
        debias.parse(name)
    assert not re.fullmatch(debias.PATTERN, name)


@pytest.mark.parametrize("name", ["original", "shuffled-0", "shuffled-12", "position-1", "position-20"])
def test_order_grammar_round_trips_and_matches_the_wildcard_pattern(name):
    assert str(orders.parse(name)) == name
    assert re.fullmatch(orders.PATTERN, name)


@pytest.mark.parametrize("name", ["shuffled", "original-1", "position-x", "random-1", "position-0"])
def test_bad_orders_are_rejected(name):
    with pytest.raises(ValueError, match="expected one of|1-based"):
        orders.parse(name)


def test_method_registry_drives_the_config_checks():
    assert methods.names("listwise") == ["first", "debiasfirst", "rank", "rank_ips", "rank_ips_lm"]
    assert methods.names("pointwise") == ["ocsft", "ocsft_no_anchor", "single_order", "order_averaged", "perm_aug",
                                          "debiasfirst_pointwise", "ocsft_ema", "marker_sft", "ocsft_markers"]
    assert [m for m in methods.TRAINING_METHODS if methods.get(m).markers != "fixed"] == ["marker_sft", "ocsft_markers"]
    assert [m for m in methods.TRAINING_METHODS if not methods.reads_hyper(m, "ema_decay")] == [
        m for m in methods.TRAINING_METHODS if m != "ocsft_ema"]
    assert [m for m in methods.TRAINING_METHODS if methods.get(m).on_lambda_grid] == ["ocsft", "single_order"]
    assert [m for m in methods.TRAINING_METHODS if methods.get(m).needs_omega] == ["debiasfirst", "rank_ips", "rank_ips_lm"]
    assert [m for m in methods.TRAINING_METHODS if methods.get(m).shuffled_silver] == ["order_averaged",
                                                                              "debiasfirst_pointwise"]
    with pytest.raises(ValueError, match="training method 'debiasfrist' is unknown"):
        methods.get("debiasfrist")


# The names of these vocabularies, as quoted strings: outside its registry none may appear in code, so no
# second list can drift from the registry. Left out: names that are also ordinary words of the code
# ("first" is a prompt mode, "rank" a column, "ocsft" a config section). Allowed: the modules that *are*
# one method (the CapCal table, the PermSC-against-K figure); a folder allows its package (the debias package
# is the home of its registry, wrappers and maths).
VOCABULARIES = {
    "methods": ([m for m in methods.TRAINING_METHODS if m not in ("first", "rank", "ocsft")], {"src/posbias/methods.py"}),
    # "rrf" is also a rank aggregation (debias/maths.py), "oracle" a seed label, "splade" a model-name hint (standins)
    "retriever kinds": (list(kinds.RETRIEVER_KINDS), {"src/posbias/retrieval/kinds.py", "src/posbias/debias/maths.py",
                                                     "src/posbias/retrieval/oracle.py", "src/posbias/standins.py"}),
    "debias": (["permsc", "permsc-window", "bsc", "capcal"], {"src/posbias/debias/",
                                             "src/posbias/paper/capcal.py", "src/posbias/paper/__init__.py",
                                             "src/posbias/paper/inference_vs_training.py"}),
}


@pytest.mark.parametrize("vocabulary", sorted(VOCABULARIES))
def test_vocabulary_names_are_not_listed_outside_their_registry(vocabulary):
    names, allowed = VOCABULARIES[vocabulary]
    offenders = []
    files = list((REPO / "src").rglob("*.py")) + list((REPO / "rules").glob("*.smk")) + [REPO / "Snakefile"]
    files += list((REPO / "workflow" / "scripts").glob("*.py"))
    for path in files:
        if any(str(path.relative_to(REPO)).startswith(a) for a in allowed):
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            for name in names:
                if re.search(rf"""["']{re.escape(name)}(@[^"']*)?["']""", code):
                    offenders.append(f"{path.relative_to(REPO)}:{lineno}: {name}")
    assert not offenders, offenders


def test_order_names_are_made_and_read_only_through_orders():
    """No code outside ``posbias.orders`` spells an indexed order's name (``"shuffled-…"``, ``"position-…"``)
    or tests one by its prefix: it asks ``orders`` (``shuffled``, ``position``, ``prefix``, ``is_kind``,
    ``index_of``), so the grammar has one home."""
    spelled = re.compile(r"""["'](shuffled|position)-(["'{]|\d)|startswith\(["'](shuffled|position)""")
    offenders = []
    files = list((REPO / "src").rglob("*.py")) + list((REPO / "rules").glob("*.smk")) + [REPO / "Snakefile"]
    for path in files + list((REPO / "workflow" / "scripts").glob("*.py")):
        if path == SRC / "orders.py":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if spelled.search(line.split("#")[0]):
                offenders.append(f"{path.relative_to(REPO)}:{lineno}")
    assert not offenders, offenders


_SECTION = re.compile(r"^    (\w+):", re.M)


def _rule_sections(rule: str) -> dict[str, str]:
    """A rule's sections (``input``, ``params``, ``script``, …) by name, as written in ``rules/*.smk``; a rule
    declared as ``use rule BASE as RULE with:`` takes BASE's sections with its own written over them."""
    head = re.compile(rf"^(?:rule {rule}|use rule (\w+) as {rule} with):\n", re.M)
    for path in sorted((REPO / "rules").glob("*.smk")):
        text = path.read_text()
        if match := head.search(text):
            block = re.split(r"\n(?=\S)", text[match.end():], maxsplit=1)[0]
            parts = _SECTION.split(block)
            sections = dict(zip(parts[1::2], parts[2::2]))
            return _rule_sections(match.group(1)) | sections if match.group(1) else sections
    raise AssertionError(f"no rule {rule}")


@pytest.mark.parametrize("kind", ["TABLES", "FIGURES", "FRAMES"])
def test_every_report_entry_is_written_by_a_rule_that_gives_its_inputs(kind):
    """Every table, figure and report data file is registered in ``posbias.paper`` with the rule that writes
    it; that rule runs the one report script, names the entry in its params and gives every input the
    builder takes: a kind of result file (``posbias.paper.inputs.READERS``) as a named input, or a config value
    as a param (the papers' tables get their result files through ``paper_inputs``)."""
    from posbias.paper.inputs import READERS

    for name, entry in getattr(paper, kind).items():
        sections = _rule_sections(entry.rule)
        assert '"../workflow/scripts/report.py"' in sections["script"], (name, entry.rule)
        assert f'"{name}"' in sections["params"] or entry.rule in ("paper_table", "paper_figure"), (name, entry.rule)
        given = set(paper.needs(entry)) if entry.rule in ("paper_table", "paper_figure") else set()
        inputs, params = sections.get("input", ""), sections["params"]
        for key in set(entry.inputs) - given:
            assert re.search(rf"\b{key}=", inputs if key in READERS else params), (name, entry.rule, key)
        function = getattr(entry, {"TABLES": "builder", "FIGURES": "drawer", "FRAMES": "builder"}[kind])
        function = registry.load(function) if isinstance(function, str) else function
        params = list(inspect.signature(function).parameters)
        assert params[:len(entry.inputs)] == list(entry.inputs) or kind != "TABLES" or entry.rule != "paper_table", \
            (name, params)


def test_defaults_come_from_the_schema():
    from posbias.rerankers.lm import LMSpec
    from posbias.training import TrainSpec

    hyper = config.schema_node("training", "hyper")["properties"]
    spec = TrainSpec.create(method="first")
    assert all(getattr(spec, key) == node["default"] for key, node in hyper.items() if "default" in node)
    assert LMSpec("x").batch_size == config.model_defaults("causal_lm")["batch_size"]
    assert spec.word_budget == LMSpec("x").word_budget == config.defaults("reranking")["word_budget"]


def _run(*args, timeout=300):
    return subprocess.run([str(Path(sys.executable).parent / args[0]), *args[1:]], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_the_local_rules_are_the_stage_targets_and_the_table_and_figure_jobs():
    """Each rule declares itself local (``localrule: True`` beside its definition, no list kept by hand): exactly
    the stage targets (no output) and the jobs that write tables or figures (a training job's loss-curve figure
    aside) run on the submitting host."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ResourceSettings

    with SnakemakeApi() as api:
        workflow = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=REPO / "Snakefile",
                                workdir=REPO)._workflow
        for rule in workflow.rules:
            outputs = [str(o) for o in rule.output]
            small = not outputs or (any(o.startswith(("results/tables/", "results/figures/")) for o in outputs)
                                    and not any(o.startswith("results/models/") for o in outputs))
            assert (rule.name in workflow._localrules) == small, rule.name


def test_snakefmt_check_is_clean():
    out = _run("snakefmt", "--check", ".")
    assert out.returncode == 0, out.stderr + out.stdout


def test_every_polars_group_by_keeps_its_order():
    """Same config, same bytes: polars' group_by returns groups in a run-dependent order, and a mean taken
    over them (or over rows that came out of one) differs in its last bits from run to run (measured: the
    shuffled nDCG@10 of the toy DebiasFirst model, 0.8850999675591527 vs …525). Every group_by in the
    package and the scripts passes maintain_order=True."""
    loose = []
    for path in [*SRC.rglob("*.py"), *(REPO / "workflow" / "scripts").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "group_by"
                    and not any(k.arg == "maintain_order" for k in node.keywords)):
                loose.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not loose, loose


RULE_FILES = sorted((REPO / "rules").glob("*.smk"))
# What a rule's function may call without `one_line`: builtins and Snakemake's flags on values a validated
# config gives, the wildcards', config's and dicts' own methods, and posbias.paths (f-strings of the results tree).
PLAIN_CALLS = {"int", "max", "min", "len", "str", "sorted", "list", "dict", "set", "ancient", "unpack"}
PLAIN_ROOTS = {"w", "config", "wildcards", "paths"}
PLAIN_METHODS = {"items", "get", "split", "join"}


def _lambdas(text: str):
    """(line number, source, the text before it) of each ``lambda`` in a rule file: from the keyword to the
    comma, or closing bracket, that ends it at its own bracket depth."""
    for match in re.finditer(r"\blambda\b", text):
        depth, end = 0, match.start()
        while end < len(text):
            char = text[end]
            if char in "([{":
                depth += 1
            elif char in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif char in ",\n" and depth == 0:
                break
            end += 1
        yield text.count("\n", 0, match.start()) + 1, text[match.start():end], text[:match.start()].rstrip()


def test_every_rule_function_that_calls_the_package_reports_one_line():
    """A lambda in a rule file that calls the package (beyond the helpers of rules/common.smk, each @one_line)
    is itself ``one_line(lambda ...)``: a user's mistake it meets while Snakemake builds the DAG reaches the
    console as one ``posbias:`` line, not an InputFunctionException's frames (posbias.errors.one_line)."""
    common = (REPO / "rules" / "common.smk").read_text()
    helpers = set(re.findall(r"^@one_line\ndef (\w+)", common, flags=re.M))
    unwrapped = []
    for path in RULE_FILES:
        for line, source, before in _lambdas(path.read_text()):
            calls = re.findall(r"(?<![\w.\"'\]])([A-Za-z_][\w.]*)\(", source)
            reaching = [c for c in calls if c not in PLAIN_CALLS | helpers and c.split(".")[0] not in PLAIN_ROOTS
                        and c.rpartition(".")[2] not in PLAIN_METHODS]
            if reaching and not before.endswith("one_line("):
                unwrapped.append(f"{path.name}:{line}: {reaching}")
    assert not unwrapped, "\n".join(unwrapped)


def test_one_line_turns_a_user_error_into_its_line_and_keeps_the_signature(tmp_path, monkeypatch, capsys):
    """What Snakemake sees of a wrapped input function: the parameters it reads its arguments by, and for a
    user's mistake SystemExit(1) with the one line on stderr and the traceback in the DAG log; any other
    error (a bug) passes through unchanged."""
    from posbias.errors import DAG_LOG, PosbiasError, one_line

    monkeypatch.chdir(tmp_path)

    def broken(w, attempt):
        raise PosbiasError(f"datasets.{w}: no such retriever; add it to datasets.{w}.retrievers\nsecond line")

    wrapped = one_line(broken)
    assert list(inspect.signature(wrapped).parameters) == ["w", "attempt"]
    with pytest.raises(SystemExit) as exit_:
        wrapped("dl19", 1)
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"posbias: datasets.dl19: no such retriever; add it to datasets.dl19.retrievers "
                                f"(traceback in {DAG_LOG})"]
    assert "Traceback" in (tmp_path / DAG_LOG).read_text() and "second line" in (tmp_path / DAG_LOG).read_text()
    with pytest.raises(KeyError):
        one_line(lambda w: {}[w])("x")


def _module_level_names() -> tuple[dict[str, list[str]], set[str]]:
    """(each module-level name of the package with the modules that assign it, the names of the registries: the
    module-level dicts annotated ``dict[str, …]``, keyed by a vocabulary's names)."""
    import ast

    defined: dict[str, list[str]] = {}
    registries: set[str] = set()
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            for name in names:
                defined.setdefault(name, []).append(str(path.relative_to(REPO)))
            if isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation).startswith("dict[str,"):
                registries.update(names)
    return defined, registries


def test_each_registry_has_a_name_no_other_module_uses():
    """One vocabulary, one name: a registry's name (TRAINING_METHODS, DEBIAS_METHODS, ORDER_KINDS, RETRIEVER_KINDS,
    …) is assigned in one module only, so an import of it can mean one thing."""
    defined, registries = _module_level_names()
    assert {"TRAINING_METHODS", "DEBIAS_METHODS", "ORDER_KINDS", "RETRIEVER_KINDS", "MODEL_KINDS",
            "TRAINING_FAMILIES", "SOURCES", "AUGMENTATIONS", "AGGREGATIONS", "PRIORS", "TABLES",
            "FIGURES"} <= registries, sorted(registries)
    shared = {name: defined[name] for name in registries if len(defined[name]) > 1}
    assert not shared, shared
