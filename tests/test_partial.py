"""A preempted rerank job keeps its finished orders: posbias.partial."""

import os

from posbias.partial import STAMP, PartialFolder, digest


def test_the_digest_follows_params_and_input_files(tmp_path):
    data = tmp_path / "run.parquet"
    data.write_text("a")
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights").write_text("w")
    first = digest({"window": 20}, [str(data), str(model)])
    assert digest({"window": 20}, [str(data), str(model)]) == first
    assert digest({"window": 10}, [str(data), str(model)]) != first
    (model / "weights").write_text("retrained")
    os.utime(model / "weights", ns=(1, 1))
    assert digest({"window": 20}, [str(data), str(model)]) != first


def test_finished_parts_survive_an_interruption_and_move_into_place(tmp_path):
    final = tmp_path / "batches" / "none.list-0"
    folder = PartialFolder(final, "stamp-a")
    folder.path("original.parquet").write_text("run")
    folder.path("original.stats.json").write_text("{}")
    folder.path("shuffled-0.parquet").write_text("half-written")  # interrupted before its stats file
    # the requeued job, same stamp: the finished order is kept, the unfinished one is redone
    again = PartialFolder(final, "stamp-a")
    assert again.done("original.stats.json") and not again.done("shuffled-0.stats.json") and again.resumed == 1
    again.path("shuffled-0.stats.json").write_text("{}")
    final.mkdir(parents=True)  # Snakemake may have created the (empty) output folder
    again.finish()
    assert sorted(p.name for p in final.iterdir()) == ["original.parquet", "original.stats.json",
                                                       "shuffled-0.parquet", "shuffled-0.stats.json"]
    assert not (tmp_path / "batches" / ".none.list-0.partial").exists() and not (final / STAMP).exists()


def test_a_different_stamp_discards_the_old_parts(tmp_path):
    final = tmp_path / "none.list-0"
    folder = PartialFolder(final, "stamp-a")
    folder.path("original.stats.json").write_text("{}")
    other = PartialFolder(final, "stamp-b")  # other settings, inputs or code
    assert not other.done("original.stats.json") and not other.path("original.stats.json").exists()


def test_a_damaged_or_foreign_partial_folder_is_dropped_and_its_parts_redone(tmp_path):
    """A ``.partial`` that is a file, has a damaged (non-text) stamp or none at all: nothing in it counts
    as finished, so every order is reranked."""
    final = tmp_path / "none.list-0"
    hidden = tmp_path / ".none.list-0.partial"
    hidden.write_bytes(b"\x00not a folder")
    folder = PartialFolder(final, "stamp-a")
    assert hidden.is_dir() and not folder.done("original.stats.json")
    for stamp in (b"\xff\xfe\x00", None):  # damaged bytes; missing (a foreign copy)
        folder.path("original.stats.json").write_text("{}")
        (hidden / STAMP).unlink()
        if stamp is not None:
            (hidden / STAMP).write_bytes(stamp)
        again = PartialFolder(final, "stamp-a")
        assert not again.done("original.stats.json") and not again.path("original.stats.json").exists()
