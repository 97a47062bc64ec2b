"""What the service's HTTP API accepts and answers, as pydantic models.

The models are the OpenAPI document: every field has the bounds the index can take
(`links_in` fits DuckDB's INTEGER, strings are valid UTF-8 without lone surrogates, URLs are
1..8192 characters), and "exactly one of text, html, redirect_to" is a tagged union, which the
schema states as `oneOf` of closed objects, so a fuzzer generating from the schema and the
server agree on what is valid. Body models are strict: `"3"` is not an integer here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
)

from neardup.index.state.updates import MAX_LINKS, PAGE_ONE_OF, PageUpdate

MAX_BATCH = 10_000
MAX_URL = 8192
MAX_GROUP = 2**63 - 1


def _utf8(value: str) -> str:
    """Refuse strings that cannot be written as UTF-8 (a lone surrogate from JSON `\\ud800`)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError("not valid Unicode text (lone surrogate)") from err
    return value


def _json_integer(value: Any) -> Any:
    """JSON Schema counts 378.0 as an integer; the strict models take it as 378 (not "378")."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Text = Annotated[str, AfterValidator(_utf8)]
Url = Annotated[str, StringConstraints(min_length=1, max_length=MAX_URL), AfterValidator(_utf8)]
LinksIn = Annotated[
    int,
    Field(ge=0, le=MAX_LINKS, description="distinct pages linking here"),
    BeforeValidator(_json_integer),
]
GroupId = Annotated[int, Field(ge=0, le=MAX_GROUP)]


class _Closed(BaseModel):
    """A request object: no unknown keys, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True)


class TextPage(_Closed):
    url: Url
    text: Text
    links_in: LinksIn | None = None


class HtmlPage(_Closed):
    url: Url
    html: Text
    links_in: LinksIn | None = None


class RedirectPage(_Closed):
    url: Url
    redirect_to: Url
    links_in: LinksIn | None = None


class LinksPage(_Closed):
    """Only a new in-link count, for a page the index holds."""

    url: Url
    links_in: LinksIn


def _pick(keys: tuple[str, ...], tags: tuple[str, ...], alone: tuple[str, str] | None = None):
    """A discriminator: the tag of the one key present among `keys`; when none is, the tag
    of `alone` = (key, tag) if that key is present; else None, reported as the union's error."""

    def pick(value: Any) -> str | None:
        if not isinstance(value, dict):
            return None
        present = [t for k, t in zip(keys, tags, strict=True) if k in value]
        if len(present) == 1:
            return present[0]
        if not present and alone is not None and alone[0] in value:
            return alone[1]
        return None

    return pick


PageIn = Annotated[
    Annotated[TextPage, Tag("TextPage")]
    | Annotated[HtmlPage, Tag("HtmlPage")]
    | Annotated[RedirectPage, Tag("RedirectPage")]
    | Annotated[LinksPage, Tag("LinksPage")],
    Discriminator(
        _pick(
            ("text", "html", "redirect_to"),
            ("TextPage", "HtmlPage", "RedirectPage"),
            ("links_in", "LinksPage"),
        ),
        custom_error_type="one_of",
        custom_error_message=PAGE_ONE_OF,
    ),
]


class PagesIn(_Closed):
    pages: list[PageIn] = Field(max_length=MAX_BATCH)


def page_updates(
    pages: Iterable[TextPage | HtmlPage | RedirectPage | LinksPage],
) -> list[PageUpdate]:
    """The index's updates for validated pages: what `POST /pages` applies, whether the
    pages came as JSON or, row by row, as an Arrow stream (`bulk_body.py`)."""
    return [
        PageUpdate(
            p.url,
            getattr(p, "text", None),
            getattr(p, "html", None),
            getattr(p, "redirect_to", None),
            p.links_in,
        )
        for p in pages
    ]


class CheckText(_Closed):
    text: Text


class CheckHtml(_Closed):
    html: Text


CheckIn = Annotated[
    Annotated[CheckText, Tag("CheckText")] | Annotated[CheckHtml, Tag("CheckHtml")],
    Discriminator(
        _pick(("text", "html"), ("CheckText", "CheckHtml")),
        custom_error_type="one_of",
        custom_error_message="give exactly one of text or html",
    ),
]


class RemoveIn(_Closed):
    urls: list[Url] = Field(min_length=1, max_length=MAX_BATCH)


TAGS = frozenset({"TextPage", "HtmlPage", "RedirectPage", "LinksPage", "CheckText", "CheckHtml"})


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class Error(BaseModel):
    """Every error the API answers, whatever its status: a sentence, and for a 422 the
    fields at fault."""

    detail: str
    errors: list[FieldError] | None = None


ANSWERS = {
    404: "not found",
    422: "a field out of its bounds, or not of its type (each named in `errors`)",
}


def error_responses(
    *codes: int, described: Mapping[int, str] | None = None
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries with the one error body for the app's own answers with
    these codes, `described` where a route says more than "not found". The door's refusals,
    any route's, are listed by `door.refusal_responses`."""
    what = {**ANSWERS, **(described or {})}
    return {c: {"model": Error, "description": what[c]} for c in codes}


# ---------------------------------------------------------------- answers
# The reads' answers, field for field the index's records (`index/state/read_records.py`),
# built from them (`answer`); `tests/service/test_read_records.py` pins the two field sets.


class _Answer(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class UrlStatusOut(_Answer):
    url: str
    removed: bool
    redirect_chain: list[str]
    final_url: str
    group_id: int | None
    winner_url: str | None
    is_duplicate: bool
    verified: bool
    resemblance: float | None


class GroupMemberOut(_Answer):
    url: str
    winner: bool
    verified: bool
    resemblance: float
    links_in: int
    popularity: int


class GroupViewOut(_Answer):
    group_id: int
    winner_url: str
    size: int
    members: list[GroupMemberOut]
    redirects: list[str]


class CheckMatchOut(_Answer):
    url: str
    group_id: int | None
    resemblance: float


class CheckResultOut(_Answer):
    is_duplicate: bool
    group_id: int | None
    winner_url: str | None
    resemblance: float | None
    matches: list[CheckMatchOut]
    length: int


class SummaryOut(_Answer):
    """`GET /`: the store, its counts (`IndexCounts`' fields) and its sketch settings."""

    store: str
    pages: int
    redirects: int
    groups: int
    duplicate_groups: int
    threshold: float
    bands: int
    rows: int


A = TypeVar("A", bound=_Answer)


def answer(model: type[A], record: object) -> A:
    """The API's answer `model` of one of the index's read records."""
    return model.model_validate(record, from_attributes=True)
