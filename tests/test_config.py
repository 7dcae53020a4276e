import copy

import pytest
import yaml

from posbias import config as pbconfig
from posbias import debias
from tests.conftest import REPO

SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def _message(cfg):
    return pbconfig.explain_config(cfg, SCHEMA)


def test_default_and_example_configs_are_valid():
    for path in [REPO / "config" / "config.yaml", *sorted((REPO / "config").glob("*/*.yaml"))]:
        cfg = yaml.safe_load(path.read_text())
        if "datasets" in cfg:  # presets; deepspeed and other side files are not workflow configs
            assert _message(cfg) is None, path
            pbconfig.check_grid(cfg)


def test_adaptive_budgets_are_checked_where_the_config_asks_for_them_and_a_stuck_one_is_a_notice():
    """The schema's default caps ([10]) ask for nothing: a config whose experiments have 3 shuffles validates;
    a cap beyond every experiment's shuffles set by the user is refused; a patience that needs more draws than
    a cap is a notice."""
    cfg = copy.deepcopy(DEFAULT)
    del cfg["ocsft"]["adaptive"]
    cfg["reranking"]["experiments"] = [e for e in cfg["reranking"]["experiments"] if e["model"] == "smollm2"]
    cfg["frontier"]["references"], cfg["evaluation"]["reference"] = [], None
    pbconfig.validate(cfg)
    assert cfg["ocsft"]["adaptive"]["caps"] == [10] and pbconfig.notices(cfg) == []
    assert not pbconfig.adaptive_budgets(cfg)  # no adaptive_savings table is planned
    cfg["ocsft"]["adaptive"]["caps"] = [3]
    assert pbconfig.adaptive_budgets(cfg)
    cfg["reranking"]["experiments"][0]["debias"] = ["capcal"]  # a debiased scorer's rows are K = 1 only
    assert not pbconfig.adaptive_budgets(cfg)
    cfg = copy.deepcopy(DEFAULT)
    cfg["ocsft"]["adaptive"] = {"caps": [13]}
    with pytest.raises(ValueError, match=r"ocsft.adaptive.caps \[13\]: .* no experiment has more than 12"):
        pbconfig.validate(cfg)
    cfg = copy.deepcopy(DEFAULT)
    cfg["ocsft"]["adaptive"] = {"caps": [2, 6], "patience": 2}
    pbconfig.validate(cfg)
    assert pbconfig.adaptive_budgets(cfg)
    assert pbconfig.notices(cfg) == ["ocsft.adaptive.patience 2 needs 3 draws to stop, more than the cap [2]: those "
                                     "adaptive rows can never stop early"]



def test_the_ocsft_settings_table_is_planned_where_a_trained_pointwise_variant_is_scored():
    """The default run scores OC-SFT and single order on the synthetic set (its settings table's two columns); a
    config whose only pointwise scorers are untrained (the Grades study of real models) plans no settings table, nor
    does one that scores its variants on the dev set alone."""
    cfg = copy.deepcopy(DEFAULT)
    pbconfig.validate(cfg)
    pbconfig.prepare(cfg, files=False)
    assert pbconfig.scored_pointwise_variants(cfg) == ["tiny-ocsft", "tiny-single-order"]
    grades = yaml.safe_load((REPO / "config" / "examples" / "real-llms-grades.yaml").read_text())
    pbconfig.validate(grades)
    pbconfig.prepare(grades, files=False)
    assert pbconfig.stability_targets(grades) and pbconfig.scored_pointwise_variants(grades) == []
    cfg["ocsft"]["dev"] = "synthetic"
    assert pbconfig.scored_pointwise_variants(cfg) == []


