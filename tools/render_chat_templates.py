#!/usr/bin/python3
"""Renders every chat template x test conversation the way Hugging Face transformers does and stores
the expected bytes for tests/chat_template_test.cpp.

Run with Debian's python (it has jinja2):  /usr/bin/python3 tools/render_chat_templates.py

The environment mirrors transformers' `_compile_jinja_template`: ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and the loopcontrols extension; globals raise_exception and strftime_now;
the tojson filter replaced by json.dumps. Render arguments mirror `render_jinja_template`:
messages, tools (None when absent), documents=None, add_generation_prompt, the special tokens, and
extra kwargs. strftime_now uses a FIXED date (FIXED_NOW) so outputs are reproducible; the C++ test
injects the same date.

Outputs, per template T and conversation C, in tests/data/chat/expected/:
  T__C.txt        the rendered text, byte for byte, when rendering succeeded
  T__C.error.txt  "<ExceptionType>: <message>" when the template raised (the C++ side must throw)

It also renders the engine snippets of tests/data/chat/jinja_cases.json (template + context, same
environment, no other variables) into tests/data/chat/jinja_cases.expected.json:
  {name: {"output": text} | {"error": "<ExceptionType>: <message>"}}
"""
import datetime
import glob
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES_DIR = os.path.join(ROOT, "..", "shared", "fixtures", "chat-templates")
CONVERSATIONS_DIR = os.path.join(ROOT, "tests", "data", "chat", "conversations")
EXPECTED_DIR = os.path.join(ROOT, "tests", "data", "chat", "expected")
SNIPPETS = os.path.join(ROOT, "tests", "data", "chat", "jinja_cases.json")
SNIPPETS_EXPECTED = os.path.join(ROOT, "tests", "data", "chat", "jinja_cases.expected.json")

FIXED_NOW = datetime.datetime(2025, 3, 14, 9, 26, 53)
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"


def compile_template(source):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def render(source, conversation):
    template = compile_template(source)
    kwargs = dict(conversation.get("extra", {}))
    return template.render(messages=conversation["messages"], tools=conversation.get("tools"),
                           documents=None,
                           add_generation_prompt=conversation.get("add_generation_prompt", False),
                           bos_token=BOS_TOKEN, eos_token=EOS_TOKEN, **kwargs)


def main():
    templates_dir = sys.argv[1] if len(sys.argv) > 1 else TEMPLATES_DIR
    os.makedirs(EXPECTED_DIR, exist_ok=True)
    for old in glob.glob(os.path.join(EXPECTED_DIR, "*.txt")):
        os.remove(old)
    n_ok = n_err = 0
    for template_path in sorted(glob.glob(os.path.join(templates_dir, "*.jinja"))):
        template_name = os.path.basename(template_path)[: -len(".jinja")]
        with open(template_path, encoding="utf-8") as f:
            source = f.read()
        for conv_path in sorted(glob.glob(os.path.join(CONVERSATIONS_DIR, "*.json"))):
            conv_name = os.path.basename(conv_path)[: -len(".json")]
            with open(conv_path, encoding="utf-8") as f:
                conversation = json.load(f)
            stem = os.path.join(EXPECTED_DIR, f"{template_name}__{conv_name}")
            try:
                text = render(source, conversation)
                with open(stem + ".txt", "w", encoding="utf-8", newline="") as f:
                    f.write(text)
                n_ok += 1
            except Exception as e:  # the template raised: record it, C++ must throw too
                with open(stem + ".error.txt", "w", encoding="utf-8", newline="") as f:
                    f.write(f"{type(e).__name__}: {e}\n")
                n_err += 1
    print(f"rendered {n_ok}, raised {n_err}")
    render_snippets()


def render_snippets():
    with open(SNIPPETS, encoding="utf-8") as f:
        cases = json.load(f)
    expected = {}
    for case in cases:
        try:
            text = compile_template(case["template"]).render(**case["context"])
            expected[case["name"]] = {"output": text}
        except Exception as e:
            expected[case["name"]] = {"error": f"{type(e).__name__}: {e}"}
    with open(SNIPPETS_EXPECTED, "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"snippets: {len(cases)}")


if __name__ == "__main__":
    main()
