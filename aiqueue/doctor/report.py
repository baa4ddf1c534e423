"""The doctor's report, one line per check, and one run's state (`Doctor`) the checks add to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from aiqueue.errors import SettingsError
from aiqueue.queue import probes
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings

# `warn`: worth fixing, but nothing is broken (the doctor still exits 0).
CheckStatus = Literal["pass", "warn", "fail", "skip"]


@dataclass(frozen=True)
class Check:
    """One line of the report; a failure says how to fix it."""

    name: str
    status: CheckStatus
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "fix": self.fix}


@dataclass
class Report:
    """Every check, in order; `ok` only when none failed."""

    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    @property
    def warnings(self) -> int:
        return sum(c.status == "warn" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_json() for c in self.checks]}

    def text(self) -> str:
        """One line per check (and an indented fix under a failure or a warning)."""
        out = []
        for c in self.checks:
            out.append(f"{c.status.upper():4}  {c.name:11} {c.detail}")
            if c.fix:
                out.append(f"{'':18}fix: {c.fix}")
        out.append(self.summary())
        return "\n".join(out)

    def summary(self) -> str:
        if not self.ok:
            return "some checks failed"
        n = self.warnings
        return f"all checks passed, {n} with a warning" if n else "all checks passed"


def settings_failed(exc: SettingsError) -> Report:
    """The report when the settings themselves are invalid: nothing else can be checked."""
    return Report([Check("settings", "fail", exc.detail,
                         "correct the variable named above (docs/reference/configuration.md)")])


@dataclass
class Doctor:
    """One run: the settings, the instance's Runtime (None: unreachable), the probe's wait."""

    settings: Settings
    rt: Runtime | None
    probe_timeout: float = probes.PROBE_TIMEOUT_SECONDS
    report: Report = field(default_factory=Report)
    schema_current: bool = False

    def add(self, name: str, status: CheckStatus, detail: str, fix: str | None = None) -> None:
        self.report.checks.append(Check(name, status, detail, fix))
