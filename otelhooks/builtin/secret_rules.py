"""The secret formats the redactor knows, as services document them.

Each :class:`SecretPattern` finds one kind of token wherever it appears (under any key, in any
text). ``keywords`` are literal parts every match contains (matched against the lower-cased
text); the redactor runs a pattern only where one of its keywords occurs, so a clean text costs
one scan whatever the number of rules. Credentials without a recognisable format (a password, a
Datadog or Cohere key) are found by the key they are stored under instead: see
:mod:`otelhooks.builtin.secret_keys`.

The project's corpus (``tests/secret_corpus.py``) holds one true positive and one look-alike
negative per rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """A secret format. ``keywords``: at least one must occur in the lower-cased text for the
    regex to run. ``group``: the part of the match that is replaced (0 = all). ``check``: a
    final test of the matched text (a Luhn check, say). ``prefilter``: for a pattern without
    keywords, a cheap regex that must find something first."""

    kind: str
    regex: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    group: int = 0
    check: Callable[[str], bool] | None = None
    prefilter: re.Pattern[str] | None = None
    not_after: re.Pattern[str] | None = None  # a character that may not precede the match
    in_token: bool = False  # the keywords occur inside a 16+ character token (a faster gate)
    at_start: bool = False  # ... where a token segment starts (not after a letter or digit)


def luhn_valid(text: str) -> bool:
    """Whether the digits of ``text`` pass the Luhn check (13 to 19 digits)."""
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _has_digit_or_upper(text: str) -> bool:
    return any(c.isdigit() or c.isupper() for c in text)


# The end of a token: not followed by another token character.
_END = r"(?![A-Za-z0-9_\-])"
_B64 = r"A-Za-z0-9+/"


# A leading "not after a token character" lookbehind would cost a regex its fast literal-prefix
# search; it is taken off the regex and checked on the one character before a match instead.
_LEADING = re.compile(r"^(\(\?i\))?\(\?<!(\[[^\]]*\])\)")


def _p(
    kind: str,
    regex: str,
    *keywords: str,
    group: int = 0,
    context: bool = False,
    inner: bool = False,
) -> SecretPattern:
    """A pattern. ``context``: its keywords are ordinary words (``authorization``, ``machine``)
    found anywhere in the text, not part of a long token. A pattern that starts with "not after
    a token character" has its keywords at the start of a token segment, unless ``inner`` (the
    keyword is further in: ``_live_`` of ``sk_live_...``)."""
    not_after = None
    match = _LEADING.match(regex)
    if match is not None:
        not_after = re.compile(match.group(2))
        regex = (match.group(1) or "") + regex[match.end() :]
    return SecretPattern(
        kind,
        re.compile(regex),
        tuple(k.lower() for k in keywords),
        group,
        not_after=not_after,
        in_token=not context,
        at_start=not_after is not None and not inner and not context,
    )


def _prefixed(kind: str, prefix: str, body: str, *keywords: str) -> SecretPattern:
    """A token that starts with a literal ``prefix`` (which is its keyword) and has ``body``."""
    return _p(kind, rf"(?<![A-Za-z0-9_]){re.escape(prefix)}{body}{_END}", *(keywords or (prefix,)))


PATTERNS: tuple[SecretPattern, ...] = (
    # -- keys and certificates --------------------------------------------------------------
    _p(
        "private_key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        "private key",
        context=True,
    ),
    _p(
        "putty_private_key",
        r"PuTTY-User-Key-File-\d:[\s\S]*?(?:Private-MAC:\s*[0-9a-f]+|\Z)",
        "putty-user-key-file",
    ),
    _prefixed("age_secret_key", "AGE-SECRET-KEY-1", r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    # -- JWTs (signed and unsigned) -----------------------------------------------------------
    _p(
        "jwt",
        r"(?<![A-Za-z0-9_-])(?:eyJ|ewog|ew0K)[A-Za-z0-9_-]{5,}={0,2}\.(?:eyJ|ewog|ew0K)"
        r"[A-Za-z0-9_-]{5,}={0,2}\.[A-Za-z0-9_-]*={0,2}",
        "eyj",
        "ewog",
        "ew0k",
    ),
    # -- cloud --------------------------------------------------------------------------------
    _p(
        "aws_access_key_id",
        r"(?<![A-Z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)"
        r"[A-Z0-9]{16}(?![A-Z0-9])",
        "akia",
        "asia",
        "abia",
        "acca",
        "agpa",
        "aida",
        "aroa",
        "aipa",
        "anpa",
        "anva",
        "apka",
        "a3t",
    ),
    _p(
        "aws_secret_access_key",
        rf"(?i)aws.{{0,24}}?(?:secret|key).{{0,24}}?[=:>]\s*[\"']?([{_B64}]{{40}})(?![{_B64}=])",
        "aws",
        group=1,
        context=True,
    ),
    _p(
        "aws_session_token",
        rf"(?<![{_B64}])(?:IQoJb3JpZ2lu|FwoGZXIvYXdz|FQoGZXIvYXdz)[{_B64}]{{100,}}={{0,2}}",
        "iqojb3jpz2lu",
        "fwogzxivyxdz",
        "fqogzxivyxdz",
    ),
    _p("google_api_key", r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}" + _END, "aiza"),
    _prefixed("gcp_oauth_client_secret", "GOCSPX-", r"[A-Za-z0-9_-]{28}"),
    _p("google_oauth_access_token", r"(?<![A-Za-z0-9_])ya29\.[0-9A-Za-z_-]{20,}", "ya29."),
    _p("google_oauth_refresh_token", r"(?<![A-Za-z0-9_])1//0[0-9A-Za-z_-]{40,}", "1//0"),
    _p(
        "azure_ad_client_secret",
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        "q~",
        inner=True,
    ),
    _p(
        "azure_storage_key",
        rf"(?i)(?:AccountKey|SharedAccessKey)\s*=\s*([{_B64}]{{20,}}={{0,2}})",
        "accountkey",
        "sharedaccesskey",
        group=1,
    ),
    _p("azure_sas_signature", r"(?i)[?&;]sig=([A-Za-z0-9%+/=]{30,})", "sig=", group=1),
    _p(
        "azure_devops_pat",
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{52}AZDO[A-Za-z0-9]{28}(?![A-Za-z0-9])",
        "azdo",
        inner=True,
    ),
    _prefixed("alibaba_access_key_id", "LTAI", r"[A-Za-z0-9]{12,20}"),
    _prefixed("digitalocean_token", "dop_v1_", r"[a-f0-9]{64}"),
    _prefixed("digitalocean_oauth_token", "doo_v1_", r"[a-f0-9]{64}"),
    _prefixed("digitalocean_refresh_token", "dor_v1_", r"[a-f0-9]{64}"),
    _prefixed("heroku_api_key", "HRKU-", r"[A-Za-z0-9_-]{20,}"),
    _p(
        "flyio_token",
        r"(?<![A-Za-z0-9_])(?:fo1_|fm[12][ar]?_)[A-Za-z0-9+/=_-]{40,}",
        "fo1_",
        "fm1",
        "fm2",
    ),
    _prefixed("netlify_token", "nfp_", r"[A-Za-z0-9]{36,}"),
    # otelhooks' own gateway tokens (otelhooks mcp token add): ohk_ and 43 URL-safe base64
    _prefixed("otelhooks_token", "ohk_", r"[A-Za-z0-9_-]{40,}"),
    _p(
        "cloudflare_origin_ca_key",
        r"(?<![A-Za-z0-9])v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
        "v1.0-",
    ),
    _p(
        "tailscale_key",
        r"(?<![A-Za-z0-9_])tskey-[a-z]+-[A-Za-z0-9]+-[A-Za-z0-9]{16,}" + _END,
        "tskey-",
    ),
    _p(
        "vault_token",
        r"(?<![A-Za-z0-9_])hv[sbr]\.[A-Za-z0-9_-]{24,}" + _END,
        "hvs.",
        "hvb.",
        "hvr.",
    ),
    _p(
        "terraform_cloud_token",
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}",
        ".atlasv1.",
        inner=True,
    ),
    _prefixed("pulumi_token", "pul-", r"[a-f0-9]{40}"),
    # AWS Bedrock API keys: long-term (ABSK + base64 of "BedrockAPIKey-..."), short-term
    _p(
        "aws_bedrock_api_key",
        r"(?<![A-Za-z0-9_])(?:ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{60,300}={0,2}"
        r"|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=&%._-]*)",
        "absk",
        "bedrock-api-key-",
    ),
    _p(
        "doppler_token",
        r"(?<![A-Za-z0-9_])dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}" + _END,
        "dp.pt.",
        "dp.st.",
        "dp.sa.",
        "dp.ct.",
        "dp.scim.",
        "dp.audit.",
    ),
    _prefixed("databricks_token", "dapi", r"[a-f0-9]{32}(?:-\d)?"),
    _p(
        "supabase_token",
        r"(?<![A-Za-z0-9_])(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,})",
        "sbp_",
        "sb_secret_",
    ),
    _prefixed("render_api_key", "rnd_", r"[A-Za-z0-9]{32}"),
    _p("openshift_token", r"(?<![A-Za-z0-9_])sha256~[A-Za-z0-9_-]{43}" + _END, "sha256~"),
    _p(
        "planetscale_token",
        r"(?<![A-Za-z0-9_])pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}",
        "pscale_",
    ),
    _prefixed("prefect_api_key", "pnu_", r"[A-Za-z0-9]{36}"),
    _p("scalingo_token", r"(?<![A-Za-z0-9_])tk-us-[A-Za-z0-9_-]{48}", "tk-us-"),
    _p(
        "yandex_token",
        r"(?<![A-Za-z0-9_])(?:AQVN[A-Za-z0-9_-]{35,38}|YC[A-Za-z0-9_-]{38}|t1\.[A-Z0-9a-z_-]+[=]{0,2}\.[A-Z0-9a-z_-]{86}[=]{0,2})"
        + _END,
        "aqvn",
        "yc",
        "t1.",
    ),
    _prefixed("infracost_api_key", "ico-", r"[A-Za-z0-9]{32}"),
    _prefixed("fastly_api_token", "fastly_", r"[A-Za-z0-9_-]{32}"),
    _prefixed("defined_networking_token", "dnkey-", r"[a-z0-9=_-]{26}-[a-z0-9=_-]{52}"),
    # -- version control and CI -------------------------------------------------------------
    _p(
        "github_token",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
    ),
    _p(
        "gitlab_token",
        r"(?<![A-Za-z0-9_])gl(?:pat|dt|ft|soat|rt|ptt|cbt|imt|agent|oas|ffct|wt|cst|sst)-"
        r"[A-Za-z0-9_.\-]{20,}",
        "glpat-",
        "gldt-",
        "glft-",
        "glsoat-",
        "glrt-",
        "glptt-",
        "glcbt-",
        "glimt-",
        "glagent-",
        "gloas-",
        "glffct-",
        "glwt-",
        "glcst-",
        "glsst-",
    ),
    _prefixed("gitlab_runner_registration_token", "GR1348941", r"[A-Za-z0-9_-]{20}"),
    _p(
        "atlassian_token",
        r"(?<![A-Za-z0-9_])(?:ATATT3|ATCTT3|ATBB)[A-Za-z0-9_\-=]{24,}",
        "atatt3",
        "atctt3",
        "atbb",
    ),
    _p(
        "circleci_token",
        r"(?<![A-Za-z0-9_])CCI(?:PAT|PRJ)_[A-Za-z0-9]{22}_[a-f0-9]{40}",
        "ccipat_",
        "cciprj_",
    ),
    _prefixed("buildkite_token", "bkua_", r"[a-f0-9]{40}"),
    _p(
        "harness_token",
        r"(?<![A-Za-z0-9_])pat\.[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}",
        "pat.",
    ),
    _p(
        "harness_token",
        r"(?<![A-Za-z0-9_])sat\.[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}",
        "sat.",
    ),
    _prefixed("octopus_deploy_key", "API-", r"[A-Z0-9]{26}"),
    _prefixed("postman_api_key", "PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}"),
    _p("sonar_token", r"(?<![A-Za-z0-9_])sq[uap]_[a-f0-9]{40}" + _END, "squ_", "sqa_", "sqp_"),
    _p(
        "sourcegraph_token",
        r"(?<![A-Za-z0-9_])sgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}" + _END,
        "sgp_",
    ),
    _p(
        "drone_ci_token",
        r"(?i)drone[_-]?(?:ci)?[_-]?token\W{0,5}([a-z0-9]{32})",
        "drone",
        group=1,
        context=True,
    ),
    # -- package registries -----------------------------------------------------------------
    _prefixed("npm_token", "npm_", r"[A-Za-z0-9]{36}"),
    _p("pypi_token", r"(?<![A-Za-z0-9_])pypi-AgE[A-Za-z0-9_-]{50,}", "pypi-age"),
    _prefixed("rubygems_api_key", "rubygems_", r"[a-f0-9]{48}"),
    _prefixed("postman_api_key", "PMAK-", r"[a-fA-F0-9]{24}-[a-fA-F0-9]{34}", "pmak-"),
    _p(
        "docker_hub_token",
        r"(?<![A-Za-z0-9_])dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}",
        "dckr_pat_",
        "dckr_oat_",
    ),
    _p("nuget_api_key", r"(?<![A-Za-z0-9_])oy2[a-z0-9]{43}" + _END, "oy2"),
    _prefixed("clojars_token", "CLOJARS_", r"[a-z0-9]{60}"),
    _p(
        "artifactory_token",
        r"(?<![A-Za-z0-9_])(?:AKCp[A-Za-z0-9]{69}|cmVmdGtu[A-Za-z0-9]{56})" + _END,
        "akcp",
        "cmvmdgtu",
    ),
    _prefixed("readme_api_key", "rdme_", r"[a-z0-9]{70}"),
    # -- observability ------------------------------------------------------------------------
    _p(
        "grafana_token",
        r"(?<![A-Za-z0-9_])(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}|"
        r"eyJrIjoi[A-Za-z0-9]{70,}={0,2})",
        "glc_",
        "glsa_",
        "eyjrijoi",
    ),
    _p(
        "new_relic_key",
        r"(?<![A-Za-z0-9_])(?:NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}|NRJS-[a-f0-9]{19}|"
        r"NRAA-[a-f0-9]{27})" + _END,
        "nrak-",
        "nrii-",
        "nrjs-",
        "nraa-",
    ),
    _p("new_relic_key", r"(?<![A-Za-z0-9_])[a-f0-9]{36}NRAL" + _END, "nral", inner=True),
    _p(
        "sentry_token",
        r"(?<![A-Za-z0-9_])(?:sntrys_[A-Za-z0-9+/=_]{50,}|sntryu_[a-f0-9]{64})",
        "sntrys_",
        "sntryu_",
    ),
    _p(
        "sentry_dsn_key",
        r"(?i)https?://([a-f0-9]{32})(?::[a-f0-9]{32})?@[a-z0-9.-]*sentry",
        "sentry",
        group=1,
    ),
    _p("honeycomb_key", r"(?<![A-Za-z0-9_])hc[a-z]{2,3}_[A-Za-z0-9]{20,}" + _END, "hc"),
    _p(
        "dynatrace_token",
        r"(?<![A-Za-z0-9_])dt0[a-zA-Z]\d{2}\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
        "dt0",
    ),
    _p(
        "mapbox_token",
        r"(?<![A-Za-z0-9_])[ps]k\.eyJ1[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}",
        "pk.eyj1",
        "sk.eyj1",
    ),
    _p("langsmith_key", r"(?<![A-Za-z0-9_])lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}", "lsv2_"),
    _p(
        "slack_token",
        r"(?<![A-Za-z0-9_])(?:xox[abposer]-[0-9A-Za-z-]{10,}|xoxe\.xox[bp]-[0-9A-Za-z-]{10,}|"
        r"xoxe-\d-[A-Za-z0-9]{100,}|xapp-\d-[A-Za-z0-9]+-\d+-[a-f0-9]+)",
        "xox",
        "xapp-",
    ),
    _p(
        "slack_webhook",
        r"(?i)https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]+",
        "hooks.slack.com",
    ),
    _p(
        "discord_webhook",
        r"(?i)https?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]+",
        "discord",
    ),
    _p("telegram_bot_token", r"(?<![0-9])\d{8,10}:AA[A-Za-z0-9_-]{33}" + _END, ":aa", inner=True),
    _p(
        "teams_webhook",
        r"(?i)https://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]+",
        "webhook.office.com",
    ),
    _p(
        "mattermost_token",
        r"(?i)mattermost.{0,20}?[=:]\s*[\"']?([a-z0-9]{26})(?![a-z0-9])",
        "mattermost",
        group=1,
        context=True,
    ),
    # -- payments -----------------------------------------------------------------------------
    _p(
        "stripe_key",
        r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}",  # pk_: publishable
        "_live_",
        "_test_",
        "_prod_",
        inner=True,
    ),
    _prefixed("stripe_webhook_secret", "whsec_", r"[A-Za-z0-9+/=]{24,}"),
    _p(
        "square_token",
        r"(?<![A-Za-z0-9_])(?:EAAA[A-Za-z0-9_+=-]{60}|sq0atp-[0-9A-Za-z_-]{22}|"
        r"sq0csp-[0-9A-Za-z_-]{43})",
        "eaaa",
        "sq0atp-",
        "sq0csp-",
    ),
    _p(
        "braintree_token",
        r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}",
        "access_token$",
    ),
    _p(
        "shopify_token",
        r"(?<![A-Za-z0-9_])shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _END,
        "shpat_",
        "shpca_",
        "shppa_",
        "shpss_",
    ),
    _p(
        "plaid_token",
        r"(?<![A-Za-z0-9_])(?:access|public)-(?:sandbox|development|production)-"
        r"[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}",
        "-sandbox-",
        "-development-",
        "-production-",
        inner=True,
    ),
    _p("razorpay_key", r"(?<![A-Za-z0-9_])rzp_(?:live|test)_[A-Za-z0-9]{14,}", "rzp_"),
    _p("flutterwave_key", r"FLW(?:SEC|PUB)K(?:_TEST)?-[a-h0-9]{32}-X", "flwseck", "flwpubk"),
    _p("shippo_token", r"(?<![A-Za-z0-9_])shippo_(?:live|test)_[a-f0-9]{40}", "shippo_"),
    _p("easypost_key", r"(?<![A-Za-z0-9_])EZ[AT]K[A-Za-z0-9]{54}" + _END, "ezak", "eztk"),
    _p("duffel_token", r"(?<![A-Za-z0-9_])duffel_(?:test|live)_[A-Za-z0-9_=-]{43}", "duffel_"),
    _p("coinbase_key", r"organizations/[a-f0-9-]{36}/apiKeys/[a-f0-9-]{36}", "apikeys/"),
    # -- mail and SMS ---------------------------------------------------------------------------
    _p("sendgrid_key", r"(?<![A-Za-z0-9_])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _END, "sg."),
    _p("mailgun_key", r"(?<![A-Za-z0-9_])(?:pub)?key-[a-f0-9]{32}" + _END, "key-"),
    _p("mailchimp_key", r"(?<![A-Za-z0-9_])[a-f0-9]{32}-us\d{1,2}" + _END, "-us", inner=True),
    _p("twilio_key", r"(?<![A-Za-z0-9_])SK[a-f0-9]{32}" + _END, "sk"),
    _p(
        "brevo_key",
        r"(?<![A-Za-z0-9_])x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        "xkeysib-",
        "xsmtpsib-",
    ),
    _prefixed("mandrill_key", "md-", r"[A-Za-z0-9_-]{22}"),
    _p("resend_key", r"(?<![A-Za-z0-9_])re_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}" + _END, "re_"),
    _p(
        "postmark_token",
        r"(?i)x-postmark-(?:server|account)-token:\s*([a-f0-9-]{36})",
        "postmark",
        group=1,
        context=True,
    ),
    # -- AI APIs ------------------------------------------------------------------------------
    _p("anthropic_api_key", r"(?<![A-Za-z0-9_])sk-ant-[A-Za-z0-9_-]{20,}", "sk-ant-"),
    _p(
        "openai_api_key",
        r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|None-|or-v1-)?[A-Za-z0-9_-]{20,}",
        "sk-",
    ),
    _p(
        "huggingface_token",
        r"(?<![A-Za-z0-9_])(?:hf_[A-Za-z0-9]{34,}|api_org_[A-Za-z0-9]{34})" + _END,
        "hf_",
        "api_org_",
    ),
    _prefixed("groq_api_key", "gsk_", r"[A-Za-z0-9]{52}"),
    _prefixed("replicate_token", "r8_", r"[A-Za-z0-9]{37}"),
    _prefixed("perplexity_api_key", "pplx-", r"[A-Za-z0-9]{48}"),
    _prefixed("xai_api_key", "xai-", r"[A-Za-z0-9]{70,}"),
    _prefixed("fireworks_api_key", "fw_", r"[A-Za-z0-9]{24}"),
    _prefixed("pinecone_api_key", "pcsk_", r"[A-Za-z0-9_]{50,}"),
    _prefixed("cerebras_api_key", "csk-", r"[a-z0-9]{48}"),
    _p("elevenlabs_api_key", r"(?<![A-Za-z0-9_])sk_[a-f0-9]{48}" + _END, "sk_"),
    # -- productivity and platforms -------------------------------------------------------------
    _prefixed("linear_api_key", "lin_api_", r"[A-Za-z0-9]{40}"),
    _p("airtable_token", r"(?<![A-Za-z0-9_])pat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _END, "pat"),
    _p(
        "notion_token",
        r"(?<![A-Za-z0-9_])(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})" + _END,
        "secret_",
        "ntn_",
    ),
    _prefixed("figma_token", "figd_", r"[A-Za-z0-9_-]{40,}"),
    _p("dropbox_token", r"(?<![A-Za-z0-9_])sl\.[A-Za-z0-9_-]{130,}", "sl."),
    _prefixed("contentful_token", "CFPAT-", r"[A-Za-z0-9_-]{43}"),
    _prefixed("typeform_token", "tfp_", r"[A-Za-z0-9_-]{40,}"),
    _p("frameio_token", r"(?<![A-Za-z0-9_])fio-u-[A-Za-z0-9_=-]{64}", "fio-u-"),
    _p(
        "hubspot_token",
        r"(?<![A-Za-z0-9_])pat-(?:na|eu)1-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}",
        "pat-na1-",
        "pat-eu1-",
    ),
    _p("lob_key", r"(?<![A-Za-z0-9_])(?:live|test)_(?:pub_)?[a-f0-9]{35}" + _END, "live_", "test_"),
    _prefixed("adafruit_key", "aio_", r"[A-Za-z0-9]{28}"),
    _p("twitter_bearer_token", r"(?<![A-Za-z0-9])A{20,}[A-Za-z0-9%]{30,}", "aaaaaaaaaaaaaaaaaaaa"),
    _p("facebook_token", r"(?<![A-Za-z0-9_])EAA[A-Za-z0-9]{100,}", "eaa"),
    _p(
        "firebase_fcm_key",
        r"(?<![A-Za-z0-9_])AAAA[A-Za-z0-9_-]{7}:[A-Za-z0-9_-]{140}",
        "aaaa",
    ),
    _prefixed("onepassword_service_token", "ops_", r"eyJ[A-Za-z0-9+/=_-]{100,}"),
    _p(
        "okta_token",
        r"(?i)okta.{0,20}?[=:]\s*[\"']?(00[A-Za-z0-9_-]{40})(?![A-Za-z0-9_-])",
        "okta",
        group=1,
        context=True,
    ),
    _prefixed(
        "authress_key",
        "sc_",
        r"[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_-][a-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}",
    ),
    # -- credentials in general-purpose forms -------------------------------------------------
    _p(
        "connection_string_password",
        r"://[^\s:/?#@\"'<>]*:([^\s@/\"'<>]+)@",
        "://",
        group=1,
    ),
    _p(
        "bearer_token",
        r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{12,}=*)",
        "bearer",
        group=1,
        context=True,
    ),
    _p(
        "authorization_header",
        r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:basic|bearer|token|digest|"
        r"apikey|api-key|sso-key|ssws|negotiate|ntlm)\s+(?![<{$%\[])([^\s\"',;]{4,})",
        "authorization",
        group=1,
        context=True,
    ),
    _p(
        "basic_auth",
        rf"(?<![A-Za-z0-9])[Bb]asic\s+([{_B64}]{{8,}}={{0,2}})(?![{_B64}=])",
        "basic",
        group=1,
        context=True,
    ),
    _p(
        "cookie_header",
        r"(?i)(?<![\w-])(?:set-)?cookie[\"']?\s*:\s*[\"']?([^\r\n\"'\\]+)",
        "cookie",
        group=1,
        context=True,
    ),
    _p(
        "curl_user",
        r"(?:\s-u|--user)[ \t=]+[\"']?[^\s:\"']+:([^\s\"']+)",
        "-u",
        "--user",
        group=1,
        context=True,
    ),
    _p(
        "ldap_bind_password",
        r"\bldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn)\b[^\n]*?\s-w\s+"
        r"[\"']?([^\s\"']+)",
        "ldap",
        group=1,
        context=True,
    ),
    _p(
        "netrc_password",
        r"(?i)\bmachine\s+\S+(?:\s+login\s+\S+)?\s+password\s+(\S+)",
        "machine",
        group=1,
        context=True,
    ),
    SecretPattern(
        "credit_card",
        re.compile(
            r"(?:4\d{3}|5[1-5]\d{2}|2[2-7]\d{2}|3[47]\d{2}|3[0689]\d{2}|"
            r"6(?:011|5\d{2}|4[4-9]\d|2\d{2})|35\d{2})(?:[ -]?\d){9,15}(?![\w-]|\.\d)"
        ),
        not_after=re.compile(r"[\w.-]"),
        # on the text with every digit as 0: a literal-led search, fast
        prefilter=re.compile(r"0000[ -]?0000[ -]?0000"),
    ),
)
"""The token formats, in the order they are tried (the more specific first)."""

# Patterns whose match must pass a final test.
CHECKS: dict[str, Callable[[str], bool]] = {
    "credit_card": luhn_valid,
    "bearer_token": _has_digit_or_upper,
    "basic_auth": lambda text: len(text.split()[-1]) >= 8,
}
