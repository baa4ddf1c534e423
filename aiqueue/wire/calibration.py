"""The calibration gate's and the agreement's shapes."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from aiqueue.errors import Invalid
from aiqueue.models.agreement import Agreement
from aiqueue.wire import rules
from aiqueue.wire.base import Wire
from aiqueue.wire.fields import Count, Time, Uuid, described

# The most calibration rows a run may ask for.
MAX_CALIBRATION_ROWS = 50


def _whole(name: str, least: int, most: int | None) -> BeforeValidator:
    def check(value: object) -> object:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < least \
                or most is not None and value > most:
            upto = f" to {most}" if most is not None else " or more"
            raise Invalid(f"{name} must be a whole number from {least}{upto}")
        return value
    return BeforeValidator(check)


def _share(name: str) -> BeforeValidator:
    def check(value: object) -> object:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0 <= value <= 1:
            raise Invalid(f"{name} must be a share from 0 to 1")
        return float(value)
    return BeforeValidator(check)


def _ids(value: object) -> object:
    if value is None:
        return None
    ids = rules.parse_submission_ids(value)
    if len(ids) > MAX_CALIBRATION_ROWS:
        raise Invalid(f"calibrate.submission_ids: at most {MAX_CALIBRATION_ROWS} ids")
    return ids


class Calibrate(Wire):
    """The rows marked first: `rows` (a spread sample) or `submission_ids`, not both."""

    NOT_OBJECT: ClassVar[str] = 'calibrate must be {"rows": K} or {"submission_ids": [...]}'
    model_config = ConfigDict(extra="forbid")

    rows: Annotated[int, Field(ge=1, le=MAX_CALIBRATION_ROWS),
                    _whole("calibrate.rows", 1, MAX_CALIBRATION_ROWS)] | None = described(
        "a spread sample of the run, fixed by its id", default=None)
    submission_ids: Annotated[list[str], WithJsonSchema({
        "type": "array", "items": {"type": "string", "format": "uuid"}, "minItems": 1,
        "maxItems": MAX_CALIBRATION_ROWS}), BeforeValidator(_ids)] | None = described(
        "these submissions of the request", default=None)

    @model_validator(mode="after")
    def _one_of(self) -> Calibrate:
        if (self.rows is None) == (self.submission_ids is None):
            raise Invalid('calibrate must say "rows" or "submission_ids", not both')
        return self


class ReleaseWhen(Wire):
    """Thresholds over the calibration rows' reviews that release the rest by themselves."""

    NOT_OBJECT: ClassVar[str] = "release_when must be a JSON object"
    model_config = ConfigDict(extra="forbid")

    reviewed: Annotated[int, Field(ge=1), _whole("release_when.reviewed", 1, None)] | None = \
        described("at least this many calibration rows reviewed", default=None)
    exact: Annotated[float, Field(ge=0, le=1), _share("release_when.exact")] | None = \
        described("at least this share of the pairs exact", default=None)
    adjacent: Annotated[float, Field(ge=0, le=1), _share("release_when.adjacent")] | None = \
        described("at least this share within max(1, 10 % of max_score)", default=None)

    @model_validator(mode="after")
    def _says_something(self) -> ReleaseWhen:
        if self.reviewed is None and self.exact is None and self.adjacent is None:
            raise Invalid('release_when needs "reviewed", "exact" or "adjacent"')
        return self


class CriterionAgreement(Wire):
    id: str
    reviewed: Count
    exact: float = Field(ge=0, le=1)


class AgreementReport(Wire):
    """Agreement between the AI's scores and the teacher's reviews."""

    reviewed: Count = Field(description="reviewed rows: pairs and reverts")
    reverted: Count
    exact: float | None = Field(ge=0, le=1, description="share of pairs with equal scores")
    adjacent: float | None = Field(ge=0, le=1, description=(
        "share of pairs within max(1, 10 % of max_score) points"))
    mean_abs_error: float | None = Field(ge=0, description="in points")
    qwk: float | None = Field(le=1, description=(
        "quadratic weighted kappa over the integer scores 0..max_score; null under 5 pairs "
        "or when a single score is seen"))
    criteria: list[CriterionAgreement]
    disagreements: list[Uuid] = Field(description="up to 20 rows, largest difference first")

    @classmethod
    def of(cls, a: Agreement) -> AgreementReport:
        return cls(reviewed=a.reviewed, reverted=a.reverted, exact=a.exact,
                   adjacent=a.adjacent, mean_abs_error=a.mean_abs_error, qwk=a.qwk,
                   criteria=[CriterionAgreement(id=c.id, reviewed=c.reviewed, exact=c.exact)
                             for c in a.criteria],
                   disagreements=a.disagreements)


class Released(Wire):
    """A run's held rows released."""

    run_id: Uuid
    released: Count = Field(description="rows that stopped waiting for calibration")
    released_at: Time | None = None
