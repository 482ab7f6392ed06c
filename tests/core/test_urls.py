"""envforge.core.urls: the URL scheme patterns every credential redaction is built from."""

from __future__ import annotations

import re

import pytest

from envforge.cli.crashlog import mask_userinfo
from envforge.cli.output import redact
from envforge.core.errors import ExternalToolError
from envforge.core.urls import SCHEME, SCHEME_BODY, SCHEME_START, redact_credentials
from envforge.lock.routing import redact_userinfo


@pytest.mark.parametrize(
    ("text", "found", "start"),
    [
        ("https://pypi.org/simple", "https://", 0),
        ("see http://a@b and more", "http://", 4),
        ("git+ssh://git@github.com/o/r.git", "git+ssh://", 0),
        ("x.y-z+w9://host", "x.y-z+w9://", 0),
        ("1abc://u:p@h", "1abc://", 0),  # leading digits are kept in group 1
        ("+.-a://h", "+.-a://", 0),  # and leading signs
        ("_https://tok@h", "https://", 1),  # an underscore is not a scheme character
        ("'https://t@h'", "https://", 1),
        ("url=HTTPS://h", "HTTPS://", 4),
        ("ftp:/not, then s3://bucket", "s3://", 15),
    ],
)
def test_scheme_finds_the_whole_run_and_its_scheme(text: str, found: str, start: int) -> None:
    match = re.search(SCHEME, text)
    assert match is not None
    assert (match.group(1), match.start(), match.end()) == (found, start, start + len(found))


@pytest.mark.parametrize(
    "text",
    [
        "no url here",
        "123://digits only",
        "://no scheme",
        "https:/one slash",
        "https//no colon",
        "https :// spaced",
        "a_b",
    ],
)
def test_scheme_needs_a_letter_then_colon_slash_slash(text: str) -> None:
    assert re.search(SCHEME, text) is None


def test_scheme_is_tried_only_where_a_run_starts() -> None:
    # Searching from inside a run finds nothing in it: the look-behind sees the run's earlier characters.
    pattern = re.compile(SCHEME)
    assert pattern.search("ab://h", 1) is None
    assert pattern.search("Ab://h", 1) is None
    assert pattern.search("9ab://h", 1) is None
    assert pattern.search("+ab://h", 1) is None
    assert pattern.search(".ab://h", 1) is None
    assert pattern.search("-ab://h", 1) is None
    assert pattern.search(" ab://h", 1).span(1) == (1, 6)  # type: ignore[union-attr]
    assert re.compile(SCHEME_START + "b").search("ab") is None
    assert re.compile(SCHEME_START + "b").search("_b").span() == (1, 2)  # type: ignore[union-attr]
    assert re.compile(SCHEME_START + "b").search("b").span() == (0, 1)  # type: ignore[union-attr]


def test_every_url_of_a_text_is_found() -> None:
    text = "a http://x, b ftp://y; c=git+https://u@z/r (svn+ssh://w)"
    assert re.findall(SCHEME, text) == ["http://", "ftp://", "git+https://", "svn+ssh://"]


def test_scheme_body_has_no_group_and_scheme_has_one() -> None:
    assert re.compile(SCHEME_BODY).groups == 0
    assert re.compile(SCHEME).groups == 1
    assert re.fullmatch(SCHEME_BODY, "12+.-git+ssh.x-y://") is not None
    assert re.fullmatch(SCHEME_BODY, "12://") is None
    assert re.fullmatch(SCHEME_BODY, "a_b://") is None
    assert re.fullmatch(SCHEME_BODY, "a:/") is None


def test_substitution_keeps_the_run_as_written() -> None:
    # As the redactors use it: group 1 is put back, so leading digits or signs stay in the text.
    assert re.sub(SCHEME + r"[^/@\s]+@", r"\1<credentials>@", "9x+y://tok@h and _a://u:p@h/x") == (
        "9x+y://<credentials>@h and _a://<credentials>@h/x"
    )


# -- redact_argv (issue 27): a server's command line is printed and written into bench reports

