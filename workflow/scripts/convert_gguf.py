"""Convert a GGUF checkpoint into an HF folder (posbias.gguf): dequantised, in the entry's dtype, its sha256 recorded."""

from pathlib import Path

from posbias.gguf.convert import convert
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "convert_gguf") as log:
    record = convert(dict(sm.params.gguf), sm.wildcards.model, Path(sm.output[0]), sm.params.dtype)
    log.info("converted %s (%s, %d bytes, sha256 %s) into %s: %s, %d parameters, %s, chat template: %s",
             record["file"], record["name"], record["bytes"], record["sha256"], sm.output[0], record["architecture"],
             record["parameters"], record["dtype"], "yes" if record["chat_template"] else "no (the plain prompt)")
