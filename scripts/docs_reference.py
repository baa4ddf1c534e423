"""Write the generated reference pages of docs/ from the code (never edit those by hand).

    python scripts/docs_reference.py           # write docs/reference/configuration.md, api.md
    python scripts/docs_reference.py --check   # exit 1 when a checked-in page is stale

configuration.md: every environment variable and every aiqueue.toml key, with its
default and its check. The defaults come from the settings table; each check is the
error the settings code itself raises when given a bad value (probed below), so the
page says what start-up really refuses. Only "what it sets" is written by hand, in
scripts/docs_settings.py. api.md: every operation of the OpenAPI description
(scripts/docs_api.py).

Outside the runtime path: nothing in aiqueue/ imports this.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from docs_api import HEADER, api_page, cell  # noqa: E402
from docs_settings import KEYS, VARIABLES, Described  # noqa: E402

CONFIG_PAGE = ROOT / "docs/reference/configuration.md"
API_PAGE = ROOT / "docs/reference/api.md"
# Values tried on each setting; an error any of them raises is one of its checks.
ENV_PROBES = ("", "x", "-1", "http://example.org", "a:b:c:d")
TOML_PROBES = ("-1", '"x"', '""', '"http://example.org"', "{}", "[1]", '"batch"')

# A valid starting point for the probes of a dispatch target's variables.
_DO_ENV = {"AI_MARKING_DISPATCH": "digitalocean", "DO_FUNCTIONS_API_HOST": "https://do.example",
           "DO_FUNCTIONS_NAMESPACE": "fn-1", "DO_FUNCTIONS_ACTION": "ai-mark/mark",
           "DO_FUNCTIONS_AUTH": "user:secret"}
_LAMBDA_ENV = {"AI_MARKING_DISPATCH": "lambda", "AWS_REGION": "eu-west-1",
               "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
               "AI_MARKING_LAMBDA_FUNCTION": "ai-mark"}


@dataclass(frozen=True)
class Setting:
    """One variable or key as the reference lists it."""

    name: str
    default: str
    checks: tuple[str, ...]
    what: str


# -- gathering: the one place that knows where the settings live ----------------------------

# Where the settings code is: its variables' names are read from these files.
SETTINGS_SOURCES = ("aiqueue/settings",)


def table_defaults() -> dict[str, object]:
    """The settings table: each variable a Settings field reads, with the field's default."""
    from aiqueue.settings import Settings, env_fields
    reads = {f.name: f.metadata["read"] for f in fields(Settings) if "read" in f.metadata}
    return {e.name: _vercel_default(reads[e.field], e.default) for e in env_fields()}


def variables_in_source() -> set[str]:
    """Every environment variable the settings code names (read with env.get or by a reader)."""
    names: set[str] = set()
    constants: set[str] = set()
    for source in SETTINGS_SOURCES:
        path = ROOT / source
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            text = file.read_text()
            names |= set(re.findall(r'"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"', text))
            names |= set(re.findall(r'env\.get\("([A-Z][A-Z0-9_]*)"', text))
            constants |= set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*[:=]", text, re.MULTILINE))
    return names - constants


def toml_keys() -> dict[str, dict[str, object]]:
    """aiqueue.toml's keys by table, with the model's default where the key is a field."""
    from aiqueue.settings import canary, kinds, prompt_cache, toml_keys
    found: dict[str, dict[str, object]] = {}
    for table, shape in (("pools", kinds.Pool), ("kinds", kinds.Kind),
                         ("pools.prompt_cache", prompt_cache.PromptCache),
                         ("kinds.canary", canary.Canary)):
        defaults = {f.name: f.default for f in fields(shape) if f.default is not MISSING}
        defaults |= {f.name: {} for f in fields(shape) if f.default_factory is not MISSING}
        found[table] = {k: defaults.get(k, MISSING) for k in toml_keys()[table]}
    return found


def _vercel_default(read: Callable[[Mapping[str, str]], object], default: object) -> object:
    on_vercel = read({"VERCEL": "1"})
    return default if on_vercel == default else (default, on_vercel)


# -- probing: a check is what the code refuses ----------------------------------------------

def _strip(message: str, name: str, value: str) -> str:
    """A refusal without its variable's or key's name and without the value it got."""
    message = re.sub(r",? got .*$", "", message).strip()
    if value.strip('"'):
        bare = re.escape(value.strip('"'))
        message = re.sub(rf"'{bare}'|(?<![\w.]){bare}(?![\w.])", "<value>", message)
    message = message.replace("example.org", "<host>")
    if message.startswith(name):
        message = message[len(name):].lstrip(" :")
    return message


def env_checks(name: str) -> tuple[str, ...]:
    """What start-up says to each probe of the variable `name`, from a valid environment."""
    from aiqueue.errors import SettingsError
    from aiqueue.settings import load_settings
    base = dict(_DO_ENV if name.startswith("DO_FUNCTIONS") else
                _LAMBDA_ENV if name.startswith(("AWS_", "AI_MARKING_LAMBDA")) else {})
    found: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        # An empty aiqueue.toml of its own: a file at the checkout's root changes nothing.
        (Path(tmp) / "aiqueue.toml").write_text("")
        base.setdefault("AIQUEUE_CONFIG", str(Path(tmp) / "aiqueue.toml"))
        load_settings(base)  # the starting point itself is valid
        for value in ENV_PROBES:
            try:
                load_settings({**base, name: value})
            except SettingsError as exc:
                found.append(_strip(str(exc), name, value))
    return tuple(dict.fromkeys(found))


