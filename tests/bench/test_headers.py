"""bench/headers.py: --header and OPENAI_API_KEY as vllm bench serve takes them; values never shown."""

from __future__ import annotations

import pytest

from envforge.bench.headers import request_headers
from envforge.core.errors import InputError

KEY = "sk-test-0123456789abcdef"


def test_the_api_key_and_headers_in_order_a_later_name_wins() -> None:
    assert request_headers([], {}) == ()
    assert request_headers([], {"OPENAI_API_KEY": ""}) == ()
    assert request_headers([], {"OPENAI_API_KEY": KEY}) == (("Authorization", f"Bearer {KEY}"),)
    assert request_headers(
        ["X-Tenant=team-a", "x-trace = on ", "X-TENANT=team-b", "Empty="], {"OPENAI_API_KEY": KEY}
    ) == (("Authorization", f"Bearer {KEY}"), ("X-TENANT", "team-b"), ("x-trace", "on"), ("Empty", ""))
    assert request_headers(["Authorization=Basic abc"], {"OPENAI_API_KEY": KEY}) == (("Authorization", "Basic abc"),)
    assert request_headers(["X-Url=a=b"], {}) == (("X-Url", "a=b"),)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            ["X-Tenant"],
            "--header #1 ('X-Tenant'): expected NAME=VALUE with an HTTP field name (the value is not shown)",
        ),
        (
            ["ok=1", "bad name=" + KEY],
            "--header #2: expected NAME=VALUE with an HTTP field name (the value is not shown)",
        ),
        (["=" + KEY], "--header #1: expected NAME=VALUE with an HTTP field name (the value is not shown)"),
        (
            ["X-Key=" + KEY + "\r\nX-Evil: 1"],
            "--header #1 ('X-Key'): the value holds a line break or another control character (not shown)",
        ),
        (
            ["X-Key=a\x00b"],
            "--header #1 ('X-Key'): the value holds a line break or another control character (not shown)",
        ),
    ],
)
def test_a_malformed_header_is_refused_without_its_value(given: list[str], message: str) -> None:
    with pytest.raises(InputError) as exc:
        request_headers(given, {})
    assert exc.value.message == message and KEY not in str(exc.value)


def test_a_key_with_a_line_break_is_refused_without_showing_it() -> None:
    with pytest.raises(InputError) as exc:
        request_headers([], {"OPENAI_API_KEY": KEY + "\n"})
    assert exc.value.message == "OPENAI_API_KEY holds a line break or another control character (not shown)"
    assert KEY not in str(exc.value)