def test_the_bases_figure_is_planned_where_ocsft_and_single_order_from_one_base_are_scored():
    """The default run scores OC-SFT and single order trained from tiny-grades on the synthetic set: one cell of the
    pooled-over-bases figure. The Grades study of untrained models has none (it drew two empty panels), nor has a
    run that scores the pair on the dev set alone or scores only one of the two."""
    cfg = copy.deepcopy(DEFAULT)
    pbconfig.validate(cfg)
    pbconfig.prepare(cfg, files=False)
    pairs = pbconfig.scored_base_pairs(cfg)
    assert [(p["ocsft"], p["single"]) for p in pairs] == [("tiny-ocsft", "tiny-single-order")]
    grades = yaml.safe_load((REPO / "config" / "examples" / "real-llms-grades.yaml").read_text())
    pbconfig.validate(grades)
    pbconfig.prepare(grades, files=False)
    assert pbconfig.scored_base_pairs(grades) == []
    dev = copy.deepcopy(cfg)
    dev["ocsft"]["dev"] = "synthetic"
    assert pbconfig.scored_base_pairs(dev) == []
    cfg["reranking"]["experiments"] = [e for e in cfg["reranking"]["experiments"] if e["model"] != "tiny-single-order"]
    assert pbconfig.scored_base_pairs(cfg) == []


def test_every_models_position_curves_are_drawn_where_an_experiment_moves_the_relevant_passage():
    """position_curve_all was an output of rerank_tables, drawn as two empty panels by a run without position orders
    (the published PermSC stage); it is a paper figure planned where some experiment has them."""
    from posbias import paper

    cfg = copy.deepcopy(DEFAULT)
    pbconfig.validate(cfg)
    pbconfig.prepare(cfg, files=False)
    assert "position_curve_all" in paper.filled(paper.FIGURES, "paper_figure", cfg)
    permsc = yaml.safe_load((REPO / "config" / "examples" / "real-llms-permsc.yaml").read_text())
    pbconfig.validate(permsc)
    pbconfig.prepare(permsc, files=False)
    assert "position_curve_all" not in paper.filled(paper.FIGURES, "paper_figure", permsc)


def test_settings_that_do_nothing_are_notices():
    """A vLLM block on a transformers model, and marker relabelling over windows of one passage."""
    cfg = copy.deepcopy(DEFAULT)
    cfg["models"]["smollm2"]["vllm"] = {"kv_cache_gib": 4}
    cfg["training"]["tiny-markers"] = {"method": "marker_sft", "base_model": "tiny-grades", "data": "synthetic-train"}
    cfg["ocsft"]["window"] = 1
    pbconfig.validate(cfg)
    assert pbconfig.notices(cfg) == [
        "models.smollm2.vllm sets the vLLM engine's options but models.smollm2.engine is transformers: they are not "
        "used (set engine: vllm to use them)",
        "training.tiny-markers: method marker_sft relabels the slot markers, but its windows hold one passage (B = 1): "
        "there is nothing to relabel, so it trains as single order"]


def test_mistyped_key_gets_a_suggestion():
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"]["synthetic"]["sourse"] = cfg["datasets"]["synthetic"].pop("source")
    assert "unknown key datasets.synthetic.sourse (did you mean 'source'?)" in _message(cfg)
    cfg = copy.deepcopy(DEFAULT)
    cfg["retrievers"]["bm25"]["depht"] = 100
    message = _message(cfg)
    assert "unknown key retrievers.bm25.depht (did you mean 'depth'?)" in message
    assert "\n" not in message


def test_unknown_top_level_key():
    message = _message({**DEFAULT, "evalution": {}})
    assert "unknown key evalution (did you mean 'evaluation'?)" in message


def test_missing_required_key_for_source():
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"]["x"] = {"source": "irds"}
    assert _message(cfg) == (
        "config: datasets.x is missing a required key: 'id' is a required property (see config/README.md)"
    )


def test_grid_cross_references():
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"]["synthetic"]["retrievers"] = ["bm25", "rrf"]  # rrf fuses dense, not run here
    with pytest.raises(ValueError, match="fuses 'dense', which dataset 'synthetic' does not run"):
        pbconfig.check_grid(cfg)
    cfg["datasets"]["synthetic"]["retrievers"] = ["bm26"]
    with pytest.raises(ValueError, match="unknown retriever 'bm26'"):
        pbconfig.check_grid(cfg)


