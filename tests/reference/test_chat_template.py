"""duet's chat-template renderer against Python's Jinja2 (Debian's
python3-jinja2), configured as Hugging Face's apply_chat_template does:
sandboxed, trim_blocks and lstrip_blocks, the loopcontrols extension,
raise_exception() and a json.dumps-based tojson.

Templates: duet's built-ins (Qwen3, Gemma 3, Phi-3 and Phi-3.5 among them), the real
Llama 3 and Qwen3 tokenizer_config.json templates, the Qwen2 and Phi-3
templates of llama.cpp's vocab GGUFs, and templates written here to exercise
the Jinja subset (loops, slicing, namespace, filters, tests, whitespace
control, number printing). Conversations: fixed ones (system prompts,
multi-turn, thinking blocks, tool calls with dict and string arguments, tool
results, reasoning_content, Gemma 3's list-of-parts content) rendered with and
without tools and with enable_thinking unset, true and false, and more
generated from a seed with edge-case contents (Unicode, whitespace runs,
quotes, braces that look like Jinja). As in Hugging Face's
apply_chat_template, tools and documents are None unless given. Every output
must be byte-identical, and a template that raises must make duet fail with
the same message. Exits non-zero on any mismatch.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_reader  # noqa: E402

SHARED = os.environ.get("DUET_SHARED_DIR", os.path.join(os.path.dirname(__file__), "../../../shared"))
DUET = os.environ["DUET_BINARY"]


class TemplateRaised(Exception):
    pass


def raise_exception(message):
    raise TemplateRaised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception

FEATURE_TEMPLATES = {
    "loop_vars": "{%- for m in messages -%}{{ loop.index }}/{{ loop.length }} {{ m.role | upper }}"
                 "{{ ':' if loop.first else ';' }} {{ m.content | trim | replace('\\n', ' ') }}"
                 "{% if not loop.last %}\n{% endif %}{%- endfor -%}",
    "slicing": "{% for m in messages[::-1] %}{{ m.content.split()[:2] | join('_') }}|{{ m.content[:5] }}|"
               "{{ m.content[-3:] }}|{{ m.content | length }}\n{% endfor %}{{ messages[1:] | length }}",
    "namespace": "{% set ns = namespace(n=0, roles=[]) %}{% for m in messages %}{% set ns.n = ns.n + m.content|length %}"
                 "{% set ns.roles = ns.roles + [m.role] %}{% endfor %}{{ ns.n }} {{ ns.roles | tojson }} "
                 "{{ messages | tojson }}\n{{ messages[0] | tojson(indent=2) }}",
    "whitespace": "{% for message in messages %}\n"
                  "    {% if message.role == 'system' %}\n"
                  "<<{{ message.content }}>>\n"
                  "    {% elif message.role == 'user' %}\n"
                  "  U: {{ message.content -}}\n"
                  "    {% else %}\n"
                  "  A: {{- message.content }}\n"
                  "    {%- endif %}\n"
                  "{# a comment #}\n"
                  "{% endfor %}\n"
                  "{% if add_generation_prompt %}\n"
                  "  A:\n"
                  "{% endif %}\n",
    "numbers": "{{ messages|length * 2.5 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 0.5 }} {{ (messages|length) / 3 }} "
               "{{ 1e20 }} {{ 1/3 }} {{ 10 / 4 }} {{ 0.1 * 3 }} {{ 123456789 * 1000 }} {{ 1e-7 }} {{ -0.0 }}",
    "tests_filters": "{% for m in messages %}{{ m.content is string }} {{ m.extra is defined }} "
                     "{{ m.content.startswith('A') }} {{ m.content.endswith(('.', '?')) }} "
                     "{{ m.content.strip(' .') }} {{ m.role | title }} {{ m.role | capitalize }} "
                     "{{ m.content.lstrip().rstrip('!') }}{{ '\\n' }}{% endfor %}"
                     "{{ messages | map(attribute='role') | unique | list }} "
                     "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} "
                     "{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') | join(',') }} "
                     "{{ messages[0].get('role') }} {{ messages[0].items() | list | length }}",
    "control": "{% for m in messages %}{% if loop.index0 == 3 %}{% break %}{% endif %}"
               "{% if m.role == 'system' %}{% continue %}{% endif %}[{{ m.content }}]{% endfor %}"
               "{% for m in messages if m.role == 'assistant' %}{{ loop.index }}{{ m.content | default('none', true) }}"
               "{% else %}no assistant{% endfor %}{{ none }}{{ undefined_thing }}{{ 'x' if undefined_thing is none else 'y' }}",
    "alternate": "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
                 "{{ raise_exception('roles must alternate at ' ~ loop.index0) }}{% endif %}{{ m.content }}{% endfor %}",
}

PIECES = ["Hello", "world", "How are you?", "A", "ok.", " ", "  ", "\n", "\n\n", "\t", "é", "日本語", "🙂", "'", '"',
          "{{ x }}", "{% if %}", "\\", "<s>", "</think>", "<think>", "\u00a0", "\u3000", "!", "1.5", "x" * 40]


def random_content(rng):
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8)))


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}]


def call(name, arguments, wrapped=True):
    fn = {"name": name, "arguments": arguments}
    return {"type": "function", "function": fn} if wrapped else fn


# Conversations with tools and thinking: (label, messages, templates it is
# meant for or None for all). Tool-call turns carry "" as content, which
# every template can concatenate.
TOOL_CONVERSATIONS = [
    ("tool round trip", [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", {"city": "Paris"}), call("get_weather", '{"city": "Oslo", "unit": "c"}')]},
        {"role": "tool", "content": "18 C"},
        {"role": "tool", "content": "9 C"},
        {"role": "assistant", "content": "<think>\nCompare them.\n</think>\n\nParis 18 C, Oslo 9 C."},
        {"role": "user", "content": "Thanks! And Rome?"}], None),
    ("reasoning_content", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Add them."}], None),
    ("text then call, tool last", [
        {"role": "user", "content": "Call it"},
        {"role": "assistant", "content": "Sure.", "tool_calls": [call("get_weather", {"city": "Lima", "unit": "c"}, False)]},
        {"role": "tool", "content": "22"}], None),
    ("multi-step tool", [
        {"role": "system", "content": "Think first."},
        {"role": "user", "content": "Start"},
        {"role": "assistant", "content": "<think>\nplan\n</think>\n\nstep one", "tool_calls": [call("get_weather", {})]},
        {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
        {"role": "assistant", "content": "<think>\nmore\n</think>\n\ndone"}], None),
    ("gemma3 parts", [
        {"role": "system", "content": [{"type": "text", "text": " Be brief. "}]},
        {"role": "user", "content": [{"type": "text", "text": " Describe "}, {"type": "image"}, {"type": "text", "text": "this"}]},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "Sure?"}], {"gemma3"}),
]

# Keyword arguments the tool conversations are rendered with.
VARIANTS = [{}, {"tools": TOOLS}, {"tools": TOOLS, "enable_thinking": False}, {"enable_thinking": True},
            {"enable_thinking": False}]


def conversations(rng):
    fixed = [
        [{"role": "user", "content": "Hello"}],
        [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello"},
         {"role": "assistant", "content": " Hi there "}, {"role": "user", "content": "Who are you?"}],
        [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHi"},
         {"role": "user", "content": "More"}],
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    ]
    out = list(fixed)
    for _ in range(10):
        n = rng.randint(1, 6)
        msgs = []
        if rng.random() < 0.4:
            msgs.append({"role": "system", "content": random_content(rng)})
        for i in range(n):
            msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": random_content(rng)})
        out.append(msgs)
    return out


def jinja_render(source, messages, bos, eos, gen, kwargs):
    variables = dict(kwargs)
    variables.setdefault("tools", None)
    try:
        return True, ENV.from_string(source).render(messages=messages, documents=None, bos_token=bos, eos_token=eos,
                                                    add_generation_prompt=gen, **variables)
    except TemplateRaised as e:
        return False, "template error: " + str(e)


def duet_render(template_arg, messages_path, bos, eos, gen):
    cmd = [DUET, "chat-template", "--chat-template", template_arg, "--messages", messages_path, "--bos", bos,
           "--eos", eos]
    if gen:
        cmd.append("--add-generation-prompt")
    p = subprocess.run(cmd, capture_output=True)
    if p.returncode == 0:
        return True, p.stdout.decode("utf-8")
    return False, p.stderr.decode("utf-8", "replace")


def main():
    rng = random.Random(20240607)
    tmp = tempfile.mkdtemp(prefix="duet-chat-template-")
    templates = []  # (name, duet --chat-template argument, source, bos, eos)
    for name, bos, eos in [("llama2", "<s>", "</s>"), ("llama3", "<|begin_of_text|>", "<|eot_id|>"),
                           ("mistral", "<s>", "</s>"), ("chatml", "", "<|im_end|>"), ("gemma", "<bos>", "<eos>"),
                           ("phi3", "<s>", "<|endoftext|>"), ("qwen3", "", "<|im_end|>"),
                           ("gemma3", "<bos>", "<eos>"), ("phi3.5", "<s>", "<|endoftext|>")]:
        source = subprocess.run([DUET, "chat-template", "--chat-template", name, "--source"], capture_output=True,
                                check=True).stdout.decode("utf-8")
        templates.append((name, name, source, bos, eos))
    for d, bos, eos in [("llama3", "<|begin_of_text|>", "<|end_of_text|>"), ("qwen3", "", "<|im_end|>")]:
        path = os.path.join(SHARED, "tokenizers", d, "tokenizer_config.json")
        templates.append((d + " tokenizer_config", path, json.load(open(path))["chat_template"], bos, eos))
    for f in ["ggml-vocab-qwen2.gguf", "ggml-vocab-phi-3.gguf"]:
        source = gguf_reader.GgufFile(os.path.join(SHARED, "tokenizers", "llama.cpp-vocab", f)).metadata[
            "tokenizer.chat_template"]
        path = os.path.join(tmp, f + ".jinja")
        open(path, "w", encoding="utf-8").write(source)
        templates.append((f, path, source, "<s>", "</s>"))
    for name, source in FEATURE_TEMPLATES.items():
        path = os.path.join(tmp, name + ".jinja")
        open(path, "w", encoding="utf-8").write(source)
        templates.append((name, path, source, "<s>", "</s>"))

    # (label, messages, keyword arguments, templates or None for all)
    cases = [("conversation %d" % i, m, {}, None) for i, m in enumerate(conversations(rng))]
    cases += [("%s %s" % (label, json.dumps(kw)), m, kw, only)
              for label, m, only in TOOL_CONVERSATIONS for kw in (VARIANTS if only is None else [{}])]
    failures = checked = raised = 0
    for ci, (label, messages, kwargs, only) in enumerate(cases):
        mpath = os.path.join(tmp, "messages%d.json" % ci)
        json.dump(dict(kwargs, messages=messages), open(mpath, "w", encoding="utf-8"), ensure_ascii=False)
        for name, arg, source, bos, eos in templates:
            if only is not None and name not in only:
                continue
            for gen in (False, True):
                want_ok, want = jinja_render(source, messages, bos, eos, gen, kwargs)
                got_ok, got = duet_render(arg, mpath, bos, eos, gen)
                checked += 1
                raised += not want_ok
                same = (want_ok and got_ok and want == got) or (not want_ok and not got_ok and want in got)
                if not same:
                    failures += 1
                    if failures <= 10:
                        print("MISMATCH %s, %s, add_generation_prompt=%s\n  jinja2: %r\n  duet:   %r"
                              % (name, label, gen, want, got))
    print("%d renderings (%d templates, %d conversations, with and without a generation prompt), "
          "%d raised in both, %d mismatches" % (checked, len(templates), len(cases), raised, failures))
    sys.exit(1 if failures or checked == 0 else 0)


if __name__ == "__main__":
    main()