def toml_checks(table: str, key: str) -> tuple[str, ...]:
    """What start-up says to each probe of `[table.x] key`, from a valid file."""
    from aiqueue.errors import SettingsError
    from aiqueue.settings.toml_load import load_file
    env = {**_DO_ENV, "AI_MARKING_DISPATCH": "http", "DOC_KEY": "k",
           "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "s"}
    base = _toml_base(table, key)
    # A pool's prompt cache and a kind's canary are tables of their own inside theirs.
    head = ("[pools.x]\nmax_in_flight = 1\n[pools.x.prompt_cache]\n"
            if table == "pools.prompt_cache" else
            "[kinds.x]\nfunction_url = \"https://f.example\"\n[kinds.x.canary]\n"
            if table == "kinds.canary" else f"[{table}.x]\n")
    where = ("pools.x.prompt_cache" if table == "pools.prompt_cache" else
             "kinds.x.canary" if table == "kinds.canary" else f"{table}.x") + f".{key}"
    found: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "aiqueue.toml"
        path.write_text(head + "\n".join(f"{k} = {v}" for k, v in base.items()))
        load_file(env, path)  # the starting point itself is valid
        for value in TOML_PROBES:
            body = {**base, key: value}
            path.write_text(head + "\n".join(f"{k} = {v}" for k, v in body.items()))
            try:
                load_file(env, path)
            except SettingsError as exc:
                found.append(_strip(str(exc).replace(f"{table}.x: ", f"{where}: "), where, value))
    return tuple(dict.fromkeys(found))


def _toml_base(table: str, key: str) -> dict[str, str]:
    if table in ("pools.prompt_cache", "kinds.canary"):
        return {}
    if table == "pools":
        base = {"max_in_flight": "1"}
        if key.startswith("batch"):
            base |= {"batch": '"openai"', "batch_key_env": '"DOC_KEY"', "batch_model": '"m"'}
        return base
    if key.startswith("do_"):
        return {"dispatch": '"digitalocean"', "do_action": '"ai-mark/mark"'}
    if key == "lambda_function":
        return {"dispatch": '"lambda"', "lambda_function": '"ai-mark"'}
    return {"function_url": '"https://f.example"'}


# -- rendering ------------------------------------------------------------------------------

def _value(value: object) -> str:
    if value is MISSING:
        return ""
    if isinstance(value, tuple) and len(value) == 2 and not isinstance(value[0], str):
        return f"{_value(value[0])} ({_value(value[1])} on Vercel)"
    if value is None or value == {} or value == ():
        return "none"
    return f"`{value}`"


def _table(rows: Iterable[Setting], head: str) -> list[str]:
    lines = [f"| {head} | default | refused at start-up when | what it sets |",
             "|---|---|---|---|"]
    for row in rows:
        checks = "; ".join(row.checks) or "—"
        lines.append(f"| `{row.name}` | {cell(row.default)} | {cell(checks)} | "
                     f"{cell(row.what)} |")
    return lines


def config_settings() -> tuple[list[Setting], dict[str, list[Setting]]]:
    """Every variable and every key, with default, checks and description."""
    table = table_defaults()
    variables = []
    for name, about in VARIABLES.items():
        default = _value(table[name]) if name in table else about.default or "none"
        checks = env_checks(name) if about.probe else ()
        variables.append(Setting(name, default, checks, about.what))
    keys: dict[str, list[Setting]] = {}
    for section, found in toml_keys().items():
        keys[section] = [Setting(k, KEYS[section][k].default or _value(d) or "none",
                                 toml_checks(section, k) if KEYS[section][k].probe else (),
                                 KEYS[section][k].what) for k, d in found.items()]
    return variables, keys


def config_page() -> str:
    variables, keys = config_settings()
    lines = [
        "# Configuration reference", "",
        "Every setting aiqueue reads. A value that fails its check stops start-up with one "
        "line naming it (the check column quotes that line); an unset or blank variable takes "
        "its default. Where each group of settings is explained: "
        "[Configuration](../configuration.md).", "",
        "## Environment variables", "", *_table(variables, "variable"), "",
        "## `aiqueue.toml`", "",
        "The file at the app's root, or the one `AIQUEUE_CONFIG` names. It holds no secrets, "
        "only the names of the variables that hold them. `x` stands for the table's name; "
        "a key not listed here is refused.", "",
        "### `[pools.<name>]`", "", *_table(keys["pools"], "key"), "",
        "### `[pools.<name>.prompt_cache]`", "",
        "The provider's prompt cache ([The prompt cache](../prompt-cache.md)).", "",
        *_table(keys["pools.prompt_cache"], "key"), "",
        "### `[kinds.<name>]`", "", *_table(keys["kinds"], "key"), "",
        "### `[kinds.<name>.canary]`", "",
        "A drift canary ([When the model changes](../canaries.md)).", "",
        *_table(keys["kinds.canary"], "key"), "",
    ]
    return HEADER + "\n".join(lines)


PAGES: dict[Path, Callable[[], str]] = {CONFIG_PAGE: config_page, API_PAGE: api_page}


def stale() -> list[Path]:
    """The generated pages whose checked-in text differs from what the code gives now."""
    return [p for p, build in PAGES.items() if not p.is_file() or p.read_text() != build()]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        found = stale()
        for path in found:
            print(f"{path.relative_to(ROOT)} is stale: run python scripts/docs_reference.py")
        return 1 if found else 0
    for path, build in PAGES.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(build())
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


__all__ = ["Described", "main", "stale", "variables_in_source"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
