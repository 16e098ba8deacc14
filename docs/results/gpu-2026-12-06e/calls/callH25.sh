#!/usr/bin/env bash
# 2026-12-06e call H25 (issue #9), written for the next session, NOT RUN (this session's device time ran out): the
# fused launches of the last two sessions on the fixture families that have not run them on a GPU, and the transformers
# goldens of those families with the fused launches on.
#   FuseDecCuda.Gemma2FixtureSameBitsWithFusedLaunches, FuseDecCuda.GptOssFixtureSameBitsWithFusedQkvRope (fixtures
#   quantized to q8_0: the fused q,k,v + Neox RoPE launch for Gemma 2 and gpt-oss, Gemma 2's post-norm launch),
#   FuseDecCuda.BiasedNeoxModelSameBitsWithFusedOps (qwen2: not run since H21), Model/DenseGoldenCuda.* (gemma2,
#   qwen2), GptOssCuda.*, MoeModelCuda.* (qwen3moe).
# Carry (64 MiB): .gpucarry/build-gpu.tar.xz (~21 MB) and .gpucarry/fixtures/models/random/ holding only the gemma2,
# gptoss, qwen2 and qwen3moe sets (*.gguf, *.ref.json, *.logits_full.f32, *.logits_kvcache.f32: ~28 MB); move docs/
# (copy this script to the root first) and every models/*.gguf out for the call (the embedded model is 27 MB; no test
# here reads it). The fixture tests absent from the carry skip (POLYKV_REQUIRE_FIXTURE_MODEL_OR_SKIP).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
F='FuseDecCuda.Gemma2*:FuseDecCuda.GptOss*:FuseDecCuda.BiasedNeox*:Model/DenseGoldenCuda.*:GptOssCuda.*:MoeModelCuda.*'
timeout 400 $T --gtest_filter="$F" --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|Failure' $OUT/tests.log | head -40 >> $SUMMARY
note "done at $((SECONDS-t0)) s"
