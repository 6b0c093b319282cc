"""The `train` command's options, made from RunConfig's fields: the name, the default, the kind of value and the
help are declared once, on the field (`config._field`), and nothing here restates them.

`--lora-rank` is `RunConfig.lora_rank`; how its text becomes a value is its kind's (`PARSERS`); its help's
`{placeholders}` are filled here, from the layers that know them (the registry's names, the runtime's limits).
What the user typed is known exactly (`typed`: the parser takes no abbreviations), so a config sets only those
fields (`RunConfig.is_set`), and `--resume` can refuse the ones it would not use.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Callable, Dict, Iterable

from tpukit.config import RunConfig


def _optional(parse: Callable, what: str) -> Callable:
    """`parse`, or None for 'none'; an argparse error naming `what` was expected."""

    def parse_text(text: str):
        if text.strip().lower() == "none":
            return None
        return _strict(parse, what)(text)

    return parse_text


def _strict(parse: Callable, what: str) -> Callable:
    def parse_text(text: str):
        try:
            return parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}. Received: {text!r}") from None

    return parse_text


def _window(text: str):
    """START:STOP steps, or off/none."""
    if text.lower() in ("off", "none", ""):
        return None
    try:
        start, stop = (int(p) for p in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP steps, e.g. 2:4. Received: {text!r}") from None
    return (start, stop)


def _fraction(text: str):
    if text.lower() in ("none", "off", ""):
        return None
    return _strict(float, "a fraction such as 0.1, or none")(text)


def _int_or_auto(text: str):
    if text.strip().lower() == "auto":
        return "auto"
    return _strict(int, "a whole number of steps or auto")(text)


def _auto_on_off(text: str):
    choices = {"auto": "auto", "on": True, "off": False}
    if text.strip().lower() not in choices:
        raise argparse.ArgumentTypeError(f"expected auto, on or off. Received: {text!r}")
    return choices[text.strip().lower()]


def _names(text: str):
    return tuple(name.strip() for name in text.split(",") if name.strip()) or None


def _options(text: str):
    """KEY=VALUE[,KEY=VALUE]: a preference method's options, numbers where they read as one."""
    options = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, equals, value = part.partition("=")
        if not equals or not key.strip() or not value.strip():
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE pairs such as beta=0.2. Received: {text!r}")
        try:
            options[key.strip()] = float(value)
        except ValueError:
            options[key.strip()] = value.strip()
    return options or None


# How each kind of field (`config.FIELD_KINDS`) is read from the command line.
PARSERS: Dict[str, Callable] = {
    "choice": str,
    "name": str,
    "str": str,
    "optional_str": str,
    "int": int,
    "optional_int": _optional(int, "a whole number or none"),  # argparse: "invalid int value: 'x'"
    "float": float,
    "optional_float": _optional(float, "a number or none"),
    "fraction": _fraction,
    "int_or_auto": _int_or_auto,
    "auto_on_off": _auto_on_off,
    "window": _window,
    "names": _names,
    "options": _options,
}
_SHOWN = {True: "on", False: "off"}  # how --help shows an auto_on_off default


class DefaultsHelp(argparse.HelpFormatter):
    """Each option's help ends with its default, as `--help` shows it (none for a flag, or where there is none)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default in (None, False, argparse.SUPPRESS)
            or "%(default)" in text
            or "default" in text
        ):
            return text
        shown = ",".join(default) if isinstance(default, (tuple, list)) else _SHOWN.get(default, default)
        return f"{text} (default: {shown})" if text else f"default: {shown}"


# Other names of a field's option: `--data`, as `train(data=...)` names what is trained on.
_ALIASES = {"dataset": ("--data",)}


def add_train_options(parser: argparse.ArgumentParser) -> None:
    """One option per RunConfig field, in the dataclass's order: `--field-name`, its kind's parser, its default."""
    facts = _placeholders()
    for field in dataclasses.fields(RunConfig):
        kind, text = field.metadata["kind"], field.metadata["help"].format(**facts)
        flags = ("--" + field.name.replace("_", "-"), *_ALIASES.get(field.name, ()))
        if kind == "bool":
            parser.add_argument(*flags, action="store_true", help=text)
            continue
        metavar = field.metadata.get("metavar") or {"auto_on_off": "auto|on|off", "int_or_auto": "N|auto"}.get(kind)
        parser.add_argument(*flags, type=PARSERS[kind], default=field.default, metavar=metavar, help=text)


def typed(parser: argparse.ArgumentParser, argv: Iterable[str]) -> frozenset:
    """The options of `parser` that `argv` names, as dests (`lora_rank`)."""
    options = {flag: action.dest for action in parser._actions for flag in action.option_strings}  # argparse's list
    return frozenset(options[token.split("=")[0]] for token in argv if token.split("=")[0] in options)


def config_from(args: argparse.Namespace, given: Iterable[str]) -> RunConfig:
    """The RunConfig of the fields named in `given` (what was typed), the rest at RunConfig's defaults."""
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    return RunConfig(**{name: getattr(args, name) for name in given if name in fields})


def _placeholders() -> Dict[str, str]:
    """What the fields' help texts name from above the config: the registry's names, the choices and limits."""
    from tpukit import precision, registry
    from tpukit.config import ACCELERATORS, BACKENDS, OPTIMIZERS
    from tpukit.data.builtin import ONLINE_DATASETS
    from tpukit.hardware.runtime import AUTO_STEPS_PER_EXECUTION, CPU_CALL_SECONDS

    datasets = registry.names("dataset")
    offline = [n for n in datasets if n not in ONLINE_DATASETS]
    online = [n for n in datasets if n in ONLINE_DATASETS]
    return {
        "backends": ", ".join(BACKENDS),
        "accelerators": ", ".join(ACCELERATORS),
        "optimizers": ", ".join(OPTIMIZERS),
        "precisions": ", ".join(precision.CHOICES),
        "models": ", ".join(registry.names("model")),
        "datasets": ", ".join(offline) + (f" (bundled, offline); {', '.join(online)} (downloaded)" if online else ""),
        "steps_cap": str(AUTO_STEPS_PER_EXECUTION),
        "cpu_call_ms": f"{1000 * CPU_CALL_SECONDS:.0f}",
        "epochs": str(RunConfig.__dataclass_fields__["epochs"].default),
    }