def test_grid_includes_imported_runs():
    cfg = {"datasets": {"dl": {"source": "imported", "qrels": "q", "runs": {"bm25": {"path": "p"}}, "retrievers": ["rrf"]}},
           "retrievers": {"rrf": {"kind": "rrf", "runs": ["imported:bm25", "imported:bm25"]}}}
    assert pbconfig.grid(cfg) == [("dl", "imported:bm25"), ("dl", "rrf")]
    assert pbconfig.retriever_kind(cfg, "imported:bm25") == "imported"


def _validated(cfg):
    from snakemake.utils import validate

    validate(cfg, str(REPO / "config" / "schema.yaml"))  # fills the schema defaults, as the Snakefile does
    return cfg


def _register(cfg):
    pbconfig.expand_bases(cfg)  # as posbias.config.prepare does
    pbconfig.expand_seeds(cfg)
    pbconfig.register_trained_models(cfg)


def test_pointwise_training_cross_references():
    cfg = _validated(copy.deepcopy(DEFAULT))
    cfg["training"]["bad"] = {"method": "ocsft", "base_model": "tiny-first", "data": "synthetic-train", "gpus": 0,
                              "hyper": {}}
    with pytest.raises(ValueError, match=r"needs a base model of a pointwise mode \(grades\); 'tiny-first' is in mode 'first'"):
        _register(cfg)
    cfg = _validated(copy.deepcopy(DEFAULT))
    cfg["training"]["tiny-ocsft"]["teacher"] = "sim-linear"
    with pytest.raises(ValueError, match=r"teacher 'sim-linear' is neither 'qrels' nor a models entry of a pointwise mode \(grades\)"):
        _register(cfg)
    cfg = _validated(copy.deepcopy(DEFAULT))
    _register(cfg)
    assert cfg["models"]["tiny-ocsft"]["mode"] == "grades"
    run = cfg["training"]["tiny-ocsft"]
    assert pbconfig.silver_path(cfg, run) == "results/silver/synthetic-train/qrels/t0.parquet"
    assert pbconfig.silver_path(cfg, {**run, "method": "order_averaged"}).endswith("/t10.parquet")
    cfg["ocsft"]["teacher"] = None
    assert pbconfig.silver_teacher(cfg, run) == "tiny-grades"  # self-distillation by default


def test_grades_experiments_take_no_listwise_debiasing():
    cfg = _validated(copy.deepcopy(DEFAULT))
    _register(cfg)
    cfg["reranking"]["experiments"].append({"model": "sim-grades", "dataset": "synthetic", "retriever": "bm25",
                                            "debias": ["none", "permsc@5"]})
    with pytest.raises(ValueError, match=r"permsc@5 does not apply to 'sim-grades', a pointwise scorer .* use one of "
                                         r"none, capcal, roundrobin, rename"):
        pbconfig.check_experiments(cfg)


def test_training_seeds_expand_to_models_and_experiments():
    cfg = copy.deepcopy(DEFAULT)
    for name in ("toy-first", "toy-debiasfirst"):  # the default trains one seed of each
        cfg["training"][name]["seeds"] = [1, 2]
    cfg = _validated(cfg)
    _register(cfg)
    assert {"toy-first-s1", "toy-first-s2", "toy-debiasfirst-s1", "toy-debiasfirst-s2"} <= set(cfg["training"])
    assert "toy-first" not in cfg["training"] and cfg["training"]["toy-first-s2"]["seed"] == 2
    training = cfg["training"]
    assert pbconfig.variant_of(training, "toy-first-s2") == "toy-first" and pbconfig.variant_of(training, "sim-linear") == "sim-linear"
    assert cfg["models"]["toy-first-s1"]["prompt"] == "compact"
    models = [e["model"] for e in cfg["reranking"]["experiments"]]
    assert "toy-first" not in models and models.count("toy-first-s1") == 1 and "toy-debiasfirst-s2" in models
    cfg = _validated(copy.deepcopy(DEFAULT))
    cfg["models"]["toy-first-s1"] = {"kind": "simulated"}
    with pytest.raises(ValueError, match="makes the model name 'toy-first-s1', which is already taken"):
        pbconfig.expand_seeds(cfg)


