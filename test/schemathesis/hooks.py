"""Schemathesis hooks of test/schemathesis/openapi.test.ts (loaded through SCHEMATHESIS_HOOKS).

They run just before each request is sent, in every phase (examples, coverage, fuzzing,
stateful), and change only what the OpenAPI document cannot state in JSON Schema:

- `api_key_id` of POST /webhooks names an API key of the caller's project: a well-formed
  generated id becomes the test's own key (SCHEMATHESIS_API_KEY_ID); a malformed one is left
  alone, so negative cases stay negative.
- Rules across fields that the document states in words: custom header names are
  case-insensitive and must not repeat, and total at most 8192 bytes; a timestamp falls in years
  0001 to 9999 once in UTC; a bulk retry's `since` is before its `until` and before now. A
  schema-valid (positive) case that breaks one is mended to keep it, so the server's refusal of
  such a request is not reported as a rejected valid request.
"""

import os
import re
from datetime import datetime, timezone

import schemathesis

API_KEY_ID = os.environ["SCHEMATHESIS_API_KEY_ID"]
API_KEY_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
MAX_CUSTOM_HEADER_BYTES = 8 * 1024


def _operation_id(case) -> str | None:
    return case.operation.definition.raw.get("operationId")


def _is_positive(case) -> bool:
    meta = case.meta
    return meta is not None and meta.generation.mode.is_positive


def _mend_headers(headers: dict) -> dict:
    """Keeps the first of the names that differ only in case, and headers up to the byte limit."""
    kept: dict = {}
    seen: set[str] = set()
    size = 0
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            kept[name] = value
            continue
        cost = len(name.encode()) + len(value.encode())
        if name.lower() in seen or size + cost > MAX_CUSTOM_HEADER_BYTES:
            continue
        seen.add(name.lower())
        size += cost
        kept[name] = value
    return kept


def _instant(value) -> datetime | None:
    """The instant in UTC; None when it is not one, or falls outside years 1 to 9999 in UTC."""
    try:
        return datetime.fromisoformat(value.replace("z", "Z").replace("t", "T")).astimezone(timezone.utc)
    except (AttributeError, TypeError, ValueError, OverflowError):
        return None


def _mend_timestamps(body: dict, names: tuple[str, ...]) -> None:
    """Drops the timestamps of `names` that are not instants the service stores."""
    for name in names:
        if name in body and _instant(body[name]) is None:
            del body[name]


@schemathesis.hook
def before_call(ctx, case, kwargs):
    body = case.body
    if not isinstance(body, dict):
        return
    operation_id = _operation_id(case)
    if operation_id == "createWebhook":
        value = body.get("api_key_id")
        if isinstance(value, str) and API_KEY_ID_PATTERN.match(value):
            body["api_key_id"] = API_KEY_ID
    if not _is_positive(case):
        return
    if operation_id in ("createWebhook", "updateWebhook") and isinstance(body.get("headers"), dict):
        body["headers"] = _mend_headers(body["headers"])
    if operation_id == "publishEvent":
        _mend_timestamps(body, ("occurred_at",))
    if operation_id == "retryDeliveries":
        _mend_timestamps(body, ("since", "until"))
        since, until = _instant(body.get("since")), _instant(body.get("until"))
        latest = min(until, datetime.now(timezone.utc)) if until is not None else datetime.now(timezone.utc)
        if since is not None and since >= latest:
            del body["since"]
