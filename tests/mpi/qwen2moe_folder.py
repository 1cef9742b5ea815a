"""Writes a random-weight Qwen2-MoE checkpoint folder (Qwen1.5-MoE's layout
scaled down: attention biases, 8 experts of 64 top-2 unnormalised, and a
shared expert of 128 behind its sigmoid gate) with Llama 2's tokenizer, for
the tensor-parallel test (tests/mpi/tp_test.sh: moe-hf).
Usage: qwen2moe_folder.py SOURCE_DIR SHARED_DIR FOLDER"""
import os
import sys

import torch

SRC, SHARED, FOLDER = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import hf_ref  # noqa: E402

config = {"architectures": ["Qwen2MoeForCausalLM"], "hidden_act": "silu", "hidden_size": 128,
          "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
          "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
          "vocab_size": 32000, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
          "shared_expert_intermediate_size": 128, "norm_topk_prob": False, "use_sliding_window": False}
hf_ref.write_checkpoint(FOLDER, config, hf_ref.random_weights(config, torch.float32, seed=11))
os.symlink(os.path.join(SHARED, "tokenizers", "llama2", "tokenizer.model"), os.path.join(FOLDER, "tokenizer.model"))