def test_the_teacher_study_groups_students_of_one_method_base_and_data_by_their_teachers():
    """Students of one method from one base on one training set, with at least two teachers between them,
    are compared (seeds once); a group with one teacher is not; the default config has none."""
    plain = _validated(copy.deepcopy(DEFAULT))
    _register(plain)
    assert pbconfig.teacher_study(plain) == []
    cfg = copy.deepcopy(DEFAULT)
    cfg["models"]["sim-teacher"] = dict(cfg["models"]["sim-grades"])
    cfg["training"]["tiny-single-order-sim"] = dict(cfg["training"]["tiny-single-order"], teacher="sim-teacher",
                                                    seeds=[1, 2])
    cfg = _validated(cfg)
    _register(cfg)
    study = pbconfig.teacher_study(cfg)
    assert [(s["variant"], s["teacher"]) for s in study] == [("tiny-single-order", "qrels"),
                                                             ("tiny-single-order-sim", "sim-teacher")]
    assert {(s["data"], s["method"], s["base"]) for s in study} == {("synthetic-train", "single_order", "tiny-grades")}


def test_the_label_budget_groups_students_of_one_base_data_and_teacher_where_one_has_max_queries():
    """A run with max_queries puts its group (base, training set, teacher) on the label-budget curve, each
    variant once with its teacher shuffles; without one the config has no curve."""
    plain = _validated(copy.deepcopy(DEFAULT))
    _register(plain)
    assert pbconfig.label_budget(plain) == []
    cfg = copy.deepcopy(DEFAULT)
    cfg["training"]["tiny-ocsft-q2"] = dict(cfg["training"]["tiny-ocsft"], max_queries=2, seeds=[1, 2])
    cfg = _validated(cfg)
    _register(cfg)
    curve = {s["variant"]: s for s in pbconfig.label_budget(cfg)}
    assert curve["tiny-ocsft-q2"]["max_queries"] == 2 and curve["tiny-ocsft"]["max_queries"] is None
    assert {s["shuffles"] for s in curve.values()} == {0} and len({(s["data"], s["base"], s["teacher"])
                                                                    for s in curve.values()}) == 1


def test_base_pairs_compare_variants_that_continue_from_one_model_on_one_teachers_labels():
    """The OC-SFT toy: the base grader is itself single order (from the tiny model, on the order-free teacher's
    labels); OC-SFT continues from it on the slot-biased teacher's, so its baseline is the single-order run beside
    it, not the grader, and the single-order runs on other teachers' labels are neither baselines nor objectives."""
    cfg = pbconfig.load(REPO / "config" / "examples" / "ocsft-toy.yaml", files=False)
    pairs = {p["data"]: p for p in pbconfig.base_pairs(cfg)}
    assert {d: (p["base"], p["ocsft"], p["single"]) for d, p in pairs.items()} == {
        "toy-train": ("toy-grades-lm", "toy-ocsft", "toy-single-order"),
        "toy-qa-train": ("toy-grades-lm", "toy-qa-ocsft", "toy-qa-single-order"),
        "toy-responses-train": ("toy-grades-lm", "toy-responses-ocsft", "toy-responses-single-order")}
    objectives = pairs["toy-train"]["objectives"]
    assert {"toy-order-averaged", "toy-perm-aug", "toy-debiasfirst-pointwise"} <= set(objectives)
    assert not {"toy-grader", "toy-single-order-mild", "toy-single-order-fair"} & set(objectives)


