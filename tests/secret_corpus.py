"""The project's secret corpus: the samples every format rule carries
(:mod:`otelhooks.builtin.secret_rules`: one or more true positives in the documented format, and
look-alikes that must be left alone), credentials without a format under the names they are
stored under, and ordinary strings that must come out unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from otelhooks.builtin.secret_rules import PATTERNS, fill, negatives_of, samples_of


@dataclass(frozen=True)
class Case:
    kind: str
    positive: str  # as it appears in tool output
    secret: str  # the part that must not survive (default: the whole positive)
    negative: str  # a look-alike that must be left alone


def _rule_cases() -> list[Case]:
    cases = []
    for pattern in PATTERNS:
        negatives = [n.text for n in negatives_of(pattern)] or [""]
        for i, found in enumerate(samples_of(pattern)):
            negative = negatives[i % len(negatives)]
            cases.append(Case(pattern.kind, found.text, found.secret, negative))
    return cases


TOKEN_CASES: list[Case] = _rule_cases()


# Credentials without a format, found by the name they are stored under, in the syntaxes
# tool output carries them in. (key, value, syntax)
KEY_CASES: list[tuple[str, str, str]] = [
    ("DATADOG_API_KEY", fill("{h32}", "dd"), "env"),
    ("DD_APP_KEY", fill("{h40}", "ddapp"), "export"),
    ("COHERE_API_KEY", fill("{a40}", "co"), "env"),
    ("MISTRAL_API_KEY", fill("{a32}", "mi"), "dotenv"),
    ("TWILIO_AUTH_TOKEN", fill("{h32}", "tw"), "env"),
    ("POSTMARK_SERVER_TOKEN", fill("{u}", "pm"), "yaml"),
    ("CLOUDFLARE_API_TOKEN", fill("{s40}", "cf"), "env"),
    ("VERCEL_TOKEN", fill("{a24}", "vc"), "env"),
    ("HEROKU_API_KEY", fill("{u}", "hk"), "env"),
    ("ALGOLIA_ADMIN_KEY", fill("{h32}", "al"), "env"),
    ("MAILGUN_WEBHOOK_SIGNING_KEY", fill("{h32}-{h8}-{h8}", "mg"), "env"),
    ("SNYK_TOKEN", fill("{u}", "sn"), "env"),
    ("DB_PASSWORD", "Tr0ub4dor&3", "env"),
    ("PGPASSWORD", "correct horse battery staple", "dotenv-quoted"),
    ("MYSQL_ROOT_PASSWORD", fill("{a16}", "my"), "compose"),
    ("SERVICE_SECRET", fill("{a24}", "ss"), "env"),
    ("secret_key_base", fill("{h128}", "rails"), "yaml"),
    ("SECRET_KEY", fill("{s50}", "django"), "python"),
    ("private_key_id", fill("{h40}", "gcp"), "json"),
    ("client_secret", fill("{s32}", "oauth"), "json"),
    ("passphrase", "my long pass-phrase 2024!", "json"),
    ("signing_key", fill("{b44}", "sign"), "yaml"),
    ("access_key", fill("{b40}", "acc"), "ini"),
    ("encryption_key", fill("{b44}", "enc"), "toml"),
    ("api_key", fill("{a32}", "query"), "query"),
    ("x-api-key", fill("{a40}", "hdr"), "header"),
    ("X-Auth-Token", fill("{a40}", "xauth"), "header"),
    ("apiKey", fill("{a32}", "js"), "js"),
    ("authToken", fill("{a40}", "go"), "go"),
    ("dbPassword", fill("{a16}", "java"), "java"),
    ("password", fill("{a12}", "xml"), "xml"),
    ("password", fill("{a12}", "cli"), "cli"),
    ("session_id", fill("{h32}", "sess"), "log"),
    ("refresh_token", fill("{s64}", "rt"), "log"),
    ("SENTRY_DSN", "https://" + fill("{h32}", "dsn") + "@o1.ingest.sentry.io/1", "env"),
]


def render(key: str, value: str, syntax: str) -> str:
    """``key`` and ``value`` written the way ``syntax`` writes them."""
    return {
        "env": f"{key}={value}",
        "export": f"export {key}={value}",
        "dotenv": f'{key}="{value}"',
        "dotenv-quoted": f"{key}='{value}'",
        "compose": f"    environment:\n      - {key}={value}\n",
        "yaml": f"settings:\n  {key}: {value}\n",
        "python": f'{key} = "{value}"',
        "json": f'{{"type": "service_account", "{key}": "{value}", "project_id": "demo"}}',
        "ini": f"[default]\n{key} = {value}\n",
        "toml": f'[app]\n{key} = "{value}"\n',
        "query": f"GET /v1/items?{key}={value}&page=2 HTTP/1.1",
        "header": f"{key}: {value}\r\nAccept: */*",
        "js": f'const config = {{ {key}: "{value}", retries: 3 }};',
        "go": f'{key} := "{value}"',
        "java": f'private static final String {key} = "{value}";',
        "xml": f"<config><{key}>{value}</{key}></config>",
        "cli": f"mysql --user=root --{key} {value} --host db",
        "log": f"2026-12-02T10:00:00Z INFO login ok user=ada {key}={value} ip=10.0.0.7",
    }[syntax]


# Ordinary strings that must come out unchanged.
ORDINARY: list[str] = [
    "commit 3f2a9c1d7e8b4a6c5d0e1f2a3b4c5d6e7f8a9b0c",
    "Merge pull request #4521 from acme/fix-token-refresh",
    "request_id=123e4567-e89b-12d3-a456-426614174000 status=200 duration_ms=41",
    "integrity sha512-3Qv9Kp2Yx8yWbQ1mJ0nS5p6Zx4rT7uV2wA9bC3dE6fG1hI4jK7lM0nO3pQ6rS9tU2vW5xY8zA==",
    "h1:s8pnnxNVzjWyrvYdFUQq5llS1PX2zhPXmccZv99h7uQ=",
    'resolved "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz#679591c564c3bffaae8454cf0b3df370c3d6911c"',
    "version: 2.12.0-rc.1+build.5114",
    "https://docs.python.org/3/library/secrets.html#secrets.token_hex",
    "https://github.com/acme/api/blob/main/src/auth/token.py#L42",
    "def get_token(self, scope: str) -> str:",
    "    token = self._cache.get(scope) or self._refresh(scope)",
    "secret_key = settings.SECRET_KEY",
    "api_key = os.environ['OPENAI_API_KEY']",
    'password = getpass.getpass("Password: ")',
    "if not password_hash or len(password) < 12:",
    "max_tokens=4096, temperature=0.2, top_p=1",
    '"usage": {"input_tokens": 1234, "output_tokens": 567, "total_tokens": 1801}',
    "Please enter your password to continue.",
    "The API key is passed in the X-Api-Key header; never log it.",
    "Tokens are counted per request; see the pricing page.",
    "Basic principles of distributed systems",
    "The bearer of this letter is a trusted friend.",
    "Authorization failed: invalid credentials",
    "sessions=42 active_sessions=3",
    "PWD=/home/ada/projects/otelhooks",
    "timestamp_ms=1733150000123 seq=4111111111",
    "phone +1 202 456 1111, fax 202-456-1112",
    "uuid 6fa459ea-ee8a-3ca4-894e-db77e160355e",
    "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    "docker pull ghcr.io/acme/app@sha256:9b2e3f1c4d5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c",  # noqa: E501
    "key_id: 7f3c2a1b-0d4e-4f5a-8b6c-9d0e1f2a3b4c",
    '"sort_key": "user#42#2026-12-02"',
    "task-force meeting at 10:00; ask the desk",
    "The quick brown fox jumps over the lazy dog.",
    "SELECT id, name FROM users WHERE api_key_id = $1",
    "export PATH=/usr/local/bin:$PATH",
    "kind: ConfigMap\ndata:\n  log_level: debug\n",
    "token_type=bearer expires_in=3600",
    "auth_method: oauth2",
    "cache_key: user:42:profile",
    "aws_region = us-east-1",
    "Visit https://example.com/login?next=/dashboard",
]


def require_corpus(variable: str, ready: Callable[[Path], bool], script: str) -> Path:
    """The corpus an install script built (named by ``variable``), or a skip saying how to
    build it: a failure with ``OTELHOOKS_REQUIRE_SECRET_CORPUS=1``, as in CI."""
    given = os.environ.get(variable)
    if given and ready(Path(given)):
        return Path(given)
    reason = f"no secret corpus at ${variable} (run scripts/{script}, set {variable})"
    if os.environ.get("OTELHOOKS_REQUIRE_SECRET_CORPUS") == "1":
        pytest.fail(reason + " (OTELHOOKS_REQUIRE_SECRET_CORPUS=1)")
    pytest.skip(reason)
