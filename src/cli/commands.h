// The `polykv <verb>` commands. Each takes the arguments after the verb (argv[0] is the verb) and
// returns the process exit code: 0 success, 1 runtime error (message on stderr), 2 usage error.
#pragma once

namespace polykv::cli {

int cmd_run(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_synth(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_bench_tokenize(int argc, char** argv);
int cmd_template(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_bench_agents(int argc, char** argv);

}  // namespace polykv::cli
