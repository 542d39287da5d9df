#!/usr/bin/env python3
"""Renders a Jinja chat template the way Hugging Face transformers' apply_chat_template does (jinja2 sandbox with
trim_blocks, lstrip_blocks, the loopcontrols extension and a raise_exception global), for the chat-template tests.

Usage: render_chat_template.py REQUEST.json RESPONSE.json
REQUEST:  {"template": str, "bos_token": str, "eos_token": str,
           "cases": [{"messages": [{"role": str, "content": str}, ...], "add_generation_prompt": bool}, ...]}
RESPONSE: [{"text": str} or {"error": str}, ...], one entry per case, in order.
"""
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(request["template"])
    out = []
    for case in request["cases"]:
        try:
            text = template.render(messages=case["messages"], add_generation_prompt=case["add_generation_prompt"],
                                   bos_token=request["bos_token"], eos_token=request["eos_token"])
            out.append({"text": text})
        except Exception as e:  # the template raised (raise_exception, undefined access): the C++ side must throw too
            out.append({"error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