def test_base_models_expand_to_one_variant_per_base_then_seeds_and_pair_per_base():
    """training.<name>.base_models: the same recipe from each base, as <name>-<base>(-s<seed>), each its own
    variant; experiments on <name> run on every base's seeds; base_pairs pairs OC-SFT with single order
    per base and training data (OC-SFT's pooled-over-bases figure)."""
    cfg = _validated(copy.deepcopy(DEFAULT))
    cfg["models"]["tiny-grades-b"] = dict(cfg["models"]["tiny-grades"])
    for name in ("tiny-ocsft", "tiny-single-order"):
        run = cfg["training"][name]
        run["base_models"] = [run.pop("base_model"), "tiny-grades-b"]
    cfg["training"]["tiny-ocsft"]["seeds"] = [1, 2]
    _register(cfg)
    training = cfg["training"]
    assert {"tiny-ocsft-tiny-grades-s1", "tiny-ocsft-tiny-grades-b-s2", "tiny-single-order-tiny-grades-b"} <= set(training)
    assert "tiny-ocsft" not in training and training["tiny-ocsft-tiny-grades-b-s1"]["base_model"] == "tiny-grades-b"
    assert pbconfig.variant_of(training, "tiny-ocsft-tiny-grades-b-s2") == "tiny-ocsft-tiny-grades-b"
    models = [e["model"] for e in cfg["reranking"]["experiments"]]
    assert [m for m in models if m.startswith("tiny-ocsft-tiny")] == [
        "tiny-ocsft-tiny-grades-s1", "tiny-ocsft-tiny-grades-s2", "tiny-ocsft-tiny-grades-b-s1", "tiny-ocsft-tiny-grades-b-s2"]
    assert pbconfig.base_pairs(cfg) == [
        {"base": "tiny-grades", "data": "synthetic-train", "ocsft": "tiny-ocsft-tiny-grades",
         "single": "tiny-single-order-tiny-grades",
         "objectives": ["tiny-ocsft-tiny-grades", "tiny-single-order-tiny-grades"]},
        {"base": "tiny-grades-b", "data": "synthetic-train", "ocsft": "tiny-ocsft-tiny-grades-b",
         "single": "tiny-single-order-tiny-grades-b",
         "objectives": ["tiny-ocsft-tiny-grades-b", "tiny-single-order-tiny-grades-b"]}]
    plain = _validated(copy.deepcopy(DEFAULT))
    _register(plain)
    assert pbconfig.base_pairs(plain) == [{"base": "tiny-grades", "data": "synthetic-train", "ocsft": "tiny-ocsft",
                                           "single": "tiny-single-order",
                                           "objectives": ["tiny-ocsft", "tiny-single-order"]}]
    for change, message in ((lambda run: run.update(base_models=["tiny-grades"]), "exactly one of them"),
                            (lambda run: run.pop("base_model"), "exactly one of them"),
                            (lambda run: run.update(base_models=["toy-first"]) or run.pop("base_model"),
                             "'toy-first' is not a models entry")):
        bad = _validated(copy.deepcopy(DEFAULT))
        change(bad["training"]["tiny-ocsft"])
        with pytest.raises(ValueError, match=message):
            pbconfig.expand_bases(bad)


@pytest.mark.parametrize(("experiment", "message"), [
    ({"orders": ["original", "shuffled-0", "shuffled-1"], "debias": ["none", "permsc@3"]},
     r"reranking.experiments\[\d+\].debias: permsc@3 aggregates .* shuffled-0, shuffled-1, shuffled-2 .*add shuffled-2"),
    ({"orders": ["original", "shuffled-0", "shuffled-1"], "debias": ["permsc@2"]}, "add none to debias"),
    ({"orders": ["original", "shuffled-0"], "position_debias": ["permsc@1"]}, "list it under `debias`"),
    ({"orders": ["original", "shuffled-0"], "debias": ["permsc-window@0"]}, r"debias: debias 'permsc-window@0'"),
    ({"orders": ["original", "random-2"]}, r"orders: order 'random-2': expected one of original"),
    ({"debias": ["none", "capcal@na-50"]},
     r"debias: capcal@na-50 names no variant in reranking.capcal.variants \(exact\); define it there"),
])
def test_debias_and_order_mistakes_are_one_line_config_errors(experiment, message):
    cfg = _validated(copy.deepcopy(DEFAULT))
    _register(cfg)
    target = next(e for e in cfg["reranking"]["experiments"]
                  if (e["model"], e["dataset"], e["retriever"]) == ("sim-linear", "synthetic", "rrf"))
    target.update(experiment)
    with pytest.raises(ValueError, match=message):
        pbconfig.check_experiments(cfg)