from envforge.cli import output  # noqa: E402
from envforge.core.urls import REDACTED, redact_argv, secret_arg_name  # noqa: E402


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["--api-key", "SECRETargkey"], ["--api-key", REDACTED]),
        (["--api-key=SECRETargkey"], ["--api-key=<redacted>"]),
        (
            ["--hf-token", "hf_x", "--token=t", "--admin-api-key", "a", "--openai-api-key=o"],
            ["--hf-token", REDACTED, "--token=<redacted>", "--admin-api-key", REDACTED, "--openai-api-key=<redacted>"],
        ),
        (
            ["--password", "p", "--secret", "s", "--access-key", "k", "--credentials", "c"],
            ["--password", REDACTED, "--secret", REDACTED, "--access-key", REDACTED, "--credentials", REDACTED],
        ),
        (
            ["HF_TOKEN=hf_x", "AWS_SECRET_ACCESS_KEY=k", "NCCL_DEBUG=INFO"],
            ["HF_TOKEN=<redacted>", "AWS_SECRET_ACCESS_KEY=<redacted>", "NCCL_DEBUG=INFO"],
        ),
        # a flag followed by another option has no value to hide
        (["--api-key", "--port", "8000"], ["--api-key", "--port", "8000"]),
        # not credentials: token counts, a tokenizer, where a token lives
        (
            ["--max-tokens", "8", "--tokenizer", "t", "--token-file", "/run/tok", "--num-speculative-tokens", "3"],
            ["--max-tokens", "8", "--tokenizer", "t", "--token-file", "/run/tok", "--num-speculative-tokens", "3"],
        ),
        # URL userinfo anywhere, by the same redaction as every printed line
        (
            ["--url", "http://u:SECRET@127.0.0.1:1/x", "--x=https://TOK@h/"],
            ["--url", "http://<credentials>@127.0.0.1:1/x", "--x=https://<credentials>@h/"],
        ),
        (
            ["python", "-m", "sglang.launch_server", "--model", "m"],
            ["python", "-m", "sglang.launch_server", "--model", "m"],
        ),
    ],
)
def test_redact_argv_hides_credential_values_and_userinfo(argv: list[str], shown: list[str]) -> None:
    assert redact_argv(argv) == tuple(shown)


def test_secret_arg_names() -> None:
    assert [
        secret_arg_name(n)
        for n in (
            "--api-key",
            "--apikey",
            "-token",
            "--x-secret-y",
            "--private-key",
            "--tokens",
            "--ssl-keyfile",
            "--key",
            "--api-key-path",
            "",
            "--",
        )
    ] == [True, True, True, True, True, False, False, False, False, False, False]


def test_redact_is_the_one_redaction_the_cli_prints_through() -> None:
    assert output.redact is redact
    assert redact("git+ssh://git@h and https://u:p@h") == "git+ssh://git@h and https://<credentials>@h"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # uv's path join of a --find-links URL (field case N37): one slash after the scheme
        (
            "Failed to read `--find-links` directory: /p/http:/u:SECRET@127.0.0.1:18603/files",
            "Failed to read `--find-links` directory: /p/http:/<credentials>@127.0.0.1:18603/files",
        ),
        ("/p/https:/TOKEN@host/x", "/p/https:/<credentials>@host/x"),
        ("https://u:SECRET@h/simple", "https://<credentials>@h/simple"),
        ("https://TOKEN@h/simple", "https://<credentials>@h/simple"),
        ("git+ssh://git@github.com/o/r.git", "git+ssh://git@github.com/o/r.git"),
        ("mail a@b.c; http:/no-at/x", "mail a@b.c; http:/no-at/x"),
    ],
)
def test_redact_credentials_catches_the_joined_single_slash_form(text: str, shown: str) -> None:
    assert redact_credentials(text) == shown


def test_every_redactor_is_the_one_redaction() -> None:
    text = "x /p/http:/u:SECRET@h/f and https://a:b@h"
    assert (
        redact(text)
        == redact_userinfo(text)
        == redact_credentials(text)
        == ("x /p/http:/<credentials>@h/f and https://<credentials>@h")
    )
    assert "SECRET" not in mask_userinfo(text)


def test_a_tool_error_never_holds_a_password() -> None:
    err = ExternalToolError(
        "uv failed at http:/u:SECRET@h",
        tool="uv",
        argv=["uv", "--find-links", "p/http:/u:SECRET@h"],
        returncode=2,
        stderr_tail="error: Failed to read /p/http:/u:SECRET@h/files",
    )
    assert "SECRET" not in str(err) + " ".join(err.argv)
    assert err.argv == ("uv", "--find-links", "p/http:/<credentials>@h")
