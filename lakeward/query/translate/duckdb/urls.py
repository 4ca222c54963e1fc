"""URL functions as Trino defines them (java.net.URI's parts; NULL for what it rejects).

DuckDB has none but url_encode/url_decode, which differ from Java's
URLEncoder/URLDecoder on the space (``+``), ``*`` and ``~``; the parts of a URL
are read here with RFC 3986's regular expression. A URL holding a character
java.net.URI rejects (a space, a quote, ``<>\\^`{|}``) has no parts: NULL.
"""

from __future__ import annotations

from sqlglot import exp

_SCHEME = "[a-zA-Z][a-zA-Z0-9+.-]*"

MACROS: list[str] = [
    "CREATE MACRO trino_url(u) AS CASE WHEN regexp_matches(u, '[\\x00-\\x20\\x7f\"<>\\\\^`{|}]') "
    "THEN NULL ELSE u END",
    "CREATE MACRO trino_url_authority(u) AS "
    f"regexp_extract(trino_url(u), '^{_SCHEME}://([^/?#]*)', 1)",
    "CREATE MACRO trino_url_host(u) AS "
    "nullif(regexp_extract(trino_url_authority(u), '^(?:[^@]*@)?([^:]*)', 1), '')",
    "CREATE MACRO trino_url_port(u) AS "
    "CAST(nullif(regexp_extract(trino_url_authority(u), ':([0-9]+)$', 1), '') AS BIGINT)",
    "CREATE MACRO trino_url_protocol(u) AS "
    f"nullif(regexp_extract(trino_url(u), '^({_SCHEME}):', 1), '')",
    "CREATE MACRO trino_url_path(u) AS "
    f"regexp_extract(trino_url(u), '^(?:{_SCHEME}:)?(?://[^/?#]*)?([^?#]*)', 1)",
    "CREATE MACRO trino_url_query(u) AS CASE WHEN regexp_matches(trino_url(u), '^[^#]*[?]') "
    "THEN regexp_extract(u, '^[^?#]*[?]([^#]*)', 1) END",
    "CREATE MACRO trino_url_fragment(u) AS CASE WHEN contains(trino_url(u), '#') "
    "THEN regexp_extract(u, '#(.*)$', 1) END",
    # The first name=value pair of the query with that name; '' for a name without '='.
    "CREATE MACRO trino_url_parameter(u, name) AS list_transform("
    "list_filter(string_split(trino_url_query(u), '&'), lambda e: split_part(e, '=', 1) = name), "
    "lambda e: CASE WHEN contains(e, '=') THEN e[strpos(e, '=') + 1:] ELSE '' END)[1]",
    # Java's URLEncoder: '+' for a space; '*' kept and '~' encoded, unlike DuckDB's.
    "CREATE MACRO trino_url_encode(s) AS "
    "replace(replace(replace(url_encode(s), '%20', '+'), '%2A', '*'), '~', '%7E')",
    "CREATE MACRO trino_url_decode(s) AS url_decode(replace(s, '+', ' '))",
]

_RENAMED = {
    f"url_{part}": f"trino_url_{part.removeprefix('extract_')}"
    for part in (
        "extract_host", "extract_port", "extract_protocol", "extract_path", "extract_query",
        "extract_fragment", "extract_parameter", "encode", "decode",
    )
}  # fmt: skip


def urls(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Anonymous) and node.name.lower() in _RENAMED:
        return exp.Anonymous(this=_RENAMED[node.name.lower()], expressions=node.expressions)
    return node


REWRITES = [urls]
REFUSED: dict[str, str] = {}
