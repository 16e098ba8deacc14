mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main; tar xJf .gpucarry/build-gpu.tar.xz
export POLYKV_GPU_BUDGET_S=560
scripts/gpu-filters.sh 'tests||*Cuda*:*GPU*:GptOss*:-*DISABLED_*|300' 'mmq||CudaMmqBench.DISABLED_VsOldPath|60' 'prefix||CudaAttentionPrefix.DISABLED_PrefixPassBench|60' 'dec8||CudaAttentionDecode8.DISABLED_DecodeModesBench|60' 2>&1 | tail -60
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=/dev/null; setup_gpu_libraries
M=/tmp/llama-3.1-8b-q4_0.gguf; [ -s $M ] || build-gpu/polykv synth --shape llama-3.1-8b --type q4_0 -o $M --threads 16 >/dev/null
timeout 70 build-gpu/polykv bench-agents -m $M --device cuda --agents 1,16,64 --share on --context 32768 --suffix 32 --gen 32 --json | grep '^{' | tee -a $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"decode_step_s":[0-9.]+|"decode_forward_s":[0-9.]+' | paste -sd' '
