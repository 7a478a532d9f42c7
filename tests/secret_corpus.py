"""The project's secret corpus, built from the services' documented token formats the way secret
scanners test their rules: per rule one true positive (a fake secret in the documented format,
in a realistic context) and one look-alike that must be left alone.

``{a36}`` stands for 36 letters and digits, ``{h32}`` 32 lower-case hex digits, ``{H24}`` 24
upper-case letters and digits, ``{l40}`` lower-case letters and digits, ``{d10}`` digits,
``{s43}`` URL-safe base64 (letters, digits, ``_``, ``-``), ``{b40}`` base64 (``+``, ``/``),
``{u}`` a UUID. Each placeholder is filled deterministically, so a failure is reproducible.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass

_ALPHABETS = {
    "a": string.ascii_letters + string.digits,
    "h": "0123456789abcdef",
    "H": string.ascii_uppercase + string.digits,
    "l": string.ascii_lowercase + string.digits,
    "d": string.digits,
    "s": string.ascii_letters + string.digits + "_-",
    "b": string.ascii_letters + string.digits + "+/",
    "z": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
}
_FIELD = re.compile(r"\{([ahHldsbz])(\d+)\}|\{u\}")


def fill(template: str, seed: str) -> str:
    """``template`` with its placeholders replaced by seeded random characters."""
    rng = random.Random(seed)

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "{u}":
            h = "".join(rng.choice(_ALPHABETS["h"]) for _ in range(32))
            return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        alphabet, count = _ALPHABETS[match.group(1)], int(match.group(2))
        # letters and digits both present, as in a generated token
        while True:
            text = "".join(rng.choice(alphabet) for _ in range(count))
            if (
                count < 8
                or alphabet in (_ALPHABETS["d"], _ALPHABETS["h"])
                or (any(c.isdigit() for c in text) and any(c.isalpha() for c in text))
            ):
                return text

    return _FIELD.sub(one, template)


@dataclass(frozen=True)
class Case:
    kind: str
    positive: str  # as it appears in tool output
    secret: str  # the part that must not survive (default: the whole positive)
    negative: str  # a look-alike that must be left alone


def case(kind: str, positive: str, negative: str, secret: str | None = None) -> Case:
    text = fill(positive, kind)
    return Case(kind, text, fill(secret, kind) if secret else text, fill(negative, kind + "-"))


_PEM_BODY = "MIIEowIBAAKCAQEA{b64}\n{b64}\n{b40}"

TOKEN_CASES: list[Case] = [
    Case(
        "private_key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{fill(_PEM_BODY, 'pem')}\n-----END RSA PRIVATE KEY-----",
        fill(_PEM_BODY, "pem"),
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",  # noqa: E501
    ),
    case(
        "putty_private_key",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n{b44}\n"
        "Private-MAC: {h64}",
        "PuTTY is a free SSH client: putty.exe -ssh host",
        secret="{b44}",
    ),
    case("age_secret_key", "AGE-SECRET-KEY-1{z58}", "age1{z58}"),
    case(
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ7{s20}In0.{s43}",
        "eyJhbGciOiJIUzI1NiJ9 is a base64 header only",
        secret="{s43}",
    ),
    case("aws_access_key_id", "AKIA{H16}", "AKIA is the prefix of AWS access key ids"),
    case(
        "aws_secret_access_key",
        "aws_secret_access_key = {b40}",
        "aws_region = eu-west-1",
        secret="{b40}",
    ),
    case("aws_session_token", "IQoJb3JpZ2luX2VjE{b140}", "IQoJb3Jp is short"),
    case("google_api_key", "AIza{s35}", "AIzaSy is how Google API keys begin"),
    case("gcp_oauth_client_secret", "GOCSPX-{s28}", "GOCSPX-short"),
    case("google_oauth_access_token", "ya29.{s60}", "ya29 is a prefix"),
    case("google_oauth_refresh_token", "1//0{s60}", "1//0 at the start"),
    case("azure_ad_client_secret", "{a3}8Q~{s34}", "Q~ alone"),
    case(
        "azure_storage_key",
        "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={b86}==;"
        "EndpointSuffix=core.windows.net",
        "DefaultEndpointsProtocol=https;AccountName=demo;EndpointSuffix=core.windows.net",
        secret="{b86}==",
    ),
    case(
        "azure_sas_signature",
        "https://demo.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&sig={b43}%3D",
        "https://demo.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r",
        secret="{b43}",
    ),
    case("azure_devops_pat", "{a52}AZDO{a28}", "AZDO pipelines"),
    case("alibaba_access_key_id", "LTAI{a20}", "LTAI alone"),
    case("digitalocean_token", "dop_v1_{h64}", "dop_v1_short"),
    case("digitalocean_oauth_token", "doo_v1_{h64}", "doo_v1_short"),
    case("digitalocean_refresh_token", "dor_v1_{h64}", "dor_v1_short"),
    case("heroku_api_key", "HRKU-{s60}", "HRKU-1"),
    case("flyio_token", "fo1_{s43}", "fo1_short"),
    case("netlify_token", "nfp_{a36}", "nfp_short"),
    case("otelhooks_token", "ohk_{s43}", "ohk_ is the prefix of gateway tokens"),
    case("cloudflare_origin_ca_key", "v1.0-{h24}-{h146}", "v1.0-beta release notes"),
    case("tailscale_key", "tskey-auth-{a10}CNTRL-{a30}", "tskey-auth is the prefix"),
    case("vault_token", "hvs.{s90}", "hvs.short"),
    case("terraform_cloud_token", "{a14}.atlasv1.{s67}", "app.atlasv1.short"),
    case("pulumi_token", "pul-{h40}", "pul-request"),
    case("aws_bedrock_api_key", "ABSKQmVkcm9ja0FQSUtleS{b120}", "ABSK is a prefix"),
    case("doppler_token", "dp.pt.{a43}", "dp.pt.short"),
    case("databricks_token", "dapi{h32}", "dapi is the prefix"),
    case("supabase_token", "sbp_{h40}", "sbp_short"),
    case("render_api_key", "rnd_{a32}", "rnd_short"),
    case("openshift_token", "sha256~{s43}", "sha256:{h64}"),
    case("planetscale_token", "pscale_tkn_{s43}", "pscale_tkn_short"),
    case("prefect_api_key", "pnu_{a36}", "pnu_short"),
    case("scalingo_token", "tk-us-{s48}", "tk-us-short"),
    case("yandex_token", "AQVN{s36}", "AQVN short"),
    case("infracost_api_key", "ico-{a32}", "ico-short"),
    case("fastly_api_token", "fastly_{s32}", "fastly_cdn"),
    case("defined_networking_token", "dnkey-{l26}-{l52}", "dnkey-short"),
    case("github_token", "ghp_{a36}", "ghp_short"),
    case("github_token", "github_pat_{a22}_{a59}", "github_pat_short"),
    case("github_token", "ghs_{a36}", "ghs_1"),
    case("gitlab_token", "glpat-{s20}", "glpat-short"),
    case("gitlab_token", "gldt-{s20}", "gldt-x"),
    case("gitlab_runner_registration_token", "GR1348941{s20}", "GR1348941"),
    case("atlassian_token", "ATATT3xFfGF0{s180}", "ATATT3 short"),
    case("atlassian_token", "ATBB{a32}", "ATBB"),
    case("circleci_token", "CCIPAT_{a22}_{h40}", "CCIPAT_short"),
    case("buildkite_token", "bkua_{h40}", "bkua_short"),
    case("harness_token", "pat.{s22}.{h24}.{a20}", "pat.short.x"),
    case("octopus_deploy_key", "API-{H26}", "API-KEY"),
    case("postman_api_key", "PMAK-{h24}-{h34}", "PMAK-short"),
    case("sonar_token", "squ_{h40}", "squ_short"),
    case("sourcegraph_token", "sgp_{h16}_{h40}", "sgp_short"),
    case("drone_ci_token", "drone_token: {a32}", "drone_version: 2", secret="{a32}"),
    case("npm_token", "npm_{a36}", "npm_install"),
    case("pypi_token", "pypi-AgEIcHlwaS5vcmc{s70}", "pypi-AgE short"),
    case("rubygems_api_key", "rubygems_{h48}", "rubygems_org"),
    case("postman_api_key", "PMAK-{h24}-{h34}", "PMAK-short"),
    case("docker_hub_token", "dckr_pat_{s27}", "dckr_pat_x"),
    case("nuget_api_key", "oy2{l43}", "oy2 short"),
    case("clojars_token", "CLOJARS_{l60}", "CLOJARS_x"),
    case("artifactory_token", "AKCp{a69}", "AKCp short"),
    case("readme_api_key", "rdme_{l70}", "rdme_x"),
    case("grafana_token", "glc_{a40}==", "glc_short"),
    case("grafana_token", "glsa_{a32}_{h8}", "glsa_x"),
    case("new_relic_key", "NRAK-{H27}", "NRAK-X"),
    case("new_relic_key", "{h36}NRAL", "NRAL alone"),
    case("sentry_token", "sntrys_{s80}", "sntrys_x"),
    case(
        "sentry_dsn_key",
        "https://{h32}@o123456.ingest.sentry.io/4504",
        "https://o123456.ingest.sentry.io/4504",
        secret="{h32}",
    ),
    case("honeycomb_key", "hcaik_{l58}", "hcaik_x"),
    case("dynatrace_token", "dt0c01.{H24}.{H64}", "dt0c01.short"),
    case("mapbox_token", "sk.eyJ1{s60}.{s22}", "sk.eyJ1 short"),
    case("langsmith_key", "lsv2_pt_{h32}_{h10}", "lsv2_pt_short"),
    case("slack_token", "xoxb-{d12}-{d12}-{a24}", "xoxb is a bot token prefix"),
    case("slack_token", "xapp-1-A{H10}-{d13}-{h64}", "xapp-1"),
    case(
        "slack_webhook",
        "https://hooks.slack.com/services/T{H8}/B{H8}/{a24}",
        "https://slack.com/help/articles/115005265063",
    ),
    case(
        "discord_webhook",
        "https://discord.com/api/webhooks/{d18}/{s68}",
        "https://discord.com/developers/docs",
    ),
    case(
        "telegram_bot_token",
        "https://api.telegram.org/bot{d10}:AA{s33}/getMe",
        "12:30 AA meeting",
        secret="{d10}:AA{s33}",
    ),
    case(
        "teams_webhook",
        "https://contoso.webhook.office.com/webhookb2/{u}@{u}/IncomingWebhook/{h32}/{u}",
        "https://contoso.sharepoint.com/sites/team",
    ),
    case("mattermost_token", "mattermost_token = {l26}", "mattermost_url = chat", secret="{l26}"),
    case("stripe_key", "sk_live_{a24}", "sk_live_x"),
    case("stripe_key", "rk_test_{a24}", "rk_test"),
    case("stripe_webhook_secret", "whsec_{a32}", "whsec_x"),
    case("square_token", "EAAA{s60}", "EAAA short"),
    case("square_token", "sq0csp-{s43}", "sq0csp-x"),
    case(
        "braintree_token",
        "access_token$production${l16}${h32}",
        "access_token$production",
    ),
    case("shopify_token", "shpat_{h32}", "shpat_x"),
    case("plaid_token", "access-sandbox-{u}", "access-sandbox-guide"),
    case("razorpay_key", "rzp_live_{a14}", "rzp_live"),
    case("flutterwave_key", "FLWSECK-{h32}-X", "FLWSECK-x"),
    case("shippo_token", "shippo_live_{h40}", "shippo_live_x"),
    case("easypost_key", "EZAK{a54}", "EZAK short"),
    case("duffel_token", "duffel_test_{s43}", "duffel_test_x"),
    case(
        "coinbase_key",
        "organizations/{u}/apiKeys/{u}",
        "organizations/acme/projects/web",
    ),
    case("sendgrid_key", "SG.{s22}.{s43}", "SG.short"),
    case("mailgun_key", "key-{h32}", "key-value store"),
    case("mailchimp_key", "{h32}-us21", "us21 region"),
    case("twilio_key", "SK{h32}", "SKU 12345"),
    case("brevo_key", "xkeysib-{h64}-{a16}", "xkeysib-x"),
    case("mandrill_key", "md-{s22}", "md-file"),
    case("resend_key", "re_{a8}_{a24}", "re_compile"),
    case(
        "postmark_token",
        "X-Postmark-Server-Token: {u}",
        "X-Postmark-Server-Token: (missing)",
        secret="{u}",
    ),
    case("anthropic_api_key", "sk-ant-api03-{s93}AA", "sk-ant is the prefix"),
    case("openai_api_key", "sk-proj-{s74}", "sk-proj"),
    case("openai_api_key", "sk-{a20}T3BlbkFJ{a20}", "task-force"),
    case("openai_api_key", "sk-or-v1-{h64}", "sk-or"),
    case("huggingface_token", "hf_{a34}", "hf_hub"),
    case("groq_api_key", "gsk_{a52}", "gsk_x"),
    case("replicate_token", "r8_{a37}", "r8_x"),
    case("perplexity_api_key", "pplx-{a48}", "pplx-x"),
    case("xai_api_key", "xai-{a80}", "xai-x"),
    case("fireworks_api_key", "fw_{a24}", "fw_update"),
    case("pinecone_api_key", "pcsk_{a60}", "pcsk_x"),
    case("cerebras_api_key", "csk-{l48}", "csk-x"),
    case("elevenlabs_api_key", "sk_{h48}", "sk_x"),
    case("linear_api_key", "lin_api_{a40}", "lin_api_x"),
    case("airtable_token", "pat{a14}.{h64}", "pattern.example"),
    case("notion_token", "ntn_{a46}", "ntn_x"),
    case("figma_token", "figd_{s40}", "figd_x"),
    case("dropbox_token", "sl.{s140}", "sl.short"),
    case("contentful_token", "CFPAT-{s43}", "CFPAT-x"),
    case("typeform_token", "tfp_{s44}", "tfp_x"),
    case("frameio_token", "fio-u-{s64}", "fio-u-x"),
    case("hubspot_token", "pat-na1-{u}", "pat-na1-x"),
    case("lob_key", "live_{h35}", "live_stream"),
    case("adafruit_key", "aio_{a28}", "aio_x"),
    case("twitter_bearer_token", "AAAAAAAAAAAAAAAAAAAAA{a40}", "AAAA battery"),
    case("facebook_token", "EAA{a120}", "EAA short"),
    case("firebase_fcm_key", "AAAA{s7}:{s140}", "AAAA:short"),
    case("onepassword_service_token", "ops_eyJ{s150}", "ops_x"),
    case("okta_token", "okta_api_token: 00{s40}", "okta_org: acme", secret="00{s40}"),
    case(
        "authress_key",
        "sc_{l10}.{l5}.acc_{l20}.{s60}",
        "sc_x.short",
    ),
    case(
        "connection_string_password",
        "postgres://app:{a16}@db.internal:5432/prod",
        "postgres://db.internal:5432/prod",
        secret="{a16}",
    ),
    case(
        "connection_string_password",
        "mongodb+srv://admin:{a20}@cluster0.example.mongodb.net/test",
        "mongodb+srv://cluster0.example.mongodb.net/test",
        secret="{a20}",
    ),
    case(
        "connection_string_password",
        "redis://:{a24}@cache:6379/0",
        "redis://cache:6379/0",
        secret="{a24}",
    ),
    case(
        "authorization_header",
        "Authorization: token {a40}",
        "Authorization: required",
        secret="{a40}",
    ),
    case(
        "basic_auth",
        "Basic dXNlcjpQNHNzdzByZCEx",
        "Basic understanding",
        secret="dXNlcjpQNHNzdzByZCEx",
    ),
    case("bearer_token", "Bearer {s40}", "bearer of bad news", secret="{s40}"),
    case(
        "cookie_header",
        "Cookie: sessionid={a32}; csrftoken={a32}",
        "Cookies help us deliver our services.",
        secret="{a32}",
    ),
    case(
        "curl_user",
        "curl -u admin:{a16} https://api.example.com",
        "curl -u admin https://x",
        secret="{a16}",
    ),
    case(
        "ldap_bind_password",
        "ldapsearch -x -D cn=admin,dc=example,dc=org -w {a16} -H ldap://ldap.internal",
        "ldapsearch -x -W -H ldap://ldap.internal",
        secret="{a16}",
    ),
    case(
        "netrc_password",
        "machine api.example.com login bot password {a20}",
        "machine learning login page",
        secret="{a20}",
    ),
    case(
        "credit_card",
        "card 4111 1111 1111 1111 on file",
        "order 4111 1111 1111 1112",
        secret="4111 1111 1111 1111",
    ),
    case("credit_card", "amex 378282246310005", "id 378282246310006", secret="378282246310005"),
]


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