def test_listwise_training_needs_letter_identifiers_and_trained_models_inherit_them():
    cfg = _validated(copy.deepcopy(DEFAULT))
    cfg["models"]["toy-lm"]["identifiers"] = "numbers"
    with pytest.raises(ValueError, match=r"training.toy-first(-s1)?.base_model .toy-lm. uses numbers identifiers"):
        _register(cfg)
    cfg = _validated(copy.deepcopy(DEFAULT))
    _register(cfg)
    assert cfg["models"]["toy-first-s1"]["identifiers"] == "letters"


def test_list_level_permsc_reads_the_shuffled_lists_and_writes_one_ranking():
    experiment = {"orders": ["original", "shuffled-0", "shuffled-1", "shuffled-2", "position-1"],
                  "debias": ["none", "permsc@3"]}
    assert pbconfig.orders_for({}, experiment, "permsc@3") == ["original"]
    assert debias.lists("permsc@3") == ["shuffled-0", "shuffled-1", "shuffled-2"]
    assert pbconfig.orders_for({}, experiment, "none") == experiment["orders"]


def test_duplicate_yaml_keys_are_errors_and_merge_keys_are_not(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text("a: &base {x: 1, y: 2}\nb:\n  <<: *base\n  x: 3\n")
    pbconfig.check_duplicate_keys([ok, *sorted((REPO / "config").glob("**/*.yaml"))])
    bad = tmp_path / "bad.yaml"
    bad.write_text("reranking:\n  window: 20\n  step: 10\n  window: 10\n")
    with pytest.raises(ValueError, match=r"bad.yaml:4: key 'window' appears twice in one mapping \(first at line 2\)"):
        pbconfig.check_duplicate_keys([bad])


def test_a_jobs_model_params_name_the_engine_only_where_it_is_not_the_default():
    """A result made before `engine` existed stays current (its job's params are unchanged); a model on vLLM
    has it in its params, so switching engines reruns its jobs."""
    raw = copy.deepcopy(DEFAULT)
    raw["models"]["toy-first-vllm"] = {"kind": "causal_lm", "path": "toy-first-s1", "mode": "first", "engine": "vllm"}
    cfg = _validated(raw)
    pbconfig.prepare(cfg, files=False)
    before = {k: v for k, v in cfg["models"]["toy-first-s1"].items() if k != "engine"}  # 0.11.0's entry
    assert cfg["models"]["toy-first-s1"]["engine"] == "transformers"
    assert pbconfig.model_settings(cfg, "toy-first-s1") == pbconfig.sorted_keys(before)
    assert pbconfig.model_settings(cfg, "toy-first-vllm")["engine"] == "vllm"


def test_served_widths_are_the_checkpoints_read_at_several_window_widths():
    """The serving-width table's rows, from the config: the default run reads tiny-ocsft at B = 1, 5 and 20 (and
    no other checkpoint at two widths); the OC-SFT toy serves each checkpoint at one B, so it has no such table."""
    default = pbconfig.load(REPO / "config" / "config.yaml", files=False)
    served = {(w["checkpoint"], w["window"]) for w in pbconfig.served_widths(default)}
    assert served == {("tiny-ocsft", 1), ("tiny-ocsft", 5), ("tiny-ocsft", 20)}
    assert pbconfig.served_widths(pbconfig.load(REPO / "config" / "examples" / "ocsft-toy.yaml", files=False)) == []
